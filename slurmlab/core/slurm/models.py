"""Frozen models of what Slurm reports, the same whichever version or format they came from.

API (every model has ``to_dict()`` giving plain JSON-ready values)::

    Job          one job (or array task); .gpu_allocs per node, .node_resources, .exit, .time_left(now)
    Step         one job step ("1.0", "6.batch", "10_0.batch")
    Node         one node: configured GRES, GRES in use, gpu_total/gpu_used/gpu_used_indices, shard_usage()
    Partition    one partition and its nodes
    GresAlloc    what a job holds on one node: GPU indices, typed GPUs, shards per GPU, MPS share
    NodeResources  a job's CPU_IDs and memory on one node, GRES or not
    Tres         a TRES string (cpu=4,mem=4000M,node=2,billing=4,gres/gpu=2) as numbers
    ExitStatus   exit code and signal, from a raw wait status, "3:0" text, or the JSON object

Times are timezone-aware datetimes (None when Slurm has no value); durations are seconds
(None = UNLIMITED). The parts of a job live in their own modules (:mod:`.gres_alloc`, :mod:`.tres`,
:mod:`.exit_status`) and are importable from here too.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from datetime import datetime

from slurmlab.core.jsontypes import JSONObject
from slurmlab.core.slurm.exit_status import ExitStatus
from slurmlab.core.slurm.gres import GresItem
from slurmlab.core.slurm.gres_alloc import GresAlloc
from slurmlab.core.slurm.states import HOLDING, expected_start, is_held
from slurmlab.core.slurm.tres import Tres, parse_mem_mb

__all__ = [
    "ExitStatus",
    "GresAlloc",
    "Job",
    "Node",
    "NodeResources",
    "Partition",
    "Step",
    "Tres",
    "parse_mem_mb",
]


def _iso(value: datetime | None) -> str | None:
    return value.isoformat() if value is not None else None


@dataclass(frozen=True)
class NodeResources:
    """A job's CPUs and memory on one of its nodes, as its detail gives them (``scontrol show job -d``'s
    ``Nodes=node1 CPU_IDs=0-1 Mem=2000``, the JSON's ``job_resources``), whether it holds GRES there or not.
    ``cpu_ids`` as Slurm prints them (abstract ids: ``0-1``, ``0,4``); None where unknown; ``mem_mb`` in MiB."""

    node: str
    cpu_ids: str | None = None
    mem_mb: int | None = None

    def to_dict(self) -> JSONObject:
        return {"node": self.node, "cpu_ids": self.cpu_ids, "mem_mb": self.mem_mb}


@dataclass(frozen=True)
class Job:
    """One job or array task. ``start_time`` of a pending job is Slurm's expected start.

    ``gpu_allocs`` has an entry only for a node where the job holds GRES; ``node_resources`` one for every node
    its detail describes (a CPU-only job's too): the place to read its CPUs and memory per node."""

    job_id: int
    name: str
    state: str
    state_flags: tuple[str, ...] = ()
    reason: str | None = None
    user: str | None = None
    partition: str | None = None
    nodelist: str = ""
    nodes: tuple[str, ...] = ()
    array_job_id: int | None = None
    array_task_id: int | None = None
    array_tasks: str | None = None
    submit_time: datetime | None = None
    start_time: datetime | None = None
    end_time: datetime | None = None
    time_limit: int | None = None
    exit: ExitStatus | None = None
    derived_exit: ExitStatus | None = None
    tres_req: Tres | None = None
    tres_alloc: Tres | None = None
    tres_per_job: tuple[GresItem, ...] = ()
    tres_per_node: tuple[GresItem, ...] = ()
    tres_per_task: tuple[GresItem, ...] = ()
    tres_bind: str | None = None
    gres_binding_enforced: bool = False
    gpu_allocs: tuple[GresAlloc, ...] = ()
    node_resources: tuple[NodeResources, ...] = ()
    num_nodes: int | None = None
    num_cpus: int | None = None
    num_tasks: int | None = None
    comment: str | None = None
    # when a pending job may start at the earliest (its --begin; Slurm's EligibleTime), apart from resources
    eligible_time: datetime | None = field(default=None, compare=False)
    flags: tuple[str, ...] = field(default=(), compare=False)

    @property
    def is_array(self) -> bool:
        return self.array_job_id is not None and self.array_job_id != 0

    @property
    def held(self) -> bool:
        return is_held(self.state, self.reason)

    @property
    def expected_start(self) -> datetime | None:
        return expected_start(self.state, self.start_time)

    @property
    def display_id(self) -> str:
        """``10_[2-5%3]`` / ``10_1`` for array jobs, else the job id."""
        if self.is_array:
            if self.array_tasks:
                return f"{self.array_job_id}_[{self.array_tasks}]"
            if self.array_task_id is not None:
                return f"{self.array_job_id}_{self.array_task_id}"
        return str(self.job_id)

    def alloc_on(self, node: str) -> GresAlloc | None:
        return next((a for a in self.gpu_allocs if a.node == node), None)

    def resources_on(self, node: str) -> NodeResources | None:
        return next((r for r in self.node_resources if r.node == node), None)

    def gpus_by_node(self) -> dict[str, tuple[int, ...]]:
        return {a.node: a.gpu_indices for a in self.gpu_allocs if a.gpu_indices}

    def time_left(self, now: datetime) -> float | None:
        """Seconds until the time limit ends a running job; None when it has no limit or holds
        no nodes (a pending job's clock has not started)."""
        if self.state not in HOLDING or self.time_limit is None:
            return None
        if self.end_time is not None:
            return max(0.0, (self.end_time - now).total_seconds())
        if self.start_time is None:
            return None
        used = (now - self.start_time).total_seconds()
        return max(0.0, self.time_limit - used)

    def to_dict(self) -> JSONObject:
        return {
            "job_id": self.job_id,
            "display_id": self.display_id,
            "name": self.name,
            "state": self.state,
            "state_flags": list(self.state_flags),
            "reason": self.reason,
            "user": self.user,
            "partition": self.partition,
            "nodelist": self.nodelist,
            "nodes": list(self.nodes),
            "array_job_id": self.array_job_id,
            "array_task_id": self.array_task_id,
            "array_tasks": self.array_tasks,
            "submit_time": _iso(self.submit_time),
            "start_time": _iso(self.start_time),
            "expected_start": _iso(self.expected_start),
            "end_time": _iso(self.end_time),
            "time_limit": self.time_limit,
            "exit": self.exit.to_dict() if self.exit else None,
            "derived_exit": self.derived_exit.to_dict() if self.derived_exit else None,
            "tres_req": self.tres_req.to_dict() if self.tres_req else None,
            "tres_alloc": self.tres_alloc.to_dict() if self.tres_alloc else None,
            "tres_per_job": [g.to_dict() for g in self.tres_per_job],
            "tres_per_node": [g.to_dict() for g in self.tres_per_node],
            "tres_per_task": [g.to_dict() for g in self.tres_per_task],
            "tres_bind": self.tres_bind,
            "gres_binding_enforced": self.gres_binding_enforced,
            "gpu_allocs": [a.to_dict() for a in self.gpu_allocs],
            "node_resources": [r.to_dict() for r in self.node_resources],
            "num_nodes": self.num_nodes,
            "num_cpus": self.num_cpus,
            "num_tasks": self.num_tasks,
            "comment": self.comment,
            "held": self.held,
        }


@dataclass(frozen=True)
class Step:
    """One job step. ``step_id`` as Slurm prints it (``2.0``, ``6.batch``, ``10_0.batch``)."""

    step_id: str
    name: str
    state: str
    nodelist: str = ""
    nodes: tuple[str, ...] = ()
    partition: str | None = None
    user: str | None = None
    start_time: datetime | None = None
    time_limit: int | None = None
    num_tasks: int | None = None
    num_cpus: int | None = None
    tres_alloc: Tres | None = None
    tres_per_step: tuple[GresItem, ...] = ()
    tres_per_node: tuple[GresItem, ...] = ()
    tres_per_task: tuple[GresItem, ...] = ()

    @property
    def job_id(self) -> str:
        """The job part of the id (``10_0`` for an array task)."""
        return self.step_id.split(".", 1)[0]

    @property
    def step_name(self) -> str:
        return self.step_id.split(".", 1)[1] if "." in self.step_id else ""

    def to_dict(self) -> JSONObject:
        return {
            "step_id": self.step_id,
            "job_id": self.job_id,
            "name": self.name,
            "state": self.state,
            "nodelist": self.nodelist,
            "nodes": list(self.nodes),
            "partition": self.partition,
            "user": self.user,
            "start_time": _iso(self.start_time),
            "time_limit": self.time_limit,
            "num_tasks": self.num_tasks,
            "num_cpus": self.num_cpus,
            "tres_alloc": self.tres_alloc.to_dict() if self.tres_alloc else None,
            "tres_per_step": [g.to_dict() for g in self.tres_per_step],
            "tres_per_node": [g.to_dict() for g in self.tres_per_node],
            "tres_per_task": [g.to_dict() for g in self.tres_per_task],
        }


@dataclass(frozen=True)
class Node:
    """One node. ``gres`` is what is configured, ``gres_used`` what jobs hold now."""

    name: str
    state: str
    state_flags: tuple[str, ...] = ()
    partitions: tuple[str, ...] = ()
    cpus: int | None = None
    alloc_cpus: int | None = None
    real_memory_mb: int | None = None
    alloc_memory_mb: int | None = None
    features: tuple[str, ...] = ()
    gres: tuple[GresItem, ...] = ()
    gres_used: tuple[GresItem, ...] = ()
    reason: str | None = None
    # the shape Slurm numbers a job's CPU_IDs by (socket x cores per socket + core, x threads)
    sockets: int | None = None
    cores_per_socket: int | None = None
    threads_per_core: int | None = None

    @property
    def gpu_total(self) -> int:
        return sum(g.count if g.count is not None else 1 for g in self.gres if g.name == "gpu")

    @property
    def gpu_used(self) -> int:
        return sum(g.count or 0 for g in self.gres_used if g.name == "gpu")

    def gpu_types(self) -> dict[str, int]:
        """Configured GPU type -> count (MIG profiles appear as types)."""
        out: dict[str, int] = {}
        for g in self.gres:
            if g.name == "gpu":
                out[g.type or ""] = out.get(g.type or "", 0) + (g.count if g.count is not None else 1)
        return out

    def gpu_used_indices(self) -> dict[str, tuple[int, ...]]:
        """GPU type -> indices in use."""
        out: dict[str, list[int]] = {}
        for g in self.gres_used:
            if g.name == "gpu":
                out.setdefault(g.type or "", []).extend(g.indices or ())
        return {k: tuple(v) for k, v in out.items()}

    def shard_usage(self, name: str = "shard") -> dict[int, tuple[int | None, int | None]]:
        """GPU index -> (used, total) shards. 24.11+ gives both (used None = the GPU is taken
        whole); 22.05 only gives the GPUs with shards in use: (count, None)."""
        out: dict[int, tuple[int | None, int | None]] = {}
        for g in self.gres_used:
            if g.name != name:
                continue
            if g.shares is not None:
                for s in g.shares:
                    out[s.index] = (s.used, s.total)
            elif g.indices:
                for i in g.indices:
                    out[i] = (g.count if len(g.indices) == 1 else None, None)
        return out

    def to_dict(self) -> JSONObject:
        return {
            "name": self.name,
            "state": self.state,
            "state_flags": list(self.state_flags),
            "partitions": list(self.partitions),
            "cpus": self.cpus,
            "alloc_cpus": self.alloc_cpus,
            "real_memory_mb": self.real_memory_mb,
            "alloc_memory_mb": self.alloc_memory_mb,
            "features": list(self.features),
            "gres": [g.to_dict() for g in self.gres],
            "gres_used": [g.to_dict() for g in self.gres_used],
            "gpu_total": self.gpu_total,
            "gpu_used": self.gpu_used,
            "gpu_types": dict(self.gpu_types().items()),
            "gpu_used_indices": {k: list(v) for k, v in self.gpu_used_indices().items()},
            "shard_usage": {str(k): list(v) for k, v in self.shard_usage().items()},
            "reason": self.reason,
            "sockets": self.sockets,
            "cores_per_socket": self.cores_per_socket,
            "threads_per_core": self.threads_per_core,
        }


@dataclass(frozen=True)
class Partition:
    """One partition. ``max_time``/``default_time`` in seconds (None = UNLIMITED / not set)."""

    name: str
    nodelist: str
    nodes: tuple[str, ...] = ()
    state: str | None = None
    default: bool | None = None
    max_time: int | None = None
    default_time: int | None = None
    total_cpus: int | None = None
    total_nodes: int | None = None
    tres: Tres | None = None

    def to_dict(self) -> JSONObject:
        return {
            "name": self.name,
            "nodelist": self.nodelist,
            "nodes": list(self.nodes),
            "state": self.state,
            "default": self.default,
            "max_time": self.max_time,
            "default_time": self.default_time,
            "total_cpus": self.total_cpus,
            "total_nodes": self.total_nodes,
            "tres": self.tres.to_dict() if self.tres else None,
        }
