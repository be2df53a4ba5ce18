"""What the server shows, taken from the Slurm layer and shaped for the sidebar.

``ClusterSource`` is the server's only door to Slurm: it calls ``slurmlab.slurm.queries``
(the async twins when present, else the sync calls in an executor so the IOLoop never
blocks) and turns the models into the small JSON views the routes answer with. It parses
nothing itself.

Views (all JSON-ready dicts, typed in :mod:`slurmlab.server.contract`):

* job: job_id, display_id, name, user, mine, state, reason (Slurm's word) with reason_words
  and reason_hint (in plain words, from :mod:`slurmlab.core.slurm.reasons`), partition, nodes
  (hostlist), time_limit_s, submit_time, start_time, expected_start (Slurm's expected start of
  a pending job), ends_at (ISO: the time limit's end of a running job; the client counts down
  to it, and up from submit_time, so the view does not change every second), gpus:
  [{node, index, type, kind (gpu|shard|mps), count}], gres (requested, as text).
* node: name, state, partitions, gpus: [{index, type, mig, jobs, shards_used,
  shards_total, whole}] — one entry per configured GPU (or MIG instance), indices in
  gres.conf order as Slurm numbers them.
* problem: record (the record's id, when readable), message — a record Slurm printed that
  could not be read; it is listed, never allowed to take the listing down.

``user`` and ``mine`` come from ``squeue``'s uid of each job (``queries.job_owners``), never
from the job's own record: a job name is free text its submitter chose.
"""

from __future__ import annotations

import asyncio
from collections.abc import Callable, Iterable, Sequence
from datetime import datetime, timedelta
from typing import Any

from slurmlab.core.gpu.mig import is_mig_type
from slurmlab.core.slurm.models import Job, Node
from slurmlab.core.slurm.reasons import explain_reason
from slurmlab.core.slurm.states import HOLDING
from slurmlab.errors import ParseError
from slurmlab.server.contract import GpuSlot, JobGpu, JobView, NodeView, ProblemView
from slurmlab.slurm import identity, queries

__all__ = ["ClusterSource", "Snapshot", "current_user", "job_view", "node_view", "nodes_view", "problem_view"]


def current_user() -> str:
    """The Unix user the server runs as (whose jobs the sidebar may cancel)."""
    return identity.current_user()


def _iso(value: datetime | None) -> str | None:
    return value.isoformat() if value is not None else None


def _ends_at(job: Job) -> datetime | None:
    if job.state not in HOLDING or job.time_limit is None:
        return None
    if job.end_time is not None:
        return job.end_time
    if job.start_time is None:
        return None
    return job.start_time + timedelta(seconds=job.time_limit)


def _job_gpus(job: Job) -> list[JobGpu]:
    out: list[JobGpu] = []
    for alloc in job.gpu_allocs:
        for gtype, indices in alloc.gpu_types.items():
            for index in indices:
                out.append(JobGpu(node=alloc.node, index=index, type=gtype or None, kind="gpu", count=1))
        for kind in ("shard", "mps"):
            for index, count in alloc.shares(kind).items():
                out.append(JobGpu(node=alloc.node, index=index, type=None, kind=kind, count=count))
    out.sort(key=lambda g: (g["node"], g["index"] if g["index"] is not None else -1, g["kind"]))
    return out


def _requested(job: Job) -> str | None:
    items = [*job.tres_per_job, *job.tres_per_node, *job.tres_per_task]
    if items:
        return ",".join(g.render() for g in items)
    if job.tres_alloc is not None and job.tres_alloc.gres:
        return ",".join(g.render() for g in job.tres_alloc.gres)
    return None


def job_view(job: Job, owners: dict[int, int] | None = None, me: int | None = None) -> JobView:
    """``owners`` (job id -> uid, from squeue) decides ``user`` and ``mine``; a job the owner
    query did not list shows its record's user but is never the viewer's."""
    uid = (owners or {}).get(job.job_id)
    explained = explain_reason(job.reason)
    return JobView(
        job_id=str(job.job_id),
        display_id=job.display_id,
        name=job.name,
        user=identity.user_name(uid) if uid is not None else job.user,
        mine=uid is not None and uid == (identity.current_uid() if me is None else me),
        state=job.state,
        reason=job.reason,
        reason_words=explained.words if explained is not None else None,
        reason_hint=(explained.hint or None) if explained is not None else None,
        partition=job.partition,
        nodes=job.nodelist or None,
        time_limit_s=job.time_limit,
        submit_time=_iso(job.submit_time),
        start_time=_iso(job.start_time),
        expected_start=_iso(job.expected_start),
        ends_at=_iso(_ends_at(job)),
        gpus=_job_gpus(job),
        gres=_requested(job),
    )


