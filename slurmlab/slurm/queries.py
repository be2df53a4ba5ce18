"""What the rest of slurmlab asks Slurm, each as an argv list through the one runner.

Every query is a pair (argv, parser) run by :func:`_run` or its asyncio twin, so the sync
and async APIs share one definition. The JSON or text form is chosen from the Slurm version
(detected once per configuration): ``scontrol --json`` exists from 23.02; on 22.05 the
``scontrol show … -d`` text is the only place that names a job's GPU indices.

API::

    slurm_version(runner) -> tuple[int, ...]            ping(runner) -> dict
    brief_states(ids, runner) -> {job_id: JobBrief}     (the poller's cheap call)
    job_detail(job_id, runner) -> Job                   (scontrol show job -d)
    job_owner_uid(job_id, runner) -> int                (squeue %U: the uid alone)
    job_owners(runner) -> {job_id: uid}                 (squeue %A|%U: every job's uid)
    list_jobs(runner, *, user=None, all_users=False, active_only=True) -> JobList
    list_nodes(runner) -> [Node]       list_partitions(runner) -> [Partition]
    cancel_job(job_id, runner)         job_ids_by_name(name, runner) -> [str]
    my_tagged_jobs(prefix, runner) -> [Job]             inventory(runner) -> ClusterInventory
    a<name>(...)  asyncio twins of the listing queries

Who owns a job is never read from a record that holds free text: a job name or comment is
whatever its submitter typed (``y UserId=root(0)``), so ownership comes from ``squeue``'s
``%U`` field alone, compared with this process's effective uid. A listing in which some
records cannot be read still answers with the others; the bad ones travel in
``JobList.problems`` so that every caller can say so instead of failing or hiding them.
"""

from __future__ import annotations

import json
import os
import pwd
import threading
from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass, replace
from typing import Any, Generic, TypeVar

from slurmlab.core.request.inventory import ClusterInventory, NodeInventory
from slurmlab.core.slurm.jobid import check_job_id
from slurmlab.core.slurm.models import Job, Node, Partition
from slurmlab.core.slurm.parse_json import parse_jobs_json, parse_nodes_json, parse_partitions_json
from slurmlab.core.slurm.parse_text import (
    parse_scontrol_jobs,
    parse_scontrol_nodes,
    parse_scontrol_partitions,
    parse_sinfo_node_states,
    parse_version,
)
from slurmlab.core.slurm.squeue_brief import BRIEF_FORMAT, JobBrief, parse_squeue_brief
from slurmlab.errors import JobNotFoundError, NotYourJobError, ParseError, SlurmError
from slurmlab.slurm.runner import Runner, RunResult, get_runner

__all__ = [
    "ACTIVE_STATES",
    "alist_jobs",
    "alist_nodes",
    "alist_partitions",
    "brief_states",
    "acheck_mine",
    "ajob_owner_uid",
    "ajob_owners",
    "cancel_job",
    "check_mine",
    "JobList",
    "Listing",
    "current_uid",
    "current_user",
    "default_partition",
    "inventory",
    "job_detail",
    "job_ids_by_name",
    "job_owner_uid",
    "job_owners",
    "list_jobs",
    "list_nodes",
    "list_partitions",
    "my_tagged_jobs",
    "node_states",
    "node_states_of",
    "ping",
    "slurm_version",
]

T = TypeVar("T")

ACTIVE_STATES = frozenset({"PENDING", "CONFIGURING", "RUNNING", "COMPLETING", "SUSPENDED", "REQUEUED",
                           "RESIZING", "SIGNALING", "STAGE_OUT", "STOPPED"})
SCONTROL_JSON_SINCE = (23, 2)


@dataclass(frozen=True)
class Query(Generic[T]):
    argv: tuple[str, ...]
    parse: Callable[[RunResult], T]


def _run(q: Query[T], runner: Runner | None) -> T:
    return q.parse((runner or get_runner()).run(list(q.argv)))


async def _arun(q: Query[T], runner: Runner | None) -> T:
    return q.parse(await (runner or get_runner()).arun(list(q.argv)))


# ---- version ------------------------------------------------------------------------------------
_versions: dict[tuple[str | None, str | None], tuple[int, ...]] = {}
_versions_lock = threading.Lock()


def _version_key(runner: Runner) -> tuple[str | None, str | None]:
    return (runner.slurm_conf or os.environ.get("SLURM_CONF"), runner.cluster)


