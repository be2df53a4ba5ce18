"""Jobs: the poller's cheap state call, full detail of one job, listings, lookups by name or tag, cancel.

The JSON or text form is chosen from the Slurm version: on 22.05 the ``scontrol show job -d`` text is the
only place that names a job's GPU indices. A listing in which some records cannot be read still answers
with the others; the bad ones travel in ``JobList.problems``. A JSON answer with no jobs at all is believed
only once ``scontrol ping`` finds the controller up: 24.11+ print that same answer when slurmctld is down.
"""

from __future__ import annotations

from collections.abc import Sequence

from slurmlab.core.slurm.jobid import check_job_id
from slurmlab.core.slurm.models import Job, Node
from slurmlab.core.slurm.parse_json import parse_jobs_json
from slurmlab.core.slurm.parse_text import parse_scontrol_jobs
from slurmlab.core.slurm.squeue_brief import BRIEF_FORMAT, JobBrief, parse_squeue_brief
from slurmlab.core.slurm.states import ACTIVE
from slurmlab.errors import JobNotFoundError, ParseError
from slurmlab.slurm.controller import (
    SCONTROL_JSON_SINCE,
    aconfirm_answering,
    aslurm_version,
    confirm_answering,
    slurm_version,
)
from slurmlab.slurm.identity import uid_of
from slurmlab.slurm.node_queries import alist_nodes, list_nodes
from slurmlab.slurm.owners import ajob_owners, check_mine, job_owners
from slurmlab.slurm.query import JobList, Listing, Query, arun_query, read_json, run_query
from slurmlab.slurm.runner import Runner, RunResult, get_runner

__all__ = [
    "ACTIVE_STATES",
    "alist_jobs",
    "brief_states",
    "cancel_job",
    "hold_job",
    "job_detail",
    "job_ids_by_name",
    "list_jobs",
    "my_tagged_jobs",
    "release_job",
]

ACTIVE_STATES = ACTIVE


# ---- the poller's cheap call ----------------------------------------------------------------------
def _brief_query(ids: Sequence[str]) -> Query[dict[str, JobBrief]]:
    def parse(result: RunResult) -> dict[str, JobBrief]:
        out: dict[str, JobBrief] = {}
        for b in parse_squeue_brief(result.stdout):
            out[str(b.job_id)] = b
        return out

    return Query(("squeue", "-h", "-t", "all", "-j", ",".join(ids), "-o", BRIEF_FORMAT), parse)


def brief_states(ids: Sequence[str | int], runner: Runner | None = None) -> dict[str, JobBrief]:
    """State of the watched jobs in one cheap text call. Jobs the controller forgot are absent."""
    wanted = [str(i) for i in ids]
    if not wanted:
        return {}
    from slurmlab.slurm import pyslurm_backend

    # pyslurm answers only for the Slurm it was imported with; a sandbox or a replaying runner keeps squeue
    if pyslurm_backend.selected() and pyslurm_backend.serves(runner):
        return pyslurm_backend.brief_states(wanted, runner)
    try:
        return run_query(_brief_query(wanted), runner)
    except JobNotFoundError:
        # squeue refuses the whole list when one id is unknown (a purged job): ask one by one
        out: dict[str, JobBrief] = {}
        for jid in wanted:
            try:
                one: dict[str, JobBrief] = run_query(_brief_query([jid]), runner)
                out.update(one)
            except JobNotFoundError:
                continue
        return out


# ---- full detail ----------------------------------------------------------------------------------
def _read_jobs(result: RunResult, json_form: bool, nodes: Sequence[Node] | None = None) -> JobList:
    problems: list[ParseError] = []
    if json_form:
        jobs = parse_jobs_json(read_json(result), problems=problems, nodes=nodes)
    else:
        jobs = parse_scontrol_jobs(result.stdout, problems=problems)
    return JobList(jobs, problems)


# data_parser v0.0.39/40 (Slurm 23.02 - 23.11) print a job's cores per socket without the node's
# cores per socket, so CPU_IDs need the node records; v0.0.41 (24.05) on carry every core.
_JOB_JSON_NEEDS_NODES = ((23, 2), (24, 5))


def _needs_nodes(version: tuple[int, ...]) -> bool:
    return _JOB_JSON_NEEDS_NODES[0] <= version[:2] < _JOB_JSON_NEEDS_NODES[1]


def _jobs_query(
    version: tuple[int, ...], job_id: str | None = None, nodes: Sequence[Node] | None = None
) -> Query[JobList]:
    tail = (job_id,) if job_id else ()
    if version >= SCONTROL_JSON_SINCE:
        return Query(("scontrol", "--json", "show", "job", "-d", *tail), lambda r: _read_jobs(r, True, nodes))
    return Query(("scontrol", "show", "job", "-d", *tail), lambda r: _read_jobs(r, False))


