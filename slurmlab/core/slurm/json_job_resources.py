"""Per-node CPU_IDs and memory of a job from its JSON ``job_resources`` (what ``scontrol show job -d`` prints as
``Nodes=… CPU_IDs=… Mem=…``).

``job_resources`` holds ``allocated_nodes[]`` with ``sockets`` a dict of the allocated cores (openapi v0.0.38 to
data_parser v0.0.40) or ``nodes.allocation[]`` with every core of every socket and its status (v0.0.41 on).
Slurm prints CPU_IDs as abstract CPU ids: (socket x cores per socket + core) x threads per core, every thread of
an allocated core. Cores per socket come from the socket's own core list (v0.0.41+) or the node record; threads
per core from the node record, else ``job_resources.threads_per_core``, else the allocated CPUs over allocated
cores, else 1. Where the old layout puts a core past socket 0 and no node record gives the cores per socket,
CPU_IDs stay None (unknown) rather than a guess.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from dataclasses import dataclass

from slurmlab.core.slurm.json_fields import JSONRecord, as_object, excerpt, number, text_or_none
from slurmlab.core.slurm.models import Node
from slurmlab.core.slurm.ranges import render_index_list
from slurmlab.errors import ParseError

__all__ = ["NodeAlloc", "NodeShape", "node_allocs", "node_shapes"]


@dataclass(frozen=True)
class NodeShape:
    """How a node numbers its CPUs (from ``scontrol show node``); None where not known."""

    cores_per_socket: int | None
    threads_per_core: int | None


def node_shapes(nodes: Iterable[Node]) -> dict[str, NodeShape]:
    """Node name -> its shape, from the node records."""
    return {n.name: NodeShape(n.cores_per_socket, n.threads_per_core) for n in nodes}


@dataclass(frozen=True)
class NodeAlloc:
    """The CPU_IDs (as Slurm prints them) and memory (MiB) of a job on one node; None where not known."""

    cpu_ids: str | None
    mem_mb: int | None


def _index(value: object, what: str) -> int:
    if type(value) is str and 0 < len(value) <= 5 and value.isdigit() and value.isascii():
        key = int(value)  # 22.05 keys sockets and cores by their index as a string: "0", "55"
        if key <= 65535:
            return key
    n = number(value, what)
    if n is None or n < 0 or n > 65535:
        raise ParseError(what, excerpt(value), hint="expected a socket or core index from 0 to 65535")
    return n


def _cpu_ids(cores: list[tuple[int, int]], cores_per_socket: dict[int, int], threads: int) -> str | None:
    """Slurm's abstract CPU ids of the allocated (socket, core) pairs; None when a needed
    cores-per-socket figure is unknown. A node's sockets all have the same core count."""
    per_socket = max(cores_per_socket.values(), default=None)
    ids: list[int] = []
    for sock, core in cores:
        if sock and per_socket is None:
            return None
        base = (sock * (per_socket or 0) + core) * threads
        ids.extend(range(base, base + threads))
    return render_index_list(sorted(set(ids)))


def _status_allocated(value: object, what: str) -> bool:
    if isinstance(value, str):
        return value.upper() == "ALLOCATED"
    if isinstance(value, list) and all(isinstance(v, str) for v in value):
        return any(v.upper() == "ALLOCATED" for v in value)
    raise ParseError(what, excerpt(value), hint="expected a core status string or a list of them")


_UNALLOCATED = ["UNALLOCATED"]
_ALLOCATED = ["ALLOCATED"]


def _socket_cores(cores: list[object], sidx: int, name: str, picked: list[tuple[int, int]]) -> int:
    """Append the allocated (socket, core) pairs of one socket's core list; return its core count.

    Every core of every node of every job passes here (112 per node on a DGX), so the shapes Slurm prints
    (an int index, a one-word status list) are taken directly; anything else goes through the checked readers."""
    top = 0
    for c in cores:
        if type(c) is not dict:
            c = as_object(c, "allocation core")
        cidx = c.get("index")
        if type(cidx) is not int or not 0 <= cidx <= 65535:
            cidx = _index(cidx, "core index")
        if cidx >= top:
            top = cidx + 1
        status = c.get("status")
        if status == _UNALLOCATED:
            continue
        if status == _ALLOCATED or _status_allocated(status, f"status of core {sidx}:{cidx} on {name}"):
            picked.append((sidx, cidx))
    return top


def _threads(shape: NodeShape | None, job_tpc: int | None, cpus: int | None, ncores: int) -> int:
    if shape is not None and shape.threads_per_core:
        return shape.threads_per_core
    if job_tpc:
        return job_tpc
    if cpus and ncores and cpus % ncores == 0:
        return cpus // ncores
    return 1


