"""Parsers of Slurm's JSON output, every layout from openapi v0.0.38 (22.05) to data_parser v0.0.45.

API (``doc`` is the decoded JSON object; use ``json.loads`` first)::

    json_meta(doc) -> JsonMeta(version "24.11.5" | None, layout "data_parser/v0.0.42" | "openapi/v0.0.38" | None)
    parse_jobs_json(doc, nodes=None) -> list[Job] # squeue --json, scontrol --json show job -d
    node_shapes(nodes) -> {name: NodeShape}       # what CPU_IDs need from the node records
    parse_nodes_json(doc) -> list[Node]           # scontrol --json show node, sinfo --json (nodes[] or sinfo[])
    parse_partitions_json(doc) -> list[Partition] # scontrol --json show partition
    parse_steps_json(doc) -> list[Step]           # scontrol --json show steps

Differences handled: numbers plain or ``{set, infinite, number}``; ``job_state``/``state`` a
string or a list (first entry is the base state, the rest are flags); ``meta.Slurm.version``
ints vs ``meta.slurm.version`` strings; sinfo ``nodes[]`` (22.05) vs ``sinfo[]`` per
node×partition (merged here into one Node per name, partitions joined); flags
GRES_ENFORCE_BIND vs GRES_BINDING_ENFORCED; ``exit_code`` a raw wait status vs an object.

Per-node CPU_IDs and memory (what ``scontrol show job -d`` prints as ``Nodes=… CPU_IDs=… Mem=…``)
come from ``job_resources``: ``allocated_nodes[]`` with ``sockets`` a dict of the allocated cores
(openapi v0.0.38 to data_parser v0.0.40) or ``nodes.allocation[]`` with every core of every
socket and its status (v0.0.41 on). Slurm prints CPU_IDs as abstract CPU ids: (socket x cores
per socket + core) x threads per core, every thread of an allocated core. Cores per socket come
from the socket's own core list (v0.0.41+) or the node record; threads per core from the node
record, else ``job_resources.threads_per_core``, else the allocated CPUs over allocated cores, else 1.
Where the old layout puts a core past socket 0 and no node record gives the cores per socket,
CPU_IDs stay None (unknown) rather than a guess.
Unknown fields are ignored and missing optional fields give None; a job whose ``gres_detail``
does not line up with its nodes raises ParseError rather than dropping entries.
"""

from __future__ import annotations

import json
import math
from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass, replace
from typing import TypeAlias, TypeVar

from slurmlab.core.slurm.gres import parse_gres
from slurmlab.core.slurm.hostlist import expand
from slurmlab.core.slurm.models import ExitStatus, GresAlloc, Job, Node, Partition, Step, Tres
from slurmlab.core.slurm.ranges import render_index_list
from slurmlab.core.slurm.timefmt import from_epoch
from slurmlab.errors import ParseError

__all__ = [
    "JSONRecord",
    "JsonMeta",
    "NodeShape",
    "node_shapes",
    "json_meta",
    "parse_jobs_json",
    "parse_nodes_json",
    "parse_partitions_json",
    "parse_steps_json",
]

# A decoded JSON object as Slurm printed it: its values are checked by the readers below, never trusted.
JSONRecord: TypeAlias = Mapping[str, object]

_ENFORCE_FLAGS = {"GRES_ENFORCE_BIND", "GRES_BINDING_ENFORCED"}


@dataclass(frozen=True)
class JsonMeta:
    version: str | None
    layout: str | None


# Slurm's numbers are at most 64 bits; past that a value is corrupt, not a count
_NUM_LIMIT = 2**64


def _short(obj: object) -> str:
    try:
        return json.dumps(obj, default=str)[:300]
    except (ValueError, RecursionError):
        return repr(type(obj))


def _obj(value: object, what: str) -> JSONRecord:
    """A JSON object that may be absent (-> {}); anything else is a ParseError."""
    if value is None:
        return {}
    if not isinstance(value, dict):
        raise ParseError(what, _short(value), hint="expected a JSON object")
    return value


