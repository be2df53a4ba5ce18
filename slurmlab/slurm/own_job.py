"""The job this process runs in: a kernel of JupyterHub's batchspawner, of Open OnDemand, or one started by salloc.

``SLURM_JOB_ID`` in the environment names it, but the environment is only a claim (a shell that kept it after its
job ended, a copied ``env``): :func:`find_own_job` takes the job as this session's only when Slurm says it exists,
is RUNNING and belongs to this process's uid (``squeue``'s numeric ``%U``, never a name), and when this process is
inside it by what the kernel of this machine says, which no environment variable changes:

- its cgroup names the job (``…/job_<id>/…``: proctrack/cgroup, task/cgroup);
- or one of its ancestors is that job's ``slurmstepd`` (its process title is ``slurmstepd: [<id>.<step>]``);
- or one of its ancestors is a ``salloc`` in the session Slurm recorded for the job (``AllocSID``): salloc runs
  its command on the submit host, outside any node of the job.

One ``squeue`` asks Slurm; the rest is read from ``/proc``. The job found is followed as an
:meth:`~slurmlab.slurm.allocation.Allocation.own` allocation: the kernel does not own it and never cancels it.
"""

from __future__ import annotations

import os
import re
from collections.abc import Iterator, Mapping
from dataclasses import dataclass

from slurmlab.errors import JobNotFoundError, ParseError, SlurmError
from slurmlab.slurm import identity
from slurmlab.slurm.job_environment import inside_job, job_id_of
from slurmlab.slurm.query import Query, run_query
from slurmlab.slurm.runner import Runner, RunResult

__all__ = ["OwnJob", "SlurmSays", "find_own_job", "inside_evidence", "parse_own_job"]

PROC = "/proc"
_CGROUP_JOB = re.compile(r"/job_(\d+)(?:/|$)")
_MAX_ANCESTORS = 64  # a deeper tree is not a process tree


@dataclass(frozen=True)
class SlurmSays:
    """What one ``squeue`` says of the job (numbers and Slurm's own state words only: no free text)."""

    job_id: str
    uid: int
    state: str
    alloc_sid: int | None


@dataclass(frozen=True)
class OwnJob:
    """The outcome of :func:`find_own_job`: ``job_id`` when the job is this session's, else ``problem`` says why
    not (None for both: not inside a job at all)."""

    job_id: str | None = None
    problem: str | None = None
    evidence: str | None = None  # how this process was found inside it

    def __bool__(self) -> bool:
        return self.job_id is not None


def parse_own_job(result: RunResult) -> SlurmSays | None:
    """``squeue -O JobID:|,UserID:|,State:|,AllocSID:|`` of one job; None when Slurm lists nothing."""
    lines = [line for line in result.stdout.splitlines() if line.strip()]
    if not lines:
        return None
    fields = [f.strip() for f in lines[0].split("|")]
    if len(fields) < 4 or not all(f.isascii() and f.isdigit() for f in (fields[0], fields[1])):
        raise ParseError("squeue own job line", lines[0], hint="expected JOBID|UID|STATE|ALLOCSID|")
    sid = fields[3]
    return SlurmSays(
        job_id=fields[0],
        uid=int(fields[1]),
        state=fields[2],
        alloc_sid=int(sid) if sid.isascii() and sid.isdigit() else None,
    )


def _query(job_id: str) -> Query[SlurmSays | None]:
    return Query(
        ("squeue", "-h", "-t", "all", "-j", job_id, "-O", "JobID:|,UserID:|,State:|,AllocSID:|"),
        parse_own_job,
    )


# ---- what this machine's kernel says of this process ----------------------------------------------
def _read(path: str) -> str:
    try:
        with open(path, "rb") as f:
            return f.read(65536).decode("utf-8", "replace")
    except OSError:
        return ""


def _stat(pid: int) -> tuple[str, int, int] | None:
    """(comm, parent pid, session id) of ``pid`` from /proc/PID/stat; None when it cannot be read."""
    text = _read(f"{PROC}/{pid}/stat")
    head, sep, tail = text.rpartition(")")
    fields = tail.split()
    if not sep or len(fields) < 4 or "(" not in head:
        return None
    try:
        return head.split("(", 1)[1], int(fields[1]), int(fields[3])
    except ValueError:
        return None


def _ancestors(pid: int) -> Iterator[tuple[int, str, int]]:
    """(pid, comm, session id) of ``pid``'s parent, its parent, ... up to (not including) init."""
    seen = {pid}
    stat = _stat(pid)
    while stat is not None and len(seen) < _MAX_ANCESTORS:
        parent = stat[1]
        if parent <= 1 or parent in seen:
            return
        seen.add(parent)
        stat = _stat(parent)
        if stat is not None:
            yield parent, stat[0], stat[2]


def _cmdline(pid: int) -> str:
    return _read(f"{PROC}/{pid}/cmdline").replace("\0", " ").strip()


def inside_evidence(job_id: str, alloc_sid: int | None, pid: int | None = None) -> str | None:
    """How this process (``pid``) is inside job ``job_id`` by what /proc says, or None when nothing shows it (see
    the module's words). A cgroup naming another job says it is not."""
    pid = os.getpid() if pid is None else pid
    cgroup_jobs = set(_CGROUP_JOB.findall(_read(f"{PROC}/{pid}/cgroup")))
    if job_id in cgroup_jobs:
        return f"its cgroup is job {job_id}'s"
    if cgroup_jobs:
        return None
    for ancestor, comm, sid in _ancestors(pid):
        if comm == "slurmstepd" and _cmdline(ancestor).startswith(f"slurmstepd: [{job_id}."):
            return f"it runs under job {job_id}'s slurmstepd (pid {ancestor})"
        if comm == "salloc" and alloc_sid is not None and sid == alloc_sid:
            return f"it runs under the salloc of job {job_id} (pid {ancestor})"
    return None


def find_own_job(
    runner: Runner | None = None, env: Mapping[str, str] | None = None, pid: int | None = None
) -> OwnJob:
    """The job this process (``pid``: this one by default) runs in, checked with Slurm and /proc (the module's
    words); one ``squeue``, none when the environment names no job."""
    env = os.environ if env is None else env
    job_id = job_id_of(env)
    if job_id is None:
        if inside_job(env):
            return OwnJob(problem="SLURM_JOB_ID is set but is not a job id")
        return OwnJob()
    named = f"SLURM_JOB_ID={job_id} is set, but"
    try:
        says = run_query(_query(job_id), runner)
    except JobNotFoundError:
        says = None
    except SlurmError as exc:
        return OwnJob(problem=f"{named} Slurm could not say what job {job_id} is: {exc.message}")
    if says is None or says.job_id != job_id:
        return OwnJob(problem=f"{named} Slurm does not know job {job_id} (it ended long ago?)")
    if says.uid != identity.current_uid():
        return OwnJob(problem=f"{named} job {job_id} is not yours")
    if says.state != "RUNNING":
        return OwnJob(problem=f"{named} job {job_id} is {says.state}, not running")
    evidence = inside_evidence(job_id, says.alloc_sid, pid)
    if evidence is None:
        return OwnJob(
            problem=f"{named} this process is not inside job {job_id} (an environment kept from it?)"
        )
    return OwnJob(job_id=job_id, evidence=evidence)