def _maybe_silent(q: Query[JobList], jobs: JobList) -> bool:
    """No jobs at all from ``scontrol --json``: an empty answer, or (24.11+) a controller that is down.
    The text form fails with "Unable to contact slurm controller" instead, so it needs no second look."""
    return "--json" in q.argv and not jobs and not jobs.problems


def _run_jobs_query(q: Query[JobList], runner: Runner) -> JobList:
    jobs = run_query(q, runner)
    if _maybe_silent(q, jobs):
        confirm_answering(q.argv, runner)
    return jobs


async def _arun_jobs_query(q: Query[JobList], runner: Runner) -> JobList:
    jobs = await arun_query(q, runner)
    if _maybe_silent(q, jobs):
        await aconfirm_answering(q.argv, runner)
    return jobs


def job_detail(job_id: str | int, runner: Runner | None = None) -> Job:
    """Full detail of one job, with its GPU indices per node.

    Only the record whose id is ``job_id`` answers: ``scontrol show job 0`` lists other jobs,
    and taking the first of them once showed (and checked the owner of) a stranger's job.
    A record of that id that cannot be read raises its ParseError. JobNotFoundError means the
    controller answered without it; a controller that did not answer raises ControllerDownError.
    """
    jid = check_job_id(job_id)
    runner = runner or get_runner()
    version = slurm_version(runner)
    nodes = list_nodes(runner) if _needs_nodes(version) else None
    jobs = _run_jobs_query(_jobs_query(version, jid, nodes), runner)
    for job in jobs:
        if _is_that_job(job, jid):
            return job
    for problem in jobs.problems:
        if problem.record_id == jid:
            raise problem
    raise JobNotFoundError(
        f"job {jid} is not known to the controller",
        argv=["scontrol", "show", "job", jid],
        hint="it may have ended long ago (Slurm forgets ended jobs); `%squeue` lists yours",
    )


def _is_that_job(job: Job, jid: str) -> bool:
    if "_" in jid:
        array, task = jid.split("_", 1)
        return str(job.array_job_id) == array and str(job.array_task_id) == task
    return str(job.job_id) == jid


# ---- listings ---------------------------------------------------------------------------------------
def _filter_jobs(jobs: JobList, owners: dict[int, int] | None, uid: int | None, active_only: bool) -> JobList:
    kept = [
        j
        for j in jobs
        if (uid is None or (owners or {}).get(j.job_id) == uid)
        and (not active_only or j.state in ACTIVE_STATES)
    ]
    return JobList(kept, jobs.problems)


def list_jobs(
    runner: Runner | None = None,
    *,
    user: str | None = None,
    all_users: bool = False,
    active_only: bool = True,
) -> JobList:
    """Jobs with full detail (GPU indices per node): this user's by default, or everyone's.

    "This user's" is decided by uid from ``squeue`` (:func:`~slurmlab.slurm.owners.job_owners`), not from the
    records. No jobs from a controller that does not answer raises ControllerDownError, not an empty list.
    On 22.05's text form the records are held to squeue's list of job ids (see :func:`_held_to_squeue`).
    """
    runner = runner or get_runner()
    version = slurm_version(runner)
    nodes = list_nodes(runner) if _needs_nodes(version) else None
    q = _jobs_query(version, None, nodes)
    jobs = _run_jobs_query(q, runner)
    text_form = "--json" not in q.argv
    owners = job_owners(runner) if text_form or not all_users else None
    if text_form and owners is not None:
        jobs, again = _held_to_squeue(jobs, owners)
        jobs = _with_records_read_again(jobs, {jid: _one_text_record(jid, runner) for jid in again})
    if all_users:
        return _filter_jobs(jobs, None, None, active_only)
    return _filter_jobs(jobs, owners, uid_of(user), active_only)


async def alist_jobs(
    runner: Runner | None = None,
    *,
    user: str | None = None,
    all_users: bool = False,
    active_only: bool = True,
) -> JobList:
    runner = runner or get_runner()
    version = await aslurm_version(runner)
    nodes = await alist_nodes(runner) if _needs_nodes(version) else None
    q = _jobs_query(version, None, nodes)
    jobs = await _arun_jobs_query(q, runner)
    text_form = "--json" not in q.argv
    owners = await ajob_owners(runner) if text_form or not all_users else None
    if text_form and owners is not None:
        jobs, again = _held_to_squeue(jobs, owners)
        jobs = _with_records_read_again(jobs, {jid: await _aone_text_record(jid, runner) for jid in again})
    if all_users:
        return _filter_jobs(jobs, None, None, active_only)
    return _filter_jobs(jobs, owners, uid_of(user), active_only)


# ---- the text form, held to squeue's ids -------------------------------------------------------------
# A job name may hold a line break, and the text form cannot tell a forged record start (``a\nJobId=V …`` in
# another user's name) from a real one. squeue's ``%A|%U`` lines hold no free text, so they say which jobs
# exist: a record of a job squeue does not list is invented and left out; a listed job whose record was lost
# (printed twice, or swallowed by a neighbour's forged lines) is read again on its own, where only its own
# fields are printed. At most this many are read again per listing, so a flood of forgeries cannot turn one
# listing into an RPC storm; the rest stay reported as problems.
MAX_RECORDS_READ_AGAIN = 8


