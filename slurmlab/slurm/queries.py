"""What the rest of slurmlab asks Slurm, each as an argv list through the one runner.

Every query is a pair (argv, parser) run by :func:`_run` or its asyncio twin, so the sync
and async APIs share one definition. The JSON or text form is chosen from the Slurm version
(detected once per configuration): ``scontrol --json`` exists from 23.02; on 22.05 the
``scontrol show … -d`` text is the only place that names a job's GPU indices.

API::

    slurm_version(runner) -> tuple[int, ...]            ping(runner) -> dict
    brief_states(ids, runner) -> {job_id: JobBrief}     (the poller's cheap call)
    job_detail(job_id, runner) -> Job                   (scontrol show job -d)
    list_jobs(runner, *, user=None, all_users=False, active_only=True) -> [Job]
    list_nodes(runner) -> [Node]       list_partitions(runner) -> [Partition]
    cancel_job(job_id, runner)         job_ids_by_name(name, runner) -> [str]
    my_tagged_jobs(prefix, runner) -> [Job]             inventory(runner) -> ClusterInventory
    a<name>(...)  asyncio twins of the listing queries
"""

from __future__ import annotations

import getpass
import json
import os
import threading
from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass
from typing import Any, Generic, TypeVar

from slurmlab.core.inventory import ClusterInventory, NodeInventory
from slurmlab.core.models import Job, Node, Partition
from slurmlab.core.parse_json import parse_jobs_json, parse_nodes_json, parse_partitions_json
from slurmlab.core.parse_text import (
    parse_scontrol_jobs,
    parse_scontrol_nodes,
    parse_scontrol_partitions,
    parse_sinfo_node_states,
    parse_version,
)
from slurmlab.core.squeue_brief import BRIEF_FORMAT, JobBrief, parse_squeue_brief
from slurmlab.errors import JobNotFoundError, NotYourJobError, ParseError, SlurmError
from slurmlab.slurm.runner import Runner, RunResult, get_runner