def _parse_version_tuple(result: RunResult) -> tuple[int, ...]:
    text = parse_version(result.stdout)
    try:
        return tuple(int(p) for p in text.split(".")[:3])
    except ValueError as exc:
        raise ParseError("Slurm version", result.stdout, hint="expected `slurm 22.05.8`") from exc


_VERSION_QUERY: Query[tuple[int, ...]] = Query(("sinfo", "--version"), _parse_version_tuple)


def slurm_version(runner: Runner | None = None) -> tuple[int, ...]:
    """The Slurm version of the client commands, detected once per configuration."""
    runner = runner or get_runner()
    key = _version_key(runner)
    with _versions_lock:
        if key in _versions:
            return _versions[key]
    version = _run(_VERSION_QUERY, runner)
    with _versions_lock:
        _versions[key] = version
    return version


async def aslurm_version(runner: Runner | None = None) -> tuple[int, ...]:
    runner = runner or get_runner()
    key = _version_key(runner)
    with _versions_lock:
        if key in _versions:
            return _versions[key]
    version = await _arun(_VERSION_QUERY, runner)
    with _versions_lock:
        _versions[key] = version
    return version


def current_uid() -> int:
    """Whose jobs slurmlab acts on: the effective uid, which Slurm's munge credential carries too
    (``$USER``/``getpass`` come from the environment, which anyone can set)."""
    return os.geteuid()


def current_user() -> str:
    """The name of :func:`current_uid` (the uid itself when the passwd database has no entry)."""
    return user_name(current_uid())


def user_name(uid: int) -> str:
    try:
        return pwd.getpwuid(uid).pw_name
    except KeyError:
        return str(uid)


class Listing(list[T]):
    """The records of a listing, plus those that could not be read (``problems``: ParseErrors,
    each naming its record), so one bad record never takes a listing down or goes unseen."""

    def __init__(self, items: Iterable[T] = (), problems: Iterable[ParseError] = ()) -> None:
        super().__init__(items)
        self.problems: list[ParseError] = list(problems)


JobList = Listing[Job]


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

    if pyslurm_backend.selected():
        return pyslurm_backend.brief_states(wanted, runner)
    try:
        return _run(_brief_query(wanted), runner)
    except JobNotFoundError:
        # squeue refuses the whole list when one id is unknown (a purged job): ask one by one
        out: dict[str, JobBrief] = {}
        for jid in wanted:
            try:
                one: dict[str, JobBrief] = _run(_brief_query([jid]), runner)
                out.update(one)
            except JobNotFoundError:
                continue
        return out


# ---- jobs -----------------------------------------------------------------------------------------
def _read_jobs(result: RunResult, json_form: bool, nodes: Sequence[Node] | None = None) -> JobList:
    problems: list[ParseError] = []
    if json_form:
        jobs = parse_jobs_json(_json(result), problems=problems, nodes=nodes)
    else:
        jobs = parse_scontrol_jobs(result.stdout, problems=problems)
    return JobList(jobs, problems)


# data_parser v0.0.39/40 (Slurm 23.02 - 23.11) print a job's cores per socket without the node's
# cores per socket, so CPU_IDs need the node records; v0.0.41 (24.05) on carry every core.
_JOB_JSON_NEEDS_NODES = ((23, 2), (24, 5))


def _needs_nodes(version: tuple[int, ...]) -> bool:
    return _JOB_JSON_NEEDS_NODES[0] <= version[:2] < _JOB_JSON_NEEDS_NODES[1]


def _jobs_query(runner: Runner, version: tuple[int, ...], job_id: str | None = None,
                nodes: Sequence[Node] | None = None) -> Query[JobList]:
    tail = (job_id,) if job_id else ()
    if version >= SCONTROL_JSON_SINCE:
        return Query(("scontrol", "--json", "show", "job", "-d", *tail), lambda r: _read_jobs(r, True, nodes))
    return Query(("scontrol", "show", "job", "-d", *tail), lambda r: _read_jobs(r, False))