def _held_to_squeue(jobs: JobList, owners: dict[int, int]) -> tuple[JobList, list[str]]:
    """The records of jobs squeue lists (each id once), the others as problems, and the listed ids to read
    again: those whose record is missing or was refused."""
    kept: list[Job] = []
    problems = list(jobs.problems)
    for job in jobs:
        if job.job_id in owners:
            kept.append(job)
        else:
            problems.append(
                ParseError(
                    "scontrol job record",
                    f"JobId={job.job_id}",
                    record_id=str(job.job_id),
                    hint=f"squeue does not list a job {job.job_id}: the record is a forged line in another job's "
                    "free text (a name or comment), and is left out",
                )
            )
    have = {job.job_id for job in kept}
    refused = {p.record_id for p in jobs.problems if p.record_id}
    again = sorted((str(jid) for jid in owners if jid not in have and str(jid) in refused), key=int)
    return Listing(kept, problems), again[:MAX_RECORDS_READ_AGAIN]


def _with_records_read_again(jobs: JobList, read: dict[str, Job | None]) -> JobList:
    """``jobs`` with the records that read cleanly on their own; a problem of such a job is settled."""
    found = {jid: job for jid, job in read.items() if job is not None}
    kept = list(jobs) + list(found.values())
    problems = [p for p in jobs.problems if p.record_id not in found]
    return Listing(kept, problems)


def _one_text_record(jid: str, runner: Runner) -> Job | None:
    try:
        jobs = run_query(
            Query(("scontrol", "show", "job", "-d", jid), lambda r: _read_jobs(r, False)), runner
        )
    except (JobNotFoundError, ParseError):
        return None
    return next((job for job in jobs if _is_that_job(job, jid)), None)


async def _aone_text_record(jid: str, runner: Runner) -> Job | None:
    try:
        jobs = await arun_query(
            Query(("scontrol", "show", "job", "-d", jid), lambda r: _read_jobs(r, False)), runner
        )
    except (JobNotFoundError, ParseError):
        return None
    return next((job for job in jobs if _is_that_job(job, jid)), None)


def job_ids_by_name(name: str, runner: Runner | None = None) -> list[str]:
    """Ids of this user's jobs with that exact name (how a pending salloc is found)."""
    q: Query[list[str]] = Query(
        ("squeue", "-h", "--me", "-t", "all", "-n", name, "-o", BRIEF_FORMAT),
        lambda r: [str(b.job_id) for b in parse_squeue_brief(r.stdout)],
    )
    return run_query(q, runner)


def my_tagged_jobs(prefix: str, runner: Runner | None = None) -> JobList:
    """This user's active jobs whose comment starts with ``prefix:`` (allocations of slurmlab kernels)."""
    jobs = list_jobs(runner)
    return JobList([j for j in jobs if (j.comment or "").startswith(prefix + ":")], jobs.problems)


def cancel_job(job_id: str | int, runner: Runner | None = None, *, only_mine: bool = True) -> None:
    """scancel one job of this user.

    Raises JobNotFoundError when the controller does not know it, and NotYourJobError when it
    belongs to someone else: Slurm lets an operator account (root, a coordinator) cancel
    anything, so slurmlab checks the owner itself, by uid (``only_mine=False`` skips that, for
    a caller that has just checked it).
    """
    jid = check_job_id(job_id)
    runner = runner or get_runner()
    if only_mine:
        check_mine(jid, runner)
    runner.run(["scancel", jid])


def hold_job(job_id: str | int, runner: Runner | None = None, *, only_mine: bool = True) -> None:
    """``scontrol uhold`` one pending job of this user: Slurm will not start it until it is released.
    The owner is checked as :func:`cancel_job` checks it (an operator may hold anyone's job).

    ``uhold``, not ``hold``: for a plain user the two are the same, but ``hold`` by an operator account (root,
    SlurmUser: the sandbox's user) is an administrator's hold (``JobHeldAdmin``) that its owner cannot lift;
    ``uhold`` is always the user's own (``JobHeldUser``), which :func:`release_job` lifts."""
    _scontrol_on_mine("uhold", job_id, runner, only_mine)


def release_job(job_id: str | int, runner: Runner | None = None, *, only_mine: bool = True) -> None:
    """``scontrol release`` one held job of this user (a user's own hold; an administrator's stays)."""
    _scontrol_on_mine("release", job_id, runner, only_mine)


def _scontrol_on_mine(verb: str, job_id: str | int, runner: Runner | None, only_mine: bool) -> None:
    jid = check_job_id(job_id)
    runner = runner or get_runner()
    if only_mine:
        check_mine(jid, runner)
    runner.run(["scontrol", verb, jid])
