"""Optional: answer the poller's state query through pyslurm instead of ``squeue``.

Opt-in (``SLURMLAB_BACKEND=pyslurm``) and deliberately small: only the cheap brief-state query uses it,
everything else still goes through the runner. pyslurm's releases follow Slurm's (pyslurm 25.11.x builds
only against Slurm 25.11), so it cannot run beside this project's 22.05 sandbox: the tests drive this
module with a stand-in built from pyslurm's source (tests/unit/slurm/pyslurm_standin.py).

Checked against pyslurm 25.11.2: PySlurm/pyslurm tag v25.11.2, commit b76f1867e525, whose files are those
of PyPI's ``pyslurm-25.11.2.tar.gz``. What is read of a job is :class:`PyslurmJob`, each attribute with the
type pyslurm's ``pyslurm/core/job/job.pyx`` gives it; the code of every one is the same in v24.11.0,
v25.5.0, v25.11.0 and v25.11.2. The calls: ``Job.load(id)`` is slurm_load_job, plus slurm_get_job_steps
for a job that is not pending; ``Jobs.load()`` is one slurm_load_jobs of the whole queue; a failed call
raises ``RPCError``, whose text is Slurm's own (slurm_strerror: "Invalid job id specified", ...).

Where it differs from the squeue path, and why it stays opt-in: pyslurm holds the GIL through each RPC
(its slurm.h declarations are not ``nogil``), so a hung controller stalls every Python thread of the kernel
for Slurm's own MessageTimeout, and the runner's timeout and munge probe do not apply. pyslurm also reads the
slurm.conf it was imported with, so it answers only for a runner that talks to that Slurm (:func:`serves`);
any other runner (a sandbox, another cluster, a replaying FakeRunner) keeps squeue.
"""

from __future__ import annotations

import importlib
import os
from collections.abc import Iterable, Mapping, Sequence
from datetime import datetime, timezone
from types import ModuleType
from typing import Protocol

from slurmlab.core.slurm.gres import GresItem, parse_gres
from slurmlab.core.slurm.hostlist import expand
from slurmlab.core.slurm.squeue_brief import JobBrief
from slurmlab.errors import JobNotFoundError, MissingExtraError, ParseError, SlurmError
from slurmlab.slurm.failures import classify_failure
from slurmlab.slurm.runner import Runner, get_runner

__all__ = ["CHECKED_AGAINST", "PyslurmJob", "brief_states", "selected", "serves"]

ENV = "SLURMLAB_BACKEND"
CHECKED_AGAINST = "pyslurm 25.11.2 (PySlurm/pyslurm v25.11.2, commit b76f1867e525)"
_NO_CONF = "(Slurm's default)"
# the SLURM_CONF this process had when slurmlab first imported pyslurm: libslurm reads its slurm.conf then,
# once (an import by the user's own code before that is not seen)
_imported_with: list[str] = []