def node_view(node: Node, jobs: Iterable[Job] = ()) -> NodeView:
    """One node with one entry per GPU: who holds it whole, and how many shards are used."""
    slots: list[GpuSlot] = []
    index = 0
    for item in node.gres:
        if item.name != "gpu":
            continue
        for _ in range(item.count if item.count is not None else 1):
            slots.append(GpuSlot(
                index=index,
                type=item.type,
                mig=bool(item.type and is_mig_type(item.type)),
                jobs=[],
                shards_used=0,
                shards_total=0,
                whole=False,
            ))
            index += 1
    by_index = {s["index"]: s for s in slots}

    # Shards configured per GPU: Slurm spreads Count=N evenly over the node's GPUs unless gres.conf
    # ties them to files; the per-GPU totals from 24.11+ override this estimate below.
    shard_cfg = sum(g.count or 0 for g in node.gres if g.name == "shard")
    whole_gpus = [s for s in slots if not s["mig"]] or slots
    if shard_cfg and whole_gpus:
        for s in whole_gpus:
            s["shards_total"] = shard_cfg // len(whole_gpus)
    # 24.11+ prints used/total per GPU: exact. 22.05 prints shard:h100:N(IDX:i) whose N is not the
    # shards in use (a 4-shard job shows 1), so there the jobs' own GRES are summed instead.
    usage = node.shard_usage("shard")
    exact = any(total is not None for _, total in usage.values())
    for idx, (used, total) in usage.items():
        slot = by_index.get(idx)
        if slot is None or not exact:
            continue
        if total is not None:
            slot["shards_total"] = total
        if used is not None:
            slot["shards_used"] = used
    for used_idx in node.gpu_used_indices().values():
        for idx in used_idx:
            if idx in by_index:
                by_index[idx]["whole"] = True

    for job in jobs:
        alloc = job.alloc_on(node.name)
        if alloc is None or job.state not in HOLDING:
            continue
        jid = str(job.job_id)
        for idx in alloc.gpu_indices:
            if idx in by_index:
                by_index[idx]["whole"] = True
                by_index[idx]["jobs"].append(jid)
        for idx, count in alloc.shares("shard").items():
            if idx in by_index:
                by_index[idx]["jobs"].append(jid)
                if not exact and count:
                    by_index[idx]["shards_used"] += count
    for s in slots:
        s["jobs"] = sorted(set(s["jobs"]), key=lambda j: (len(j), j))
    return NodeView(
        name=node.name,
        state=node.state + ("+" + "+".join(node.state_flags) if node.state_flags else ""),
        partitions=list(node.partitions),
        cpus=node.cpus,
        alloc_cpus=node.alloc_cpus,
        gres=",".join(g.render() for g in node.gres) or None,
        reason=node.reason,
        gpus=slots,
    )


def nodes_view(nodes: Sequence[Node], jobs: Sequence[Job]) -> list[NodeView]:
    return [node_view(n, jobs) for n in sorted(nodes, key=lambda n: n.name)]


def problem_view(problem: ParseError, kind: str) -> ProblemView:
    return ProblemView(kind=kind, record=problem.record_id, message=problem.message)


class Snapshot:
    """One poll's views: nodes, jobs, and the records that could not be read."""

    def __init__(self, nodes: list[NodeView], jobs: list[JobView], problems: list[ProblemView]) -> None:
        self.nodes = nodes
        self.jobs = jobs
        self.problems = problems


class ClusterSource:
    """The Slurm layer, called without blocking the server's IOLoop: the async twins of the
    queries when they exist, else the sync query in the loop's default executor."""

    def __init__(self, runner: Any = None, *, user: str | None = None) -> None:
        self.runner = runner
        self.user = user or current_user()

    async def _call(self, name: str, *args: Any, **kwargs: Any) -> Any:
        runner = self.runner
        afunc: Callable[..., Any] | None = getattr(queries, "a" + name, None)
        if afunc is not None:
            return await afunc(*args, runner=runner, **kwargs)
        func: Callable[..., Any] = getattr(queries, name)
        loop = asyncio.get_running_loop()
        return await loop.run_in_executor(None, lambda: func(*args, runner=runner, **kwargs))

    async def version(self) -> str:
        found = tuple(await self._call("slurm_version"))
        # Slurm writes its minor version with two digits: 22.05.8, 24.11.5.
        parts = [str(found[0])] + ([f"{found[1]:02d}"] if len(found) > 1 else []) + [str(p) for p in found[2:]]
        return ".".join(parts)

    async def job_models(self) -> list[Job]:
        found: list[Job] = await self._call("list_jobs", all_users=True)
        return found

    async def node_models(self) -> list[Node]:
        found: list[Node] = await self._call("list_nodes")
        return found

    async def snapshot(self) -> Snapshot:
        """Nodes and jobs views from one listing of each, with every job's owner by uid."""
        nodes, jobs, owners = await asyncio.gather(
            self.node_models(), self.job_models(), self._call("job_owners"))
        me = identity.current_uid()
        problems = [problem_view(p, "node") for p in getattr(nodes, "problems", ())]
        problems += [problem_view(p, "job") for p in getattr(jobs, "problems", ())]
        return Snapshot(nodes_view(nodes, jobs), [job_view(j, owners, me) for j in jobs], problems)

    async def owner(self, job_id: str) -> int:
        """The uid that owns ``job_id`` (squeue's ``%U``)."""
        uid: int = await self._call("job_owner_uid", job_id)
        return uid

    async def check_mine(self, job_id: str) -> None:
        """NotYourJobError unless the server's uid owns the job (squeue's uid, not the record)."""
        await self._call("check_mine", job_id)

    async def job(self, job_id: str) -> Job:
        found: Job = await self._call("job_detail", job_id)
        return found

    async def cancel(self, job_id: str) -> None:
        """scancel ``job_id``. The route has already checked (:meth:`check_mine`) that the
        server's uid owns it, so the Slurm layer is not asked again."""
        await self._call("cancel_job", job_id, only_mine=False)
