"""Parsers of Slurm's text output (``scontrol show …``, ``sinfo --version``).

API (``tz`` is the zone the cluster prints its times in; None = this machine's local zone)::

    parse_scontrol_jobs(text, tz=None, *, problems=None) -> list[Job]   # scontrol show job -d
    parse_scontrol_nodes(text, *, problems=None) -> list[Node]         # scontrol show node -d
    parse_scontrol_partitions(text, *, problems=None) -> list[Partition]  # scontrol show partition
    parse_scontrol_steps(text, tz=None, *, problems=None) -> list[Step]  # show steps / show step -d
    parse_version(text) -> str                               # "slurm-wlm 22.05.8" -> "22.05.8"
    parse_records(text, first_key, problems=None) -> list[Record]  # the KEY=VALUE record reader

``problems``: None raises the first bad record's ParseError; a list collects them (each with
``record_id``) and the other records are still returned, so one hostile job never takes a
listing down.

22.05 has no ``scontrol --json``, and its JSON lacks nothing the text has except the per-node
detail (``Nodes=node1 CPU_IDs=0 Mem=1000 GRES=gpu:h100:2(IDX:0-1)``) which only ``-d`` text
shows on some versions. Records are split where a line starts with the record's first key and
read as Slurm lays them out (see parse_records): a user's free text never becomes fields, and
a record that does not fit the layout is a bad record, never a wrong value. A record whose
required field is missing or malformed raises ParseError naming it; unknown keys are ignored.

The record reader lives in :mod:`.scontrol_records` and the layouts it reads by in :mod:`.scontrol_layouts`;
``Record`` and ``parse_records`` stay importable from here.
"""

from __future__ import annotations

import re
from collections.abc import Callable
from datetime import tzinfo
from typing import TypeVar

from slurmlab.core.slurm.gres import parse_gres
from slurmlab.core.slurm.hostlist import expand
from slurmlab.core.slurm.models import (
    ExitStatus,
    GresAlloc,
    Job,
    Node,
    NodeResources,
    Partition,
    Step,
    Tres,
    parse_mem_mb,
)
from slurmlab.core.slurm.scontrol_records import Record, parse_records
from slurmlab.core.slurm.timefmt import parse_optional_duration, parse_timestamp
from slurmlab.errors import ParseError

__all__ = [
    "parse_sinfo_node_states",
    "Record",
    "parse_records",
    "parse_scontrol_jobs",
    "parse_scontrol_nodes",
    "parse_scontrol_partitions",
    "parse_scontrol_steps",
    "parse_version",
]

_DIGITS = re.compile(r"[0-9]{1,19}")


def _int_or_none(value: str | None, rec: Record, key: str) -> int | None:
    if value is None:
        return None
    # the leading number: "2-2" (NumNodes min-max) reads 2; ASCII digits only, as Slurm prints
    m = _DIGITS.match(value)
    if m is None or (len(value) > m.end() and value[m.end()].isdigit()):
        raise ParseError(f"{key} value", value, hint=f"in the record starting {rec.text[:60]!r}")
    return int(m.group(0))


def _duration(value: str | None) -> int | None:
    if value is None:
        return None
    return parse_optional_duration(value)[1]


def _user(value: str | None) -> str | None:
    # "root(0)" -> "root"; steps print just the uid
    return value.split("(", 1)[0] if value else None


def _state(value: str) -> tuple[str, tuple[str, ...]]:
    flags: list[str] = []
    if value.endswith("*"):
        value = value.rstrip("*")
        flags.append("NOT_RESPONDING")
    parts = [p for p in value.upper().split("+") if p]
    if not parts:
        raise ParseError("state", value)
    return parts[0], tuple(parts[1:]) + tuple(flags)