def _allocation_new(
    a: JSONRecord, job_tpc: int | None, shapes: Mapping[str, NodeShape]
) -> tuple[str, NodeAlloc]:
    """One ``nodes.allocation[]`` entry (data_parser v0.0.41+): every core listed with its status."""
    name = text_or_none(a.get("name"), "allocation name")
    if name is None:
        raise ParseError("job_resources allocation", excerpt(a), hint="the entry names no node")
    sockets = a.get("sockets") or []
    if not isinstance(sockets, list):
        raise ParseError("allocation sockets", excerpt(sockets), hint="expected a list of sockets")
    picked: list[tuple[int, int]] = []
    per_socket: dict[int, int] = {}
    for s in sockets:
        sock = as_object(s, "allocation socket")
        sidx = _index(sock.get("index"), "socket index")
        cores = sock.get("cores") or []
        if not isinstance(cores, list):
            raise ParseError("allocation cores", excerpt(cores), hint="expected a list of cores")
        per_socket[sidx] = _socket_cores(cores, sidx, name, picked)
    shape = shapes.get(name)
    if shape is not None and shape.cores_per_socket:
        per_socket = {k: shape.cores_per_socket for k in per_socket} or {0: shape.cores_per_socket}
    cpus = number(as_object(a.get("cpus"), "allocation cpus").get("count"), "allocation cpus.count")
    threads = _threads(shape, job_tpc, cpus, len(picked))
    mem = number(
        as_object(a.get("memory"), "allocation memory").get("allocated"), "allocation memory.allocated"
    )
    return name, NodeAlloc(_cpu_ids(picked, per_socket, threads), mem)


def _cores_key(sockets: JSONRecord, shape: NodeShape | None) -> object:
    """A hashable copy of an old-layout ``sockets`` dict with the node's shape, or None where some part is not
    of the shape Slurm prints (then the entry is read, and its errors reported, without the memo)."""
    try:
        key = (shape, *((k, *v["cores"].items()) for k, v in sockets.items()))  # type: ignore[index]
        hash(key)
    except (TypeError, KeyError, AttributeError):
        return None
    return key


def _old_cpu_ids(sockets: JSONRecord, shape: NodeShape | None, name: str) -> str | None:
    picked: list[tuple[int, int]] = []
    for skey, sval in sockets.items():
        sidx = _index(skey, "socket index")
        for ckey, status in as_object(
            as_object(sval, "allocated socket").get("cores"), "allocated cores"
        ).items():
            cidx = _index(ckey, "core index")
            if status == "allocated" or _status_allocated(status, f"status of core {sidx}:{cidx} on {name}"):
                picked.append((sidx, cidx))
    per_socket = {0: shape.cores_per_socket} if shape is not None and shape.cores_per_socket else {}
    threads = _threads(shape, None, None, len(picked))
    return _cpu_ids(picked, per_socket, threads)


def _allocation_old(
    a: JSONRecord, shapes: Mapping[str, NodeShape], memo: dict[object, str | None]
) -> tuple[str, NodeAlloc]:
    """One ``allocated_nodes[]`` entry (v0.0.38 to v0.0.40): only the allocated cores, keyed by index.

    The jobs of a queue hold the same few core sets (cores 0-11 of some node ...): the CPU_IDs of each distinct
    (node shape, cores) are worked out once per parse, in ``memo``; a corrupt entry is never memoised."""
    name = text_or_none(a.get("nodename"), "allocated node name")
    if name is None:
        raise ParseError("job_resources allocated_nodes", excerpt(a), hint="the entry names no node")
    sockets = as_object(a.get("sockets"), "allocated sockets")
    shape = shapes.get(name)
    key = _cores_key(sockets, shape)
    cpu_ids = memo.get(key, _NOT_SEEN) if key is not None else _NOT_SEEN
    if cpu_ids is _NOT_SEEN:
        cpu_ids = _old_cpu_ids(sockets, shape, name)
        if key is not None:
            memo[key] = cpu_ids
    mem = number(a.get("memory_allocated"), "memory_allocated")
    return name, NodeAlloc(cpu_ids, mem)  # type: ignore[arg-type]


_NOT_SEEN = object()


def node_allocs(
    j: JSONRecord, shapes: Mapping[str, NodeShape], memo: dict[object, str | None] | None = None
) -> dict[str, NodeAlloc]:
    """Node -> CPU_IDs and memory of the job there, from ``job_resources`` (any layout). ``memo``: a dict kept
    across the jobs of one parse (never longer: it holds what this parse's node shapes gave)."""
    jr = j.get("job_resources")
    if jr is None or (type(jr) is dict and not jr):  # a pending job: nothing allocated yet
        return {}
    jr = as_object(jr, "job_resources")
    out: dict[str, NodeAlloc] = {}
    nodes_obj = jr.get("nodes")
    if isinstance(nodes_obj, dict) and "allocation" in nodes_obj:
        entries = nodes_obj.get("allocation") or []
        if not isinstance(entries, list):
            raise ParseError("job_resources.nodes.allocation", excerpt(entries), hint="expected a list")
        job_tpc = number(jr.get("threads_per_core"), "job_resources.threads_per_core") or None
        for e in entries:
            name, alloc = _allocation_new(as_object(e, "allocation entry"), job_tpc, shapes)
            out[name] = alloc
    elif "allocated_nodes" in jr:
        entries = jr.get("allocated_nodes") or []
        if not isinstance(entries, list):
            raise ParseError("job_resources.allocated_nodes", excerpt(entries), hint="expected a list")
        for e in entries:
            name, alloc = _allocation_old(
                as_object(e, "allocated_nodes entry"), shapes, {} if memo is None else memo
            )
            out[name] = alloc
    return out