def load_json(text: str, what: str = "JSON") -> object:
    """``json.loads`` whose every failure (bad syntax, nesting too deep for Python) is a ParseError."""
    try:
        return json.loads(text)
    except json.JSONDecodeError as exc:
        raise ParseError(what, text[:200], hint=f"invalid JSON at line {exc.lineno}: {exc.msg}") from None
    except RecursionError:
        raise ParseError(what, text[:200], hint="nested too deeply to be Slurm's output") from None
    except ValueError as exc:  # a number of more than 4300 digits
        raise ParseError(what, text[:200], hint=f"invalid JSON: {exc}") from None


def json_meta(doc: JSONRecord) -> JsonMeta:
    meta = doc.get("meta")
    if not isinstance(meta, dict):
        return JsonMeta(None, None)
    slurm = meta.get("slurm") or meta.get("Slurm") or {}
    version: str | None = None
    if isinstance(slurm, dict):
        release = slurm.get("release")
        v = slurm.get("version")
        if isinstance(release, str) and release:
            version = release
        elif isinstance(v, dict) and "major" in v:
            parts = [_num(v.get(k, 0), f"meta version {k}") or 0 for k in ("major", "minor", "micro")]
            version = f"{parts[0]:02d}.{parts[1]:02d}.{parts[2]}"
    plugin = meta.get("plugin") or {}
    layout: str | None = None
    if isinstance(plugin, dict):
        found = plugin.get("data_parser") or plugin.get("type") or None
        layout = found if isinstance(found, str) else None
    return JsonMeta(version, layout)


def _num(value: object, what: str = "number") -> int | None:
    """A plain number or ``{set, infinite, number}``; None when unset or infinite."""
    if value is None:
        return None
    if isinstance(value, bool):
        return int(value)
    if isinstance(value, int) and abs(value) < _NUM_LIMIT:
        return value
    if isinstance(value, float) and math.isfinite(value) and abs(value) < _NUM_LIMIT:
        return int(value)
    if isinstance(value, dict) and "number" in value:
        if value.get("infinite") or not value.get("set", True):
            return None
        inner = value["number"]
        if isinstance(inner, (dict, list)):
            raise ParseError(what, _short(value), hint="the number of {set, infinite, number} is not a number")
        return _num(inner, what)
    if isinstance(value, str) and 0 < len(value) <= 20 and value.isascii() and value.isdigit():
        return int(value)
    raise ParseError(what, _short(value), hint="expected a number or {set, infinite, number}")


def _minutes(value: object, what: str) -> int | None:
    n = _num(value, what)
    return None if n is None else n * 60


def _state(value: object, what: str) -> tuple[str, tuple[str, ...]]:
    if isinstance(value, str) and value:
        return value.upper(), ()
    if isinstance(value, list) and value and all(isinstance(v, str) for v in value):
        return value[0].upper(), tuple(v.upper() for v in value[1:])
    raise ParseError(what, _short(value), hint="expected a state string or a list of states")


def _str(value: object, what: str = "text field") -> str | None:
    if value is None:
        return None
    if isinstance(value, bool) or not isinstance(value, (str, int, float)):
        raise ParseError(what, _short(value), hint="expected a string")
    if not isinstance(value, str):
        _num(value, what)  # a number Slurm could print, not 10**400 or NaN
        return str(value)
    return value if value.strip() not in ("", "(null)", "N/A") else None


def _text(value: object, what: str) -> str:
    """A free-text field kept as written (a name of "N/A" is that name)."""
    if value is None:
        return ""
    if isinstance(value, str):
        return value
    return _str(value, what) or ""


def _list(value: object) -> tuple[str, ...]:
    if value is None:
        return ()
    if isinstance(value, str):
        return tuple(v for v in value.split(",") if v)
    if isinstance(value, list):
        return tuple(_str(v, "list entry") or "" for v in value)
    raise ParseError("list", _short(value))