def _job(rec: Record, tz: tzinfo | None) -> Job:
    job_id = _int_or_none(rec.need("JobId", "scontrol job record"), rec, "JobId")
    if job_id is None:  # need() never returns None; this keeps the type exact
        raise ParseError("scontrol job record", rec.text)
    state, state_flags = _state(rec.need("JobState", "scontrol job record"))
    nodelist = rec.get("NodeList") or ""
    nodes = tuple(expand(nodelist))
    allocs: list[GresAlloc] = []
    resources: list[NodeResources] = []
    for d in rec.details:
        mem = d.get("Mem")
        mem_mb = parse_mem_mb(mem) if mem else None
        cpu_ids = d.get("CPU_IDs")
        block_nodes = expand(d["Nodes"])
        if not set(block_nodes) <= set(nodes):
            raise ParseError(
                "per-node block",
                d["Nodes"],
                hint=f"it names nodes outside the job's NodeList={nodelist}",
                record_id=rec.record_id,
            )
        # every block gives the job's CPUs and memory on its nodes; only one with GRES gives a GresAlloc
        items = parse_gres(d.get("GRES"))
        for node in block_nodes:
            resources.append(NodeResources(node=node, cpu_ids=cpu_ids, mem_mb=mem_mb))
            if items:
                allocs.append(GresAlloc(node=node, items=items, cpu_ids=cpu_ids, mem_mb=mem_mb))
    tres_text = rec.get("TRES")
    req = Tres.parse(rec.get("ReqTRES") or tres_text)
    alloc = (
        Tres.parse(rec.get("AllocTRES"))
        if "AllocTRES" in rec.fields
        else (Tres.parse(tres_text) if nodelist else None)
    )
    array_job = _int_or_none(rec.get("ArrayJobId"), rec, "ArrayJobId")
    task_text = rec.get("ArrayTaskId")
    task_id = int(task_text) if task_text and _DIGITS.fullmatch(task_text) else None
    exit_text = rec.get("ExitCode")
    derived_text = rec.get("DerivedExitCode")
    enforce = (rec.get("GresEnforceBind") or "").lower() == "yes"
    return Job(
        job_id=job_id,
        name=rec.fields.get("JobName", ""),
        state=state,
        state_flags=state_flags,
        reason=rec.get("Reason"),
        user=_user(rec.get("UserId")),
        partition=rec.get("Partition"),
        nodelist=nodelist,
        nodes=nodes,
        array_job_id=array_job,
        array_task_id=task_id,
        array_tasks=task_text if task_text and task_id is None else None,
        submit_time=parse_timestamp(rec.get("SubmitTime") or "", tz),
        start_time=parse_timestamp(rec.get("StartTime") or "", tz),
        end_time=parse_timestamp(rec.get("EndTime") or "", tz),
        time_limit=_duration(rec.get("TimeLimit")),
        exit=ExitStatus.from_text(exit_text) if exit_text else None,
        derived_exit=ExitStatus.from_text(derived_text) if derived_text else None,
        tres_req=req,
        tres_alloc=alloc,
        tres_per_job=parse_gres(rec.get("TresPerJob")),
        tres_per_node=parse_gres(rec.get("TresPerNode")),
        tres_per_task=parse_gres(rec.get("TresPerTask")),
        tres_bind=rec.get("TresBind"),
        gres_binding_enforced=enforce,
        gpu_allocs=tuple(allocs),
        node_resources=tuple(resources),
        num_nodes=_int_or_none(rec.get("NumNodes"), rec, "NumNodes"),
        num_cpus=_int_or_none(rec.get("NumCPUs"), rec, "NumCPUs"),
        num_tasks=_int_or_none(rec.get("NumTasks"), rec, "NumTasks"),
        comment=rec.get("Comment") or None,
        eligible_time=parse_timestamp(rec.get("EligibleTime") or "", tz),
    )


_T = TypeVar("_T")


def _each(
    records: list[Record], build: Callable[[Record], _T], problems: list[ParseError] | None
) -> list[_T]:
    """``build`` over the records; a record that fails is reported in ``problems`` (when given)."""
    out: list[_T] = []
    for rec in records:
        try:
            out.append(build(rec))
        except ParseError as exc:
            err = exc.for_record(rec.record_id)
            if problems is None:
                raise err from None
            problems.append(err)
    return out


def parse_scontrol_jobs(
    text: str, tz: tzinfo | None = None, *, problems: list[ParseError] | None = None
) -> list[Job]:
    """``scontrol show job -d`` (multi-line; ``-o`` best effort, see parse_records).

    With ``problems`` a list, a job record that does not parse is left out and its ParseError
    (``record_id`` = the job id) appended; without, it raises."""
    return _each(parse_records(text, "JobId", problems), lambda rec: _job(rec, tz), problems)


def _csv(value: str | None) -> tuple[str, ...]:
    return tuple(v for v in (value or "").split(",") if v)