def _json(result: RunResult) -> dict[str, Any]:
    try:
        doc = json.loads(result.stdout)
    except (json.JSONDecodeError, RecursionError) as exc:
        raise ParseError(f"JSON from {' '.join(result.argv[:4])}", result.stdout[:400],
                         hint="run the command by hand to see what it printed") from exc
    if not isinstance(doc, dict):
        raise ParseError(f"JSON from {' '.join(result.argv[:4])}", result.stdout[:400])
    errors = doc.get("errors") or []
    if errors:
        if not isinstance(errors, list):
            errors = [errors]
        msg = "; ".join(
            str(e.get("description") or e.get("error") or e) if isinstance(e, dict) else str(e)
            for e in errors if e
        )
        raise SlurmError(f"{result.argv[0]} reported: {msg}", argv=result.argv, stderr=msg)
    return doc


def job_detail(job_id: str | int, runner: Runner | None = None) -> Job:
    """Full detail of one job, with its GPU indices per node.

    Only the record whose id is ``job_id`` answers: ``scontrol show job 0`` lists other jobs,
    and taking the first of them once showed (and checked the owner of) a stranger's job.
    A record of that id that cannot be read raises its ParseError.
    """
    jid = check_job_id(job_id)
    runner = runner or get_runner()
    version = slurm_version(runner)
    nodes = list_nodes(runner) if _needs_nodes(version) else None
    jobs = _run(_jobs_query(runner, version, jid, nodes), runner)
    for job in jobs:
        if _is_that_job(job, jid):
            return job
    for problem in jobs.problems:
        if problem.record_id == jid:
            raise problem
    raise JobNotFoundError(f"job {jid} is not known to the controller",
                           argv=["scontrol", "show", "job", jid],
                           hint="it may have ended long ago (Slurm forgets ended jobs); `%squeue` lists yours")


def _is_that_job(job: Job, jid: str) -> bool:
    if "_" in jid:
        array, task = jid.split("_", 1)
        return str(job.array_job_id) == array and str(job.array_task_id) == task
    return str(job.job_id) == jid


# ---- owners (never from a record that holds free text) ----------------------------------------------
def _parse_owners(result: RunResult) -> dict[int, int]:
    owners: dict[int, int] = {}
    for line in result.stdout.splitlines():
        if not line.strip():
            continue
        jid, sep, uid = line.strip().partition("|")
        if not sep or not (jid.isascii() and jid.isdigit() and uid.isascii() and uid.isdigit()):
            raise ParseError("squeue job owner line", line, hint="expected JOBID|UID")
        owners[int(jid)] = int(uid)
    return owners


_OWNERS: Query[dict[int, int]] = Query(("squeue", "-h", "-t", "all", "-o", "%A|%U"), _parse_owners)


def job_owners(runner: Runner | None = None) -> dict[int, int]:
    """Every job Slurm lists, by its numeric id, with its owner's uid."""
    return _run(_OWNERS, runner)


async def ajob_owners(runner: Runner | None = None) -> dict[int, int]:
    return await _arun(_OWNERS, runner)


def _owner_query(jid: str) -> Query[int]:
    def parse(result: RunResult) -> int:
        uids = set(_parse_owners(result).values())
        if not uids:
            raise JobNotFoundError(f"job {jid} is not known to the controller", argv=result.argv)
        if len(uids) > 1:  # every task of an array has one owner; refuse rather than guess
            raise ParseError("squeue job owner", result.stdout, hint=f"job {jid} shows several owners")
        return uids.pop()

    return Query(("squeue", "-h", "-t", "all", "-j", jid, "-o", "%A|%U"), parse)


def job_owner_uid(job_id: str | int, runner: Runner | None = None) -> int:
    """The uid that owns ``job_id``."""
    return _run(_owner_query(check_job_id(job_id)), runner)


async def ajob_owner_uid(job_id: str | int, runner: Runner | None = None) -> int:
    return await _arun(_owner_query(check_job_id(job_id)), runner)


def _filter_jobs(jobs: JobList, owners: dict[int, int] | None, uid: int | None, active_only: bool) -> JobList:
    kept = [
        j for j in jobs
        if (uid is None or (owners or {}).get(j.job_id) == uid)
        and (not active_only or j.state in ACTIVE_STATES)
    ]
    return JobList(kept, jobs.problems)


def _uid_of(user: str | None) -> int:
    if user is None:
        return current_uid()
    try:
        return pwd.getpwnam(user).pw_uid
    except KeyError:
        if user.isascii() and user.isdigit():
            return int(user)
        raise SlurmError(f"no Unix user named {user!r} on this machine",
                         hint="give a user name that `id USER` knows") from None


