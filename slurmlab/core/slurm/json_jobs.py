"""Jobs from ``squeue --json`` and ``scontrol --json show job -d``, any layout (see :mod:`.parse_json`).

A job whose ``gres_detail`` (one entry per node) does not line up with its nodes raises ParseError rather than
dropping entries; the per-node CPU_IDs and memory come from ``job_resources`` (:mod:`.json_job_resources`), in
``Job.node_resources`` for every node it describes and beside the GRES in ``gpu_allocs``.
"""

from __future__ import annotations

from collections.abc import Iterable, Iterator, Mapping
from dataclasses import fields
from datetime import datetime

from slurmlab.core.slurm.gres import GresItem, parse_gres
from slurmlab.core.slurm.hostlist import expand
from slurmlab.core.slurm.json_fields import (
    JSONRecord,
    each_record,
    excerpt,
    exit_status,
    free_text,
    number,
    record_id,
    record_list,
    seconds_from_minutes,
    state_and_flags,
    text_list,
    text_or_none,
)
from slurmlab.core.slurm.json_job_resources import NodeAlloc, NodeShape, node_allocs, node_shapes
from slurmlab.core.slurm.models import ExitStatus, GresAlloc, Job, Node, NodeResources, Tres
from slurmlab.core.slurm.timefmt import from_epoch
from slurmlab.errors import ParseError

__all__ = ["iter_jobs_json", "parse_jobs_json"]

_ENFORCE_FLAGS = {"GRES_ENFORCE_BIND", "GRES_BINDING_ENFORCED"}


# Jobs of one queue repeat node lists, times and exit codes; the values are immutable, so each distinct one is
# parsed once per call of parse_jobs_json (the caches live in a _Memo, never across calls)
class _Memo:
    def __init__(self) -> None:
        self.nodes: dict[str, tuple[str, ...]] = {}
        self.times: dict[int, datetime | None] = {}
        self.exits: dict[object, ExitStatus | None] = {}
        self.cores: dict[object, str | None] = {}  # see json_job_resources._allocation_old
        self.texts: dict[tuple[object, ...], _Texts] = {}

    def node_tuple(self, nodelist: str) -> tuple[str, ...]:
        hit = self.nodes.get(nodelist)
        if hit is None:
            hit = self.nodes[nodelist] = tuple(expand(nodelist))
        return hit

    def time(self, value: object, what: str) -> datetime | None:
        n = number(value, what)
        if n is None:
            return None
        hit = self.times.get(n, _MISSING)
        if hit is _MISSING:
            hit = self.times[n] = from_epoch(n)
        return hit  # type: ignore[return-value]

    def text_fields(self, j: JSONRecord) -> _Texts:
        """The job's text, TRES and GRES fields (:data:`_TEXT_KEYS`), read once per distinct combination: the
        jobs of a queue share a few users x partitions x requests (one lookup instead of ten reads)."""
        raw = tuple(map(j.get, _TEXT_KEYS))
        try:
            hit = self.texts.get(raw)
        except TypeError:  # a list or an object where Slurm prints text: read (and reported) below
            return _read_texts(raw)
        if hit is None:
            hit = self.texts[raw] = _read_texts(raw)
        return hit

    def exit(self, value: object) -> ExitStatus | None:
        if type(value) is int:  # 22.05: a raw wait status
            hit = self.exits.get(value, _MISSING)
            if hit is _MISSING:
                hit = self.exits[value] = exit_status(value)
            return hit  # type: ignore[return-value]
        return exit_status(value)


_MISSING = object()
_TEXT_KEYS = (
    "user_name",
    "partition",
    "array_task_string",
    "tres_bind",
    "comment",
    "tres_req_str",
    "tres_alloc_str",
    "tres_per_job",
    "tres_per_node",
    "tres_per_task",
)
_Texts = tuple[
    str | None,
    str | None,
    str | None,
    str | None,
    str | None,
    Tres | None,
    Tres | None,
    tuple[GresItem, ...],
    tuple[GresItem, ...],
    tuple[GresItem, ...],
]


def _read_texts(raw: tuple[object, ...]) -> _Texts:
    user, partition, array_tasks, bind, comment, req, alloc, per_job, per_node, per_task = raw
    return (
        text_or_none(user),
        text_or_none(partition),
        text_or_none(array_tasks),
        text_or_none(bind),
        text_or_none(comment) or None,
        Tres.parse(text_or_none(req)),
        Tres.parse(text_or_none(alloc)),
        parse_gres(text_or_none(per_job)),
        parse_gres(text_or_none(per_node)),
        parse_gres(text_or_none(per_task)),
    )


def _allocs(
    j: JSONRecord,
    job_id: int,
    nodelist: str,
    nodes: tuple[str, ...],
    per_node: Mapping[str, NodeAlloc],
) -> tuple[GresAlloc, ...]:
    details = j.get("gres_detail") or []
    if not isinstance(details, list):
        raise ParseError("gres_detail", excerpt(details))
    if not details:
        return ()
    if len(details) != len(nodes):
        raise ParseError(
            "gres_detail",
            excerpt(details),
            hint=f"job {job_id} lists {len(details)} GRES entries for {len(nodes)} nodes ({nodelist})",
        )
    allocs: list[GresAlloc] = []
    for node, text in zip(nodes, details, strict=True):
        items = parse_gres(text_or_none(text, "gres_detail entry"))
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
    return tuple(allocs)