def _exit(value: object) -> ExitStatus | None:
    if value is None:
        return None
    if isinstance(value, int) and not isinstance(value, bool):
        return ExitStatus.from_wait_status(value)
    if isinstance(value, dict):
        code = _num(value.get("return_code"), "exit_code.return_code") or 0
        signal_obj = value.get("signal") or {}
        sig = _num(signal_obj.get("id"), "exit_code.signal.id") if isinstance(signal_obj, dict) else None
        status_list = value.get("status")
        status = _str(status_list[0], "exit_code.status") if isinstance(status_list, list) and status_list else None
        return ExitStatus(code=code, signal=sig or 0, status=status)
    raise ParseError(
        "exit_code", _short(value), hint="expected a wait status or {status, return_code, signal}"
    )


def _records(doc: JSONRecord, key: str, what: str) -> list[object]:
    items = doc.get(key)
    if not isinstance(items, list):
        raise ParseError(what, _short(doc), hint=f"the JSON has no {key!r} list")
    return items


@dataclass(frozen=True)
class NodeShape:
    """How a node numbers its CPUs (from ``scontrol show node``); None where not known."""

    cores_per_socket: int | None
    threads_per_core: int | None


def node_shapes(nodes: Iterable[Node]) -> dict[str, NodeShape]:
    return {n.name: NodeShape(n.cores_per_socket, n.threads_per_core) for n in nodes}


@dataclass(frozen=True)
class _NodeAlloc:
    cpu_ids: str | None
    mem_mb: int | None


def _index(value: object, what: str) -> int:
    n = _num(value, what)
    if n is None or n < 0 or n > 65535:
        raise ParseError(what, _short(value), hint="expected a socket or core index from 0 to 65535")
    return n


def _cpu_ids(
    cores: list[tuple[int, int]], cores_per_socket: dict[int, int], threads: int
) -> str | None:
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
    raise ParseError(what, _short(value), hint="expected a core status string or a list of them")


def _threads(shape: NodeShape | None, job_tpc: int | None, cpus: int | None, ncores: int) -> int:
    if shape is not None and shape.threads_per_core:
        return shape.threads_per_core
    if job_tpc:
        return job_tpc
    if cpus and ncores and cpus % ncores == 0:
        return cpus // ncores
    return 1


def _allocation_new(a: JSONRecord, job_tpc: int | None, shapes: Mapping[str, NodeShape]) -> tuple[str, _NodeAlloc]:
    """One ``nodes.allocation[]`` entry (data_parser v0.0.41+): every core listed with its status."""
    name = _str(a.get("name"), "allocation name")
    if name is None:
        raise ParseError("job_resources allocation", _short(a), hint="the entry names no node")
    sockets = a.get("sockets") or []
    if not isinstance(sockets, list):
        raise ParseError("allocation sockets", _short(sockets), hint="expected a list of sockets")
    picked: list[tuple[int, int]] = []
    per_socket: dict[int, int] = {}
    for s in sockets:
        sock = _obj(s, "allocation socket")
        sidx = _index(sock.get("index"), "socket index")
        cores = sock.get("cores") or []
        if not isinstance(cores, list):
            raise ParseError("allocation cores", _short(cores), hint="expected a list of cores")
        per_socket[sidx] = 0
        for c in cores:
            core = _obj(c, "allocation core")
            cidx = _index(core.get("index"), "core index")
            per_socket[sidx] = max(per_socket[sidx], cidx + 1)
            if _status_allocated(core.get("status"), f"status of core {sidx}:{cidx} on {name}"):
                picked.append((sidx, cidx))
    shape = shapes.get(name)
    if shape is not None and shape.cores_per_socket:
        per_socket = {k: shape.cores_per_socket for k in per_socket} or {0: shape.cores_per_socket}
    cpus = _num(_obj(a.get("cpus"), "allocation cpus").get("count"), "allocation cpus.count")
    threads = _threads(shape, job_tpc, cpus, len(picked))
    mem = _num(_obj(a.get("memory"), "allocation memory").get("allocated"), "allocation memory.allocated")
    return name, _NodeAlloc(_cpu_ids(picked, per_socket, threads), mem)


