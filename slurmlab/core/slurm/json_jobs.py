"""Jobs from ``squeue --json`` and ``scontrol --json show job -d``, any layout (see :mod:`.parse_json`).

A job whose ``gres_detail`` (one entry per node) does not line up with its nodes raises ParseError rather than
dropping entries; the per-node CPU_IDs and memory come from ``job_resources`` (:mod:`.json_job_resources`).
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping

from slurmlab.core.slurm.gres import parse_gres
from slurmlab.core.slurm.hostlist import expand
from slurmlab.core.slurm.json_fields import (
    JSONRecord,
    each_record,
    excerpt,
    exit_status,
    free_text,
    number,
    record_list,
    seconds_from_minutes,
    state_and_flags,
    text_list,
    text_or_none,
)
from slurmlab.core.slurm.json_job_resources import NodeShape, node_allocs, node_shapes
from slurmlab.core.slurm.models import GresAlloc, Job, Node, Tres
from slurmlab.core.slurm.timefmt import from_epoch
from slurmlab.errors import ParseError

__all__ = ["parse_jobs_json"]

_ENFORCE_FLAGS = {"GRES_ENFORCE_BIND", "GRES_BINDING_ENFORCED"}


def _job(j: JSONRecord, shapes: Mapping[str, NodeShape] | None = None) -> Job:
    try:
        job_id = number(j["job_id"], "job_id")
        state, state_flags = state_and_flags(j["job_state"], "job_state")
    except KeyError as exc:
        raise ParseError("job", excerpt(j), hint=f"the job has no {exc.args[0]!r}") from None
    if job_id is None:
        raise ParseError("job_id", excerpt(j))
    nodelist = text_or_none(j.get("nodes"), "nodes") or ""
    nodes = tuple(expand(nodelist))
    details = j.get("gres_detail") or []
    if not isinstance(details, list):
        raise ParseError("gres_detail", excerpt(details))
    allocs: list[GresAlloc] = []
    per_node = node_allocs(j, shapes or {})
    if details:
        if len(details) != len(nodes):
            raise ParseError(
                "gres_detail",
                excerpt(details),
                hint=f"job {job_id} lists {len(details)} GRES entries for {len(nodes)} nodes ({nodelist})",
            )
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
    flags = text_list(j.get("flags"))
    array_job = number(j.get("array_job_id"))
    task = number(j.get("array_task_id"))
    array_tasks = text_or_none(j.get("array_task_string"))
    return Job(
        job_id=job_id,
        name=free_text(j.get("name"), "name"),
        state=state,
        state_flags=state_flags,
        reason=text_or_none(j.get("state_reason")) if j.get("state_reason") != "None" else None,
        user=text_or_none(j.get("user_name")),
        partition=text_or_none(j.get("partition")),
        nodelist=nodelist,
        nodes=nodes,
        array_job_id=array_job or None,
        array_task_id=task if array_job else None,
        array_tasks=array_tasks,
        submit_time=from_epoch(number(j.get("submit_time"))),
        start_time=from_epoch(number(j.get("start_time"))),
        end_time=from_epoch(number(j.get("end_time"))),
        time_limit=seconds_from_minutes(j.get("time_limit"), "time_limit"),
        exit=exit_status(j.get("exit_code")),
        derived_exit=exit_status(j.get("derived_exit_code")),
        tres_req=Tres.parse(text_or_none(j.get("tres_req_str"))),
        tres_alloc=Tres.parse(text_or_none(j.get("tres_alloc_str"))),
        tres_per_job=parse_gres(text_or_none(j.get("tres_per_job"))),
        tres_per_node=parse_gres(text_or_none(j.get("tres_per_node"))),
        tres_per_task=parse_gres(text_or_none(j.get("tres_per_task"))),
        tres_bind=text_or_none(j.get("tres_bind")),
        gres_binding_enforced=bool(_ENFORCE_FLAGS.intersection(flags)),
        gpu_allocs=tuple(allocs),
        num_nodes=number(j.get("node_count")),
        num_cpus=number(j.get("cpus")),
        num_tasks=number(j.get("tasks")),
        comment=text_or_none(j.get("comment")) or None,
        flags=flags,
    )


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
    return each_record(record_list(doc, "jobs", "jobs JSON"), lambda j: _job(j, shapes), problems, "job_id")