def _resources(nodes: tuple[str, ...], per_node: Mapping[str, NodeAlloc]) -> tuple[NodeResources, ...]:
    """The job's CPUs and memory on each of its nodes that ``job_resources`` describes, GRES or not, in the
    order of its node list."""
    if not per_node:
        return ()
    return tuple(
        NodeResources(node=node, cpu_ids=where.cpu_ids, mem_mb=where.mem_mb)
        for node in nodes
        if (where := per_node.get(node)) is not None
    )


def _job(j: JSONRecord, shapes: Mapping[str, NodeShape], memo: _Memo) -> Job:
    try:
        job_id = number(j["job_id"], "job_id")
        state, state_flags = state_and_flags(j["job_state"], "job_state")
    except KeyError as exc:
        raise ParseError("job", excerpt(j), hint=f"the job has no {exc.args[0]!r}") from None
    if job_id is None:
        raise ParseError("job_id", excerpt(j))
    get = j.get
    nodelist = text_or_none(get("nodes"), "nodes") or ""
    nodes = memo.node_tuple(nodelist)
    held = node_allocs(j, shapes, memo.cores)  # per node, GRES or not: node_resources, and beside gpu_allocs
    gpu_allocs = _allocs(j, job_id, nodelist, nodes, held)
    flags = text_list(get("flags"))
    array_job = number(get("array_job_id"))
    task = number(get("array_task_id"))
    reason = get("state_reason")
    user, partition, array_tasks, bind, comment, req, alloc, per_job, per_node, per_task = memo.text_fields(j)
    return _build_job(
        {
            "job_id": job_id,
            "name": free_text(get("name"), "name"),
            "state": state,
            "state_flags": state_flags,
            "reason": text_or_none(reason) if reason != "None" else None,
            "user": user,
            "partition": partition,
            "nodelist": nodelist,
            "nodes": nodes,
            "array_job_id": array_job or None,
            "array_task_id": task if array_job else None,
            "array_tasks": array_tasks,
            "submit_time": memo.time(get("submit_time"), "submit_time"),
            "start_time": memo.time(get("start_time"), "start_time"),
            "end_time": memo.time(get("end_time"), "end_time"),
            "time_limit": seconds_from_minutes(get("time_limit"), "time_limit"),
            "exit": memo.exit(get("exit_code")),
            "derived_exit": memo.exit(get("derived_exit_code")),
            "tres_req": req,
            "tres_alloc": alloc,
            "tres_per_job": per_job,
            "tres_per_node": per_node,
            "tres_per_task": per_task,
            "tres_bind": bind,
            "gres_binding_enforced": not _ENFORCE_FLAGS.isdisjoint(flags),
            "gpu_allocs": gpu_allocs,
            "node_resources": _resources(nodes, held),
            "num_nodes": number(get("node_count")),
            "num_cpus": number(get("cpus")),
            "num_tasks": number(get("tasks")),
            "comment": comment,
            "eligible_time": memo.time(get("eligible_time"), "eligible_time"),
            "flags": flags,
        }
    )


# A frozen dataclass's __init__ sets each of Job's fields (33) through object.__setattr__: a quarter of the time
# of a 10,000-job parse. _job gives every field, so the instance's __dict__ is filled at once instead, while Job
# has no __post_init__ or __slots__ that this would skip (tests/unit/core/slurm/test_parse_hot_paths.py checks
# the result equals Job(**values)).
_JOB_FIELDS = frozenset(f.name for f in fields(Job))
_FAST_BUILD = "__post_init__" not in vars(Job) and "__slots__" not in vars(Job)


def _build_job(values: dict[str, object]) -> Job:
    if not _FAST_BUILD or len(values) != len(_JOB_FIELDS):
        return Job(**values)  # type: ignore[arg-type]
    job = object.__new__(Job)
    object.__setattr__(job, "__dict__", values)  # the dict _job built becomes the instance's: no copy
    return job


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
    memo = _Memo()
    # each_record pauses the cyclic collector by itself for a large answer (json_fields.gc_paused)
    return each_record(
        record_list(doc, "jobs", "jobs JSON"), lambda j: _job(j, shapes, memo), problems, "job_id"
    )


def iter_jobs_json(
    doc: JSONRecord, *, nodes: Iterable[Node] | Mapping[str, NodeShape] | None = None
) -> Iterator[Job]:
    """The jobs of :func:`parse_jobs_json` one at a time, for a caller that writes each as it is parsed
    (``slurmlab parse``); a job that does not parse raises ParseError (with its job id) when reached."""
    shapes = nodes if isinstance(nodes, Mapping) else node_shapes(nodes or ())
    memo = _Memo()
    for i, item in enumerate(record_list(doc, "jobs", "jobs JSON")):
        if not isinstance(item, dict):
            raise ParseError(f"entry {i}", excerpt(item), hint="expected a JSON object")
        try:
            job = _job(item, shapes, memo)
        except ParseError as exc:
            raise exc.for_record(record_id(item, "job_id")) from None
        yield job