def _allocation_old(a: JSONRecord, shapes: Mapping[str, NodeShape]) -> tuple[str, _NodeAlloc]:
    """One ``allocated_nodes[]`` entry (v0.0.38 to v0.0.40): only the allocated cores, keyed by index."""
    name = _str(a.get("nodename"), "allocated node name")
    if name is None:
        raise ParseError("job_resources allocated_nodes", _short(a), hint="the entry names no node")
    picked: list[tuple[int, int]] = []
    for skey, sval in _obj(a.get("sockets"), "allocated sockets").items():
        sidx = _index(skey, "socket index")
        for ckey, status in _obj(_obj(sval, "allocated socket").get("cores"), "allocated cores").items():
            cidx = _index(ckey, "core index")
            if _status_allocated(status, f"status of core {sidx}:{cidx} on {name}"):
                picked.append((sidx, cidx))
    shape = shapes.get(name)
    per_socket = {0: shape.cores_per_socket} if shape is not None and shape.cores_per_socket else {}
    threads = _threads(shape, None, None, len(picked))
    mem = _num(a.get("memory_allocated"), "memory_allocated")
    return name, _NodeAlloc(_cpu_ids(picked, per_socket, threads), mem)


def _node_allocs(j: JSONRecord, shapes: Mapping[str, NodeShape]) -> dict[str, _NodeAlloc]:
    """Node -> CPU_IDs and memory of the job there, from ``job_resources`` (any layout)."""
    jr = _obj(j.get("job_resources"), "job_resources")
    out: dict[str, _NodeAlloc] = {}
    nodes_obj = jr.get("nodes")
    if isinstance(nodes_obj, dict) and "allocation" in nodes_obj:
        entries = nodes_obj.get("allocation") or []
        if not isinstance(entries, list):
            raise ParseError("job_resources.nodes.allocation", _short(entries), hint="expected a list")
        job_tpc = _num(jr.get("threads_per_core"), "job_resources.threads_per_core") or None
        for e in entries:
            name, alloc = _allocation_new(_obj(e, "allocation entry"), job_tpc, shapes)
            out[name] = alloc
    elif "allocated_nodes" in jr:
        entries = jr.get("allocated_nodes") or []
        if not isinstance(entries, list):
            raise ParseError("job_resources.allocated_nodes", _short(entries), hint="expected a list")
        for e in entries:
            name, alloc = _allocation_old(_obj(e, "allocated_nodes entry"), shapes)
            out[name] = alloc
    return out