def list_jobs(
    runner: Runner | None = None, *, user: str | None = None, all_users: bool = False, active_only: bool = True
) -> JobList:
    """Jobs with full detail (GPU indices per node): this user's by default, or everyone's.

    "This user's" is decided by uid from ``squeue`` (:func:`job_owners`), not from the records.
    """
    runner = runner or get_runner()
    version = slurm_version(runner)
    nodes = list_nodes(runner) if _needs_nodes(version) else None
    jobs = _run(_jobs_query(runner, version, None, nodes), runner)
    if all_users:
        return _filter_jobs(jobs, None, None, active_only)
    return _filter_jobs(jobs, job_owners(runner), _uid_of(user), active_only)


async def alist_jobs(
    runner: Runner | None = None, *, user: str | None = None, all_users: bool = False, active_only: bool = True
) -> JobList:
    runner = runner or get_runner()
    version = await aslurm_version(runner)
    nodes = await alist_nodes(runner) if _needs_nodes(version) else None
    jobs = await _arun(_jobs_query(runner, version, None, nodes), runner)
    if all_users:
        return _filter_jobs(jobs, None, None, active_only)
    return _filter_jobs(jobs, await ajob_owners(runner), _uid_of(user), active_only)


def job_ids_by_name(name: str, runner: Runner | None = None) -> list[str]:
    """Ids of this user's jobs with that exact name (how a pending salloc is found)."""
    q: Query[list[str]] = Query(
        ("squeue", "-h", "--me", "-t", "all", "-n", name, "-o", BRIEF_FORMAT),
        lambda r: [str(b.job_id) for b in parse_squeue_brief(r.stdout)],
    )
    return _run(q, runner)


def my_tagged_jobs(prefix: str, runner: Runner | None = None) -> JobList:
    """This user's active jobs whose comment starts with ``prefix:`` (allocations of slurmlab kernels)."""
    jobs = list_jobs(runner)
    return JobList([j for j in jobs if (getattr(j, "comment", None) or "").startswith(prefix + ":")],
                   jobs.problems)


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


def _refuse_unless_mine(jid: str, owner: int) -> None:
    me = current_uid()
    if owner != me:
        who = user_name(owner)
        raise NotYourJobError(
            f"job {jid} belongs to {who}, not to {user_name(me)}: slurmlab acts only on your own jobs",
            hint=f"ask {who} (or your admins) to cancel it",
        )


def check_mine(job_id: str | int, runner: Runner | None = None) -> None:
    """NotYourJobError unless this process's uid owns ``job_id``."""
    jid = check_job_id(job_id)
    _refuse_unless_mine(jid, job_owner_uid(jid, runner))


async def acheck_mine(job_id: str | int, runner: Runner | None = None) -> None:
    jid = check_job_id(job_id)
    _refuse_unless_mine(jid, await ajob_owner_uid(jid, runner))


# ---- nodes and partitions ---------------------------------------------------------------------------
def _nodes_query(version: tuple[int, ...]) -> Query[Listing[Node]]:
    def parse(result: RunResult) -> Listing[Node]:
        problems: list[ParseError] = []
        if version >= SCONTROL_JSON_SINCE:
            nodes = parse_nodes_json(_json(result), problems=problems)
        else:
            nodes = parse_scontrol_nodes(result.stdout, problems=problems)
        return Listing(nodes, problems)

    argv = ("scontrol", "--json", "show", "node") if version >= SCONTROL_JSON_SINCE else ("scontrol", "show", "node", "-d")
    return Query(argv, parse)


def _partitions_query(version: tuple[int, ...]) -> Query[Listing[Partition]]:
    def parse(result: RunResult) -> Listing[Partition]:
        problems: list[ParseError] = []
        if version >= SCONTROL_JSON_SINCE:
            parts = parse_partitions_json(_json(result), problems=problems)
        else:
            parts = parse_scontrol_partitions(result.stdout, problems=problems)
        return Listing(parts, problems)

    argv = ("scontrol", "--json", "show", "partition") if version >= SCONTROL_JSON_SINCE else (
        "scontrol", "show", "partition")
    return Query(argv, parse)


def list_nodes(runner: Runner | None = None) -> Listing[Node]:
    """Every node with configured and used GRES (GPU indices in use, shards per GPU)."""
    runner = runner or get_runner()
    return _run(_nodes_query(slurm_version(runner)), runner)


async def alist_nodes(runner: Runner | None = None) -> Listing[Node]:
    runner = runner or get_runner()
    return await _arun(_nodes_query(await aslurm_version(runner)), runner)