class PyslurmJob(Protocol):
    """What is read of a ``pyslurm.Job`` (25.11.2, ``pyslurm/core/job/job.pyx``), with pyslurm's types.
    There is no ``nodes``. The tests hold every name here to the list of pyslurm's own."""

    @property
    def id(self) -> int: ...
    @property
    def state(self) -> str: ...  # Slurm's job_state_string: "PENDING", "RUNNING", "COMPLETING", ...
    @property
    def state_reason(self) -> str | None: ...  # state_desc when set, else the reason; "None" reads as None
    @property
    def start_time(self) -> int | None: ...  # epoch seconds
    @property
    def end_time(self) -> int | None: ...  # epoch seconds
    @property
    def time_limit(self) -> int | None: ...  # minutes; None: unlimited or not set
    @property
    def run_time(self) -> int: ...  # seconds; 0 while pending
    @property
    def run_time_remaining(self) -> int | None: ...  # seconds; None without a limit
    @property
    def num_nodes(self) -> int | str | None: ...  # "UNLIMITED" for Slurm's INFINITE
    @property
    def allocated_nodes(self) -> str | None: ...  # a hostlist ("node[1-2]"); None while pending
    @property
    def partition(self) -> str | None: ...
    @property
    def user_name(self) -> str | None: ...  # the uid as text when this machine has no name for it
    @property
    def array_id(self) -> int | None: ...  # None for a job that is not part of an array
    @property
    def array_task_id(self) -> int | None: ...  # None for task 0 too: pyslurm reads 0 as "not set"
    @property
    def array_tasks_waiting(self) -> str | None: ...  # an array's pending tasks, its "%N" cut off
    @property
    def array_tasks_parallel(self) -> int | str | None: ...  # that N (array_max_tasks); None when unset
    # Slurm's tres_per_node ("gres/gpu:h100:2") as {"gres/gpu:h100": 2}. Not ``tres_per_node``, which reads
    # only key=value text and so is None for every "gres/gpu:2"; ``allocated_tres`` is the whole job's (and
    # new in 25.11.1)
    @property
    def gres_per_node(self) -> Mapping[str, int | Mapping[str, int | str]]: ...
    @property
    def name(self) -> str | None: ...  # raises UnicodeDecodeError for a name that is not UTF-8


def selected() -> bool:
    """True when the user asked for pyslurm (``SLURMLAB_BACKEND=pyslurm``)."""
    return os.environ.get(ENV, "").strip().lower() == "pyslurm"


def _pyslurm() -> ModuleType:
    conf = os.environ.get("SLURM_CONF") or _NO_CONF
    try:
        module = importlib.import_module("pyslurm")
    except ImportError as exc:
        raise MissingExtraError(f"{ENV}=pyslurm", "pyslurm", "pyslurm") from exc
    if not _imported_with:
        _imported_with.append(conf)
    return module


def serves(runner: Runner | None) -> bool:
    """Whether pyslurm talks to the Slurm this runner's commands talk to (imports it: MissingExtraError
    when it is not installed). A runner with its own slurm.conf or cluster is answered by squeue."""
    _pyslurm()
    r = runner or get_runner()
    return r.cluster is None and (r.configuration() or _NO_CONF) == _imported_with[0]


def _ts(epoch: int | None) -> datetime | None:
    return datetime.fromtimestamp(epoch, tz=timezone.utc) if epoch else None


def _rpc_failed(pyslurm: ModuleType, call: str, exc: Exception) -> SlurmError:
    if isinstance(exc, pyslurm.RPCError):
        # Slurm's own words (slurm_strerror), as squeue would print them: same exceptions, same next steps
        return classify_failure(("pyslurm", call), 1, str(exc))
    return SlurmError(f"pyslurm {call} failed: {type(exc).__name__}: {exc}", argv=("pyslurm", call))


def _load(pyslurm: ModuleType, wanted: list[int]) -> Iterable[PyslurmJob]:
    """The records for ``wanted``: one id as squeue -j does it (slurm_load_job), several in one
    slurm_load_jobs (squeue's way too), not one Job.load (two RPCs) per id."""
    if len(wanted) == 1:
        call = f"Job.load({wanted[0]})"
        try:
            one: PyslurmJob = pyslurm.Job.load(wanted[0])
            return [one]
        except Exception as exc:  # every failure becomes a SlurmError naming the call
            err = _rpc_failed(pyslurm, call, exc)
            if isinstance(err, JobNotFoundError):
                return []  # purged: absent, as from squeue
            raise err from exc
    try:
        every: list[PyslurmJob] = list(pyslurm.Jobs.load().values())
        return every
    except Exception as exc:  # as above
        raise _rpc_failed(pyslurm, "Jobs.load()", exc) from exc