def _job(j: JSONRecord, shapes: Mapping[str, NodeShape] | None = None) -> Job:
    try:
        job_id = _num(j["job_id"], "job_id")
        state, state_flags = _state(j["job_state"], "job_state")
    except KeyError as exc:
        raise ParseError("job", _short(j), hint=f"the job has no {exc.args[0]!r}") from None
    if job_id is None:
        raise ParseError("job_id", _short(j))
    nodelist = _str(j.get("nodes"), "nodes") or ""
    nodes = tuple(expand(nodelist))
    details = j.get("gres_detail") or []
    if not isinstance(details, list):
        raise ParseError("gres_detail", _short(details))
    allocs: list[GresAlloc] = []
    per_node = _node_allocs(j, shapes or {})
    if details:
        if len(details) != len(nodes):
            raise ParseError(
                "gres_detail",
                _short(details),
                hint=f"job {job_id} lists {len(details)} GRES entries for {len(nodes)} nodes ({nodelist})",
            )
        for node, text in zip(nodes, details, strict=True):
            items = parse_gres(_str(text, "gres_detail entry"))
            if items:
                where = per_node.get(node)
                allocs.append(
                    GresAlloc(
                        node=node,
                        items=items,
                        cpu_ids=where.cpu_ids if where else None,
                        mem_mb=where.mem_mb if where else None,
                    )
                )
    flags = _list(j.get("flags"))
    array_job = _num(j.get("array_job_id"))
    task = _num(j.get("array_task_id"))
    array_tasks = _str(j.get("array_task_string"))
    return Job(
        job_id=job_id,
        name=_text(j.get("name"), "name"),
        state=state,
        state_flags=state_flags,
        reason=_str(j.get("state_reason")) if j.get("state_reason") != "None" else None,
        user=_str(j.get("user_name")),
        partition=_str(j.get("partition")),
        nodelist=nodelist,
        nodes=nodes,
        array_job_id=array_job or None,
        array_task_id=task if array_job else None,
        array_tasks=array_tasks,
        submit_time=from_epoch(_num(j.get("submit_time"))),
        start_time=from_epoch(_num(j.get("start_time"))),
        end_time=from_epoch(_num(j.get("end_time"))),
        time_limit=_minutes(j.get("time_limit"), "time_limit"),
        exit=_exit(j.get("exit_code")),
        derived_exit=_exit(j.get("derived_exit_code")),
        tres_req=Tres.parse(_str(j.get("tres_req_str"))),
        tres_alloc=Tres.parse(_str(j.get("tres_alloc_str"))),
        tres_per_job=parse_gres(_str(j.get("tres_per_job"))),
        tres_per_node=parse_gres(_str(j.get("tres_per_node"))),
        tres_per_task=parse_gres(_str(j.get("tres_per_task"))),
        tres_bind=_str(j.get("tres_bind")),
        gres_binding_enforced=bool(_ENFORCE_FLAGS.intersection(flags)),
        gpu_allocs=tuple(allocs),
        num_nodes=_num(j.get("node_count")),
        num_cpus=_num(j.get("cpus")),
        num_tasks=_num(j.get("tasks")),
        comment=_str(j.get("comment")) or None,
        flags=flags,
    )


_T = TypeVar("_T")


def _record_id(item: object, *keys: str) -> str | None:
    for key in keys:
        value = item.get(key) if isinstance(item, dict) else None
        if isinstance(value, dict):
            value = value.get("number")
        if isinstance(value, str) and 0 < len(value) <= 200:
            return value
        if isinstance(value, int) and not isinstance(value, bool) and abs(value) < _NUM_LIMIT:
            return str(value)
    return None


def _each(
    items: list[object], build: Callable[[JSONRecord], _T], problems: list[ParseError] | None, *id_keys: str
) -> list[_T]:
    """``build`` over the records; one that fails is reported in ``problems`` (when given)."""
    out: list[_T] = []
    for i, item in enumerate(items):
        rid = _record_id(item, *id_keys)
        try:
            if not isinstance(item, dict):
                raise ParseError(f"entry {i}", _short(item), hint="expected a JSON object")
            out.append(build(item))
        except ParseError as exc:
            err = exc.for_record(rid)
            if problems is None:
                raise err from None
            problems.append(err)
    return out


def parse_jobs_json(
    doc: JSONRecord,
    *,
    problems: list[ParseError] | None = None,
    nodes: Iterable[Node] | Mapping[str, NodeShape] | None = None,
) -> list[Job]:
    """``squeue --json`` or ``scontrol --json show job -d``, any layout.

    With ``problems`` a list, a job that does not parse is left out and its ParseError
    (``record_id`` = the job id) appended; without, it raises. ``nodes`` (the node records,
    or ``node_shapes`` of them) give each node's cores per socket and threads per core, which
    the per-node CPU_IDs need on hyper-threaded nodes and, in layouts up to v0.0.40, past socket 0."""
    shapes = nodes if isinstance(nodes, Mapping) else node_shapes(nodes or ())
    return _each(_records(doc, "jobs", "jobs JSON"), lambda j: _job(j, shapes), problems, "job_id")