def _node(rec: Record) -> Node:
    name = rec.need("NodeName", "scontrol node record")
    state, flags = _state(rec.need("State", "scontrol node record"))
    return Node(
        name=name,
        state=state,
        state_flags=flags,
        partitions=_csv(rec.get("Partitions")),
        cpus=_int_or_none(rec.get("CPUTot"), rec, "CPUTot"),
        alloc_cpus=_int_or_none(rec.get("CPUAlloc"), rec, "CPUAlloc"),
        real_memory_mb=_int_or_none(rec.get("RealMemory"), rec, "RealMemory"),
        alloc_memory_mb=_int_or_none(rec.get("AllocMem"), rec, "AllocMem"),
        features=_csv(rec.get("AvailableFeatures")),
        gres=parse_gres(rec.get("Gres")),
        gres_used=parse_gres(rec.get("GresUsed")),
        reason=rec.get("Reason"),
        sockets=_int_or_none(rec.get("Sockets"), rec, "Sockets"),
        cores_per_socket=_int_or_none(rec.get("CoresPerSocket"), rec, "CoresPerSocket"),
        threads_per_core=_int_or_none(rec.get("ThreadsPerCore"), rec, "ThreadsPerCore"),
    )


def parse_scontrol_nodes(text: str, *, problems: list[ParseError] | None = None) -> list[Node]:
    """``scontrol show node [-d]`` (multi-line; ``-o`` best effort). ``problems``: as for jobs."""
    return _each(parse_records(text, "NodeName", problems), _node, problems)


def _partition(rec: Record) -> Partition:
    name = rec.need("PartitionName", "scontrol partition record")
    nodelist = rec.get("Nodes") or ""
    default = rec.get("Default")
    return Partition(
        name=name,
        nodelist=nodelist,
        nodes=tuple(expand(nodelist)),
        state=rec.get("State"),
        default=None if default is None else default.upper() == "YES",
        max_time=_duration(rec.get("MaxTime")),
        default_time=_duration(rec.get("DefaultTime")) if rec.get("DefaultTime") != "NONE" else None,
        total_cpus=_int_or_none(rec.get("TotalCPUs"), rec, "TotalCPUs"),
        total_nodes=_int_or_none(rec.get("TotalNodes"), rec, "TotalNodes"),
        tres=Tres.parse(rec.get("TRES")),
    )


def parse_scontrol_partitions(text: str, *, problems: list[ParseError] | None = None) -> list[Partition]:
    """``scontrol show partition`` (multi-line; ``-o`` best effort). ``problems``: as for jobs."""
    return _each(parse_records(text, "PartitionName", problems), _partition, problems)


def _step(rec: Record, tz: tzinfo | None) -> Step:
    step_id = rec.need("StepId", "scontrol step record")
    state, _flags = _state(rec.need("State", "scontrol step record"))
    nodelist = rec.get("NodeList") or ""
    return Step(
        step_id=step_id,
        name=rec.fields.get("Name", ""),
        state=state,
        nodelist=nodelist,
        nodes=tuple(expand(nodelist)),
        partition=rec.get("Partition"),
        user=rec.get("UserId"),
        start_time=parse_timestamp(rec.get("StartTime") or "", tz),
        time_limit=_duration(rec.get("TimeLimit")),
        num_tasks=_int_or_none(rec.get("Tasks"), rec, "Tasks"),
        num_cpus=_int_or_none(rec.get("CPUs"), rec, "CPUs"),
        tres_alloc=Tres.parse(rec.get("TRES")),
        tres_per_step=parse_gres(rec.get("TresPerStep")),
        tres_per_node=parse_gres(rec.get("TresPerNode")),
        tres_per_task=parse_gres(rec.get("TresPerTask")),
    )


def parse_scontrol_steps(
    text: str, tz: tzinfo | None = None, *, problems: list[ParseError] | None = None
) -> list[Step]:
    """``scontrol show steps`` / ``scontrol show step -d``. ``problems``: as for jobs."""
    return _each(parse_records(text, "StepId", problems), lambda rec: _step(rec, tz), problems)


_VERSION = re.compile(r"^slurm(?:-wlm)?\s+(\d+\.\d+\.\d+\S*)\s*$")


def parse_version(text: str) -> str:
    """``sinfo --version`` -> ``22.05.8``."""
    m = _VERSION.match(text.strip())
    if m is None:
        raise ParseError(
            "sinfo --version output", text, hint="expected 'slurm 24.11.5' or 'slurm-wlm 22.05.8'"
        )
    return m.group(1)


def parse_sinfo_node_states(text: str) -> dict[str, str]:
    """``sinfo -h -N -o '%N|%T'``: node -> state (``idle``, ``mixed``, ``down*`` ...).

    A node in several partitions is listed once per partition, with the same state.
    """
    states: dict[str, str] = {}
    for line in text.splitlines():
        if not line.strip():
            continue
        name, sep, state = line.strip().partition("|")
        if not sep or not name or not state or " " in name:
            raise ParseError("sinfo node state line", line, hint="expected NODE|STATE")
        states[name] = state
    return states