_NODE_STATES: Query[dict[str, str]] = Query(
    ("sinfo", "-h", "-N", "-o", "%N|%T"), lambda r: parse_sinfo_node_states(r.stdout)
)


def node_states(runner: Runner | None = None) -> dict[str, str]:
    """node -> state (``idle``, ``mixed``, ``down*`` ...): the cheapest look at the nodes."""
    return _run(_NODE_STATES, runner)


def node_states_of(nodes: Sequence[str], runner: Runner | None = None) -> dict[str, str]:
    """:func:`node_states` of some nodes only (the poller's look at its running jobs' nodes)."""
    if not nodes:
        return {}
    q: Query[dict[str, str]] = Query(("sinfo", "-h", "-N", "-n", ",".join(nodes), "-o", "%N|%T"),
                                     lambda r: parse_sinfo_node_states(r.stdout))
    return _run(q, runner)


def list_partitions(runner: Runner | None = None) -> Listing[Partition]:
    runner = runner or get_runner()
    return _run(_partitions_query(slurm_version(runner)), runner)


async def alist_partitions(runner: Runner | None = None) -> Listing[Partition]:
    runner = runner or get_runner()
    return await _arun(_partitions_query(await aslurm_version(runner)), runner)


def ping(runner: Runner | None = None) -> dict[str, Any]:
    """Is the controller answering? ``{"ok": bool, "version": "22.05.8", "message": str}``."""
    runner = runner or get_runner()
    try:
        version = ".".join(map(str, slurm_version(runner)))
        result = runner.run(["scontrol", "ping"], check=False, timeout=min(runner.timeout, 15))
    except SlurmError as exc:
        return {"ok": False, "version": None, "message": str(exc)}
    text = (result.stdout + result.stderr).strip()
    ok = result.ok and "UP" in text and "DOWN" not in text
    return {"ok": ok, "version": version, "message": text}


# ---- what the cluster offers (for validating requests) -------------------------------------------------
def build_inventory(nodes: Sequence[Node], partitions: Sequence[Partition]) -> ClusterInventory:
    """Pure: a ClusterInventory from parsed nodes and partitions."""
    inv_nodes = []
    for n in nodes:
        shards = sum(g.count or 0 for g in n.gres if g.name == "shard")
        mps = sum(g.count or 0 for g in n.gres if g.name == "mps")
        other: dict[str, int] = {}
        for g in n.gres:
            if g.name not in ("gpu", "shard", "mps"):
                other[g.name] = other.get(g.name, 0) + (g.count if g.count is not None else 1)
        inv_nodes.append(NodeInventory(
            n.name,
            cpus=n.cpus or 0,
            memory_mb=n.real_memory_mb or 0,
            sockets=getattr(n, "sockets", None) or 1,
            gpus=n.gpu_types(),
            shards=shards,
            mps=mps,
            features=n.features,
            gres=other,
        ))
    known = {n.name for n in nodes}
    parts = {p.name: [m for m in p.nodes if m in known] for p in partitions}
    default = next((p.name for p in partitions if p.default), None)
    max_time = {p.name: p.max_time for p in partitions if p.max_time is not None}
    return ClusterInventory.build(nodes=inv_nodes, partitions=parts, default=default, max_time=max_time)


def _parse_sinfo_default(result: RunResult) -> str | None:
    for line in result.stdout.split():
        if line.endswith("*") and len(line) > 1:
            return line[:-1]
    return None


_DEFAULT_PARTITION: Query[str | None] = Query(("sinfo", "-h", "-o", "%P"), _parse_sinfo_default)


def default_partition(runner: Runner | None = None) -> str | None:
    """The default partition as ``sinfo`` marks it (``gpu*``); None when none is marked.

    ``scontrol --json show partition`` of 24.11+ (data_parser v0.0.42+) carries no flags, so a
    default read from JSON is unknown rather than absent; sinfo says it on every version."""
    return _run(_DEFAULT_PARTITION, runner)


def inventory(runner: Runner | None = None) -> ClusterInventory:
    """What the cluster offers, per partition, for validating a request before it is submitted."""
    runner = runner or get_runner()
    partitions = list_partitions(runner)
    if not any(p.default for p in partitions) and any(p.default is None for p in partitions):
        name = default_partition(runner)
        partitions = Listing([replace(p, default=p.name == name) for p in partitions], partitions.problems)
    return build_inventory(list_nodes(runner), partitions)