def _node(n: JSONRecord) -> Node:
    name = _str(n.get("name"))
    if name is None:
        raise ParseError("node", _short(n), hint="the node has no name")
    state, flags = _state(n.get("state"), f"state of node {name}")
    extra_flags = tuple(f.upper() for f in _list(n.get("state_flags")))
    return Node(
        name=name,
        state=state,
        state_flags=flags + extra_flags,
        partitions=_list(n.get("partitions")),
        cpus=_num(n.get("cpus")),
        alloc_cpus=_num(n.get("alloc_cpus")),
        real_memory_mb=_num(n.get("real_memory")),
        alloc_memory_mb=_num(n.get("alloc_memory")),
        features=_list(n.get("features")),
        gres=parse_gres(_str(n.get("gres"))),
        gres_used=parse_gres(_str(n.get("gres_used"))),
        reason=_str(n.get("reason")),
        sockets=_num(n.get("sockets"), "sockets"),
        cores_per_socket=_num(n.get("cores"), "cores"),
        threads_per_core=_num(n.get("threads"), "threads"),
    )


def _sinfo_nodes(entries: Iterable[JSONRecord]) -> list[Node]:
    merged: dict[str, Node] = {}
    for e in entries:
        nodes_obj = e.get("nodes") or {}
        names = nodes_obj.get("nodes") if isinstance(nodes_obj, dict) else None
        if not isinstance(names, list) or not names:
            raise ParseError("sinfo entry", _short(e), hint="the entry names no nodes")
        state, flags = _state(_obj(e.get("node"), "sinfo node").get("state"), "sinfo node state")
        gres_obj = _obj(e.get("gres"), "sinfo gres")
        cpus_obj = _obj(e.get("cpus"), "sinfo cpus")
        mem_obj = _obj(e.get("memory"), "sinfo memory")
        part = _str(_obj(e.get("partition"), "sinfo partition").get("name"), "partition name")
        reason_obj = e.get("reason")
        reason = _str(reason_obj.get("description")) if isinstance(reason_obj, dict) else _str(reason_obj)
        single = len(names) == 1
        features = _list(_obj(e.get("features"), "sinfo features").get("total"))
        for raw_name in names:
            name = _str(raw_name, "sinfo node name")
            if name is None:
                raise ParseError("sinfo entry", _short(e), hint="a node without a name")
            prev = merged.get(name)
            parts = (prev.partitions if prev else ()) + (
                (part,) if part and (not prev or part not in prev.partitions) else ()
            )
            merged[name] = Node(
                name=name,
                state=state,
                state_flags=flags,
                partitions=parts,
                cpus=_num(cpus_obj.get("maximum")),
                alloc_cpus=_num(cpus_obj.get("allocated")) if single else None,
                real_memory_mb=_num(mem_obj.get("maximum")),
                alloc_memory_mb=_num(mem_obj.get("allocated")) if single else None,
                features=features,
                gres=parse_gres(_str(gres_obj.get("total"))),
                gres_used=parse_gres(_str(gres_obj.get("used"))),
                reason=reason,
            )
    return list(merged.values())


def _sinfo_nodes_merge(nodes: list[Node]) -> list[Node]:
    """One Node per name from sinfo's node x partition entries: the last entry's values, every partition."""
    merged: dict[str, Node] = {}
    for node in nodes:
        prev = merged.get(node.name)
        if prev is not None:
            extra = tuple(p for p in node.partitions if p not in prev.partitions)
            node = replace(node, partitions=prev.partitions + extra)
        merged[node.name] = node
    return list(merged.values())