__all__ = [
    "ACTIVE_STATES",
    "alist_jobs",
    "alist_nodes",
    "alist_partitions",
    "brief_states",
    "cancel_job",
    "current_user",
    "inventory",
    "job_detail",
    "job_ids_by_name",
    "list_jobs",
    "list_nodes",
    "list_partitions",
    "my_tagged_jobs",
    "node_states",
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


def current_user() -> str:
    return getpass.getuser()


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
def _jobs_query(runner: Runner, version: tuple[int, ...], job_id: str | None = None) -> Query[list[Job]]:
    tail = (job_id,) if job_id else ()
    if version >= SCONTROL_JSON_SINCE:
        return Query(("scontrol", "--json", "show", "job", "-d", *tail),
                     lambda r: parse_jobs_json(_json(r)))
    return Query(("scontrol", "show", "job", "-d", *tail), lambda r: parse_scontrol_jobs(r.stdout))


def _json(result: RunResult) -> dict[str, Any]:
    try:
        doc = json.loads(result.stdout)
    except json.JSONDecodeError as exc:
        raise ParseError(f"JSON from {' '.join(result.argv[:4])}", result.stdout[:400],
                         hint="run the command by hand to see what it printed") from exc
    if not isinstance(doc, dict):
        raise ParseError(f"JSON from {' '.join(result.argv[:4])}", result.stdout[:400])
    errors = doc.get("errors") or []
    if errors:
        msg = "; ".join(str(e.get("description") or e.get("error") or e) for e in errors if e)
        raise SlurmError(f"{result.argv[0]} reported: {msg}", argv=result.argv, stderr=msg)
    return doc


def job_detail(job_id: str | int, runner: Runner | None = None) -> Job:
    """Full detail of one job, with its GPU indices per node."""
    runner = runner or get_runner()
    jobs = _run(_jobs_query(runner, slurm_version(runner), str(job_id)), runner)
    for job in jobs:
        if str(job.job_id) == str(job_id):
            return job
    if jobs:
        return jobs[0]
    raise JobNotFoundError(f"job {job_id} is not known to the controller", argv=["scontrol", "show", "job"])


def _filter_jobs(jobs: Iterable[Job], user: str | None, all_users: bool, active_only: bool) -> list[Job]:
    who = None if all_users else (user or current_user())
    return [
        j for j in jobs
        if (who is None or j.user == who) and (not active_only or j.state in ACTIVE_STATES)
    ]


def list_jobs(
    runner: Runner | None = None, *, user: str | None = None, all_users: bool = False, active_only: bool = True
) -> list[Job]:
    """Jobs with full detail (GPU indices per node): this user's by default, or everyone's."""
    runner = runner or get_runner()
    jobs = _run(_jobs_query(runner, slurm_version(runner)), runner)
    return _filter_jobs(jobs, user, all_users, active_only)


async def alist_jobs(
    runner: Runner | None = None, *, user: str | None = None, all_users: bool = False, active_only: bool = True
) -> list[Job]:
    runner = runner or get_runner()
    jobs = await _arun(_jobs_query(runner, await aslurm_version(runner)), runner)
    return _filter_jobs(jobs, user, all_users, active_only)


def job_ids_by_name(name: str, runner: Runner | None = None) -> list[str]:
    """Ids of this user's jobs with that exact name (how a pending salloc is found)."""
    q: Query[list[str]] = Query(
        ("squeue", "-h", "--me", "-t", "all", "-n", name, "-o", BRIEF_FORMAT),
        lambda r: [str(b.job_id) for b in parse_squeue_brief(r.stdout)],
    )
    return _run(q, runner)


def my_tagged_jobs(prefix: str, runner: Runner | None = None) -> list[Job]:
    """This user's active jobs whose comment starts with ``prefix:`` (allocations of slurmlab kernels)."""
    jobs = list_jobs(runner)
    return [j for j in jobs if (getattr(j, "comment", None) or "").startswith(prefix + ":")]


def cancel_job(job_id: str | int, runner: Runner | None = None, *, only_mine: bool = True) -> None:
    """scancel one job of this user.

    Raises JobNotFoundError when the controller does not know it, and NotYourJobError when it
    belongs to someone else: Slurm lets an operator account (root, a coordinator) cancel
    anything, so slurmlab checks the owner itself (``only_mine=False`` skips that).
    """
    runner = runner or get_runner()
    if only_mine:
        owner = job_detail(job_id, runner).user
        me = current_user()
        if owner is not None and owner != me:
            raise NotYourJobError(
                f"job {job_id} belongs to {owner}, not to {me}: slurmlab cancels only your own jobs",
                hint=f"ask {owner} (or your admins) to cancel it",
            )
    runner.run(["scancel", str(job_id)])


# ---- nodes and partitions ---------------------------------------------------------------------------
def _nodes_query(version: tuple[int, ...]) -> Query[list[Node]]:
    if version >= SCONTROL_JSON_SINCE:
        return Query(("scontrol", "--json", "show", "node"), lambda r: parse_nodes_json(_json(r)))
    return Query(("scontrol", "show", "node", "-d"), lambda r: parse_scontrol_nodes(r.stdout))


def _partitions_query(version: tuple[int, ...]) -> Query[list[Partition]]:
    if version >= SCONTROL_JSON_SINCE:
        return Query(("scontrol", "--json", "show", "partition"), lambda r: parse_partitions_json(_json(r)))
    return Query(("scontrol", "show", "partition"), lambda r: parse_scontrol_partitions(r.stdout))


def list_nodes(runner: Runner | None = None) -> list[Node]:
    """Every node with configured and used GRES (GPU indices in use, shards per GPU)."""
    runner = runner or get_runner()
    return _run(_nodes_query(slurm_version(runner)), runner)


async def alist_nodes(runner: Runner | None = None) -> list[Node]:
    runner = runner or get_runner()
    return await _arun(_nodes_query(await aslurm_version(runner)), runner)


_NODE_STATES: Query[dict[str, str]] = Query(
    ("sinfo", "-h", "-N", "-o", "%N|%T"), lambda r: parse_sinfo_node_states(r.stdout)
)


def node_states(runner: Runner | None = None) -> dict[str, str]:
    """node -> state (``idle``, ``mixed``, ``down*`` ...): the cheapest look at the nodes."""
    return _run(_NODE_STATES, runner)


def list_partitions(runner: Runner | None = None) -> list[Partition]:
    runner = runner or get_runner()
    return _run(_partitions_query(slurm_version(runner)), runner)


async def alist_partitions(runner: Runner | None = None) -> list[Partition]:
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


def inventory(runner: Runner | None = None) -> ClusterInventory:
    """What the cluster offers, per partition, for validating a request before it is submitted."""
    runner = runner or get_runner()
    return build_inventory(list_nodes(runner), list_partitions(runner))