def brief_states(ids: Sequence[str | int], runner: Runner | None = None) -> dict[str, JobBrief]:
    """What ``squeue -h -t all -j IDS -o BRIEF_FORMAT`` would give, keyed by job id; ``runner`` is not used
    (:func:`serves` decides whether pyslurm may answer for it). Jobs the controller forgot are absent."""
    pyslurm = _pyslurm()
    wanted = [int(i) for i in ids]
    if not wanted:
        return {}
    version = str(getattr(pyslurm, "__version__", "?"))
    out: dict[str, JobBrief] = {}
    try:
        for job in _load(pyslurm, wanted):
            # several ids come from the whole queue: only those asked for are read (other users' jobs are
            # not), with the tasks of an asked-for array (squeue -j ARRAY_ID lists them too)
            if job.id in wanted or job.array_id in wanted:
                out[str(job.id)] = _brief(job)
    except AttributeError as exc:
        raise SlurmError(
            f"pyslurm {version} does not have what slurmlab reads ({exc})",
            hint=f"slurmlab's pyslurm backend was checked against {CHECKED_AGAINST}: install that "
            f"(pip install 'slurmlab[pyslurm]'), or unset {ENV} to poll with squeue",
        ) from exc
    return out


def _brief(job: PyslurmJob) -> JobBrief:
    job_id = job.id
    nodelist = job.allocated_nodes or ""
    array_id, waiting, task_id = job.array_id, job.array_tasks_waiting, job.array_task_id
    if array_id is None:
        display, task = str(job_id), None
    elif waiting:
        # pyslurm cuts the "%N" limit off; squeue shows it, and N is array_max_tasks
        parallel = job.array_tasks_parallel
        task = f"{waiting}%{parallel}" if isinstance(parallel, int) else waiting
        display = f"{array_id}_[{task}]"
    else:
        # pyslurm reads task 0 as None (u32_parse: 0 is "not set"); a record with an array id and neither
        # pending tasks nor a task id is task 0
        task = str(task_id if task_id is not None else 0)
        display = f"{array_id}_{task}"
    try:
        nodes = tuple(expand(nodelist))
    except ParseError as exc:
        raise ParseError(f"pyslurm allocated_nodes of job {job_id}", nodelist, hint=exc.message) from None
    limit, remaining, num_nodes = job.time_limit, job.run_time_remaining, job.num_nodes
    return JobBrief(
        display_id=display,
        job_id=job_id,
        array_job_id=array_id,
        array_task=task,
        state=job.state,
        reason=job.state_reason,
        start_time=_ts(job.start_time),
        end_time=_ts(job.end_time),
        time_limit=limit * 60 if limit else None,
        # past its limit (being killed) a job has no time left, not a negative amount
        time_left=max(0, remaining) if remaining is not None else None,
        time_used=job.run_time,
        num_nodes=num_nodes if isinstance(num_nodes, int) else None,  # "UNLIMITED" is not a count
        nodelist=nodelist,
        nodes=nodes,
        partition=job.partition,
        user=job.user_name,
        tres_per_node=_gres_per_node(job),
        name=_name(job),
    )


def _name(job: PyslurmJob) -> str:
    # free text; pyslurm decodes it strictly, so another user's non-UTF-8 name raises here. The poll does not
    # need it (squeue's brief form leaves it out); the job's detail shows it, decoded safely
    try:
        return job.name or ""
    except UnicodeDecodeError:
        return ""


def _gres_per_node(job: PyslurmJob) -> tuple[GresItem, ...]:
    """pyslurm's {"gres/gpu:h100": 2} back into Slurm's text ("gres/gpu:h100:2"), read as squeue's %b is."""
    try:
        per_node = job.gres_per_node
    except ValueError as exc:  # pyslurm's own int() of a count it could not read
        raise ParseError(f"pyslurm gres_per_node of job {job.id}", str(exc)) from None
    parts = []
    for name_and_type, count in per_node.items():
        # a dict ({"count", "indexes"}) comes only from text with "IDX", which tres_per_node never has
        n = count["count"] if isinstance(count, Mapping) else count
        parts.append(f"{name_and_type}:{n}")
    text = ",".join(parts)
    try:
        return parse_gres(text)
    except ParseError as exc:
        raise ParseError(f"pyslurm gres_per_node of job {job.id}", text, hint=exc.message) from None