def parse_nodes_json(doc: JSONRecord, *, problems: list[ParseError] | None = None) -> list[Node]:
    """``scontrol --json show node`` and ``sinfo --json`` (22.05 ``nodes[]`` or newer ``sinfo[]``).
    ``problems``: as for jobs (a bad sinfo entry is left out, the others still merge)."""
    if "sinfo" in doc:
        entries = _each(_records(doc, "sinfo", "sinfo JSON"), lambda e: _sinfo_nodes([e]), problems)
        return _sinfo_nodes_merge([n for nodes in entries for n in nodes])
    return _each(_records(doc, "nodes", "nodes JSON"), _node, problems, "name")


def _partition(p: JSONRecord) -> Partition:
    name = _str(p.get("name"))
    if name is None:
        raise ParseError("partition", _short(p), hint="the partition has no name")
    nodes_obj = p.get("nodes")
    nodelist = (_str(nodes_obj.get("configured")) if isinstance(nodes_obj, dict) else _str(nodes_obj)) or ""
    state_obj = p.get("partition") or {}
    state = None
    if isinstance(state_obj, dict) and state_obj.get("state"):
        state = _state(state_obj.get("state"), f"state of partition {name}")[0]
    maxs = _obj(p.get("maximums"), "partition maximums")
    defs = _obj(p.get("defaults"), "partition defaults")
    flags = _list(p.get("flags")) if p.get("flags") is not None else None
    tres_obj = p.get("tres") or {}
    return Partition(
        name=name,
        nodelist=nodelist,
        nodes=tuple(expand(nodelist)),
        state=state,
        default=("DEFAULT" in flags) if flags is not None else None,
        max_time=_minutes(maxs.get("time"), "maximums.time"),
        default_time=_minutes(defs.get("time"), "defaults.time"),
        total_cpus=_num(_obj(p.get("cpus"), "partition cpus").get("total")),
        total_nodes=_num(nodes_obj.get("total")) if isinstance(nodes_obj, dict) else None,
        tres=Tres.parse(_str(tres_obj.get("configured"))) if isinstance(tres_obj, dict) else None,
    )


def parse_partitions_json(doc: JSONRecord, *, problems: list[ParseError] | None = None) -> list[Partition]:
    """``scontrol --json show partition``. ``problems``: as for jobs."""
    return _each(_records(doc, "partitions", "partitions JSON"), _partition, problems, "name")


def _step(s: JSONRecord) -> Step:
    sid = s.get("id")
    if isinstance(sid, dict):  # some layouts split the id
        step_id = f"{_str(sid.get('job_id'), 'step job_id')}.{_str(sid.get('step_id'), 'step_id')}"
    elif isinstance(sid, str) and sid:
        step_id = sid
    else:
        raise ParseError("step", _short(s), hint="the step has no id")
    state, _flags = _state(s.get("state"), f"state of step {step_id}")
    time_obj = _obj(s.get("time"), "step time")
    tres = _obj(s.get("tres"), "step tres")
    per = _obj(tres.get("per"), "step tres.per")
    nodelist = _str(s.get("nodes")) or ""
    return Step(
        step_id=step_id,
        name=_text(s.get("name"), "step name"),
        state=state,
        nodelist=nodelist,
        nodes=tuple(expand(nodelist)),
        partition=_str(s.get("partition")),
        user=_str(s.get("user")),
        start_time=from_epoch(_num(time_obj.get("start"))),
        time_limit=_minutes(time_obj.get("limit"), "time.limit"),
        num_tasks=_num(s.get("number_tasks")),
        num_cpus=_num(s.get("number_cpus")),
        tres_alloc=Tres.parse(_str(tres.get("allocation"))),
        tres_per_step=parse_gres(_str(per.get("step"))),
        tres_per_node=parse_gres(_str(per.get("node"))),
        tres_per_task=parse_gres(_str(per.get("task"))),
    )


def parse_steps_json(doc: JSONRecord, *, problems: list[ParseError] | None = None) -> list[Step]:
    """``scontrol --json show steps``. ``problems``: as for jobs."""
    return _each(_records(doc, "steps", "steps JSON"), _step, problems, "id")
