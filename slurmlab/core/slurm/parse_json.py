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

The parsers live by kind and are importable from here: the field readers (:mod:`.json_fields`), jobs
(:mod:`.json_jobs`) with their per-node CPU_IDs and memory from ``job_resources`` (:mod:`.json_job_resources`),
nodes (:mod:`.json_nodes`); partitions and steps, small, are read here.
Unknown fields are ignored and missing optional fields give None; a job whose ``gres_detail``
does not line up with its nodes raises ParseError rather than dropping entries.
"""

from __future__ import annotations

import json
from dataclasses import dataclass

from slurmlab.core.slurm.gres import parse_gres
from slurmlab.core.slurm.hostlist import expand
from slurmlab.core.slurm.json_fields import (
    LARGE_ANSWER,
    JSONRecord,
    as_object,
    each_record,
    excerpt,
    free_text,
    gc_paused,
    number,
    record_list,
    seconds_from_minutes,
    state_and_flags,
    text_list,
    text_or_none,
)
from slurmlab.core.slurm.json_job_resources import NodeShape, node_shapes
from slurmlab.core.slurm.json_jobs import parse_jobs_json
from slurmlab.core.slurm.json_nodes import parse_nodes_json
from slurmlab.core.slurm.models import Partition, Step, Tres
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


@dataclass(frozen=True)
class JsonMeta:
    version: str | None
    layout: str | None


def load_json(text: str, what: str = "JSON") -> object:
    """``json.loads`` whose every failure (bad syntax, nesting too deep for Python) is a ParseError."""
    try:
        with gc_paused(len(text) >= LARGE_ANSWER * 1000):
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
            parts = [number(v.get(k, 0), f"meta version {k}") or 0 for k in ("major", "minor", "micro")]
            version = f"{parts[0]:02d}.{parts[1]:02d}.{parts[2]}"
    plugin = meta.get("plugin") or {}
    layout: str | None = None
    if isinstance(plugin, dict):
        found = plugin.get("data_parser") or plugin.get("type") or None
        layout = found if isinstance(found, str) else None
    return JsonMeta(version, layout)


def _partition(p: JSONRecord) -> Partition:
    name = text_or_none(p.get("name"))
    if name is None:
        raise ParseError("partition", excerpt(p), hint="the partition has no name")
    nodes_obj = p.get("nodes")
    nodelist = (
        text_or_none(nodes_obj.get("configured")) if isinstance(nodes_obj, dict) else text_or_none(nodes_obj)
    ) or ""
    state_obj = p.get("partition") or {}
    state = None
    if isinstance(state_obj, dict) and state_obj.get("state"):
        state = state_and_flags(state_obj.get("state"), f"state of partition {name}")[0]
    maxs = as_object(p.get("maximums"), "partition maximums")
    defs = as_object(p.get("defaults"), "partition defaults")
    flags = text_list(p.get("flags")) if p.get("flags") is not None else None
    tres_obj = p.get("tres") or {}
    return Partition(
        name=name,
        nodelist=nodelist,
        nodes=tuple(expand(nodelist)),
        state=state,
        default=("DEFAULT" in flags) if flags is not None else None,
        max_time=seconds_from_minutes(maxs.get("time"), "maximums.time"),
        default_time=seconds_from_minutes(defs.get("time"), "defaults.time"),
        total_cpus=number(as_object(p.get("cpus"), "partition cpus").get("total")),
        total_nodes=number(nodes_obj.get("total")) if isinstance(nodes_obj, dict) else None,
        tres=Tres.parse(text_or_none(tres_obj.get("configured"))) if isinstance(tres_obj, dict) else None,
    )


def parse_partitions_json(doc: JSONRecord, *, problems: list[ParseError] | None = None) -> list[Partition]:
    """``scontrol --json show partition``. ``problems``: as for jobs."""
    return each_record(record_list(doc, "partitions", "partitions JSON"), _partition, problems, "name")


def _step(s: JSONRecord) -> Step:
    sid = s.get("id")
    if isinstance(sid, dict):  # some layouts split the id
        step_id = (
            f"{text_or_none(sid.get('job_id'), 'step job_id')}.{text_or_none(sid.get('step_id'), 'step_id')}"
        )
    elif isinstance(sid, str) and sid:
        step_id = sid
    else:
        raise ParseError("step", excerpt(s), hint="the step has no id")
    state, _flags = state_and_flags(s.get("state"), f"state of step {step_id}")
    time_obj = as_object(s.get("time"), "step time")
    tres = as_object(s.get("tres"), "step tres")
    per = as_object(tres.get("per"), "step tres.per")
    nodelist = text_or_none(s.get("nodes")) or ""
    return Step(
        step_id=step_id,
        name=free_text(s.get("name"), "step name"),
        state=state,
        nodelist=nodelist,
        nodes=tuple(expand(nodelist)),
        partition=text_or_none(s.get("partition")),
        user=text_or_none(s.get("user")),
        start_time=from_epoch(number(time_obj.get("start"))),
        time_limit=seconds_from_minutes(time_obj.get("limit"), "time.limit"),
        num_tasks=number(s.get("number_tasks")),
        num_cpus=number(s.get("number_cpus")),
        tres_alloc=Tres.parse(text_or_none(tres.get("allocation"))),
        tres_per_step=parse_gres(text_or_none(per.get("step"))),
        tres_per_node=parse_gres(text_or_none(per.get("node"))),
        tres_per_task=parse_gres(text_or_none(per.get("task"))),
    )


def parse_steps_json(doc: JSONRecord, *, problems: list[ParseError] | None = None) -> list[Step]:
    """``scontrol --json show steps``. ``problems``: as for jobs."""
    return each_record(record_list(doc, "steps", "steps JSON"), _step, problems, "id")
