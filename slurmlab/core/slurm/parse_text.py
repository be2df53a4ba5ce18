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
"""

from __future__ import annotations

import re
from collections import Counter
from collections.abc import Callable
from dataclasses import dataclass, field
from datetime import tzinfo
from typing import TypeVar

from slurmlab.core.slurm.gres import parse_gres
from slurmlab.core.slurm.hostlist import expand
from slurmlab.core.slurm.models import ExitStatus, GresAlloc, Job, Node, Partition, Step, Tres, parse_mem_mb
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

_NULL = {"", "(null)", "N/A", "None", "n/a"}
_KEY_AT = re.compile(r"([A-Za-z_][A-Za-z0-9_/:.\-]*)=")
# a non-free value runs to the next whitespace-separated token that reads KEY=
_NEXT_KEY = re.compile(r"\s+(?=[A-Za-z_][A-Za-z0-9_/:.\-]*=)")
_DIGITS = re.compile(r"[0-9]{1,19}")
# keys of the per-node block "     Nodes=… CPU_IDs=… Mem=… GRES=…" of scontrol show job -d
_DETAIL_KEYS = ("Nodes", "CPU_IDs", "Mem", "GRES")
# Slurm prints the optional JOB_GRES line and the per-node block right after the line that
# ends with CoreSpec=/ThreadSpec= (Socks/Node=… NtasksPerN:B:S:C=… CoreSpec=…)
_BEFORE_DETAIL = frozenset({"CoreSpec", "ThreadSpec"})


@dataclass(frozen=True)
class _Layout:
    """How Slurm prints one kind of record (``src/api/*_info.c``, 22.05 to 26.05).

    ``free`` maps each user- or admin-controlled free-text key to the key Slurm prints after it
    on the same line (None: it is the last on its line), so its value may hold spaces, ``=`` and
    anything else and still end where Slurm ended it. ``first_line`` keys only ever appear on
    the record's first line; one of ``second`` starts the second line (so a line forged by a name
    on the first line is caught even when it names a key the record does not otherwise hold; 26.05
    prints ``SLUID=`` before ``UserId=``). ``known`` are the keys the one-line (``-o``) form splits on.
    """

    first_key: str
    free: dict[str, str | None]
    first_line: frozenset[str] = frozenset()
    known: frozenset[str] = frozenset()
    detail: bool = False
    second: tuple[str, ...] = ()  # the keys one of which starts the second line, always

    def oneline_end(self) -> re.Pattern[str]:
        keys = "|".join(re.escape(k) for k in sorted(self.known | set(self.free), key=len, reverse=True))
        return re.compile(rf"\s+(?=(?:{keys})=)")


_JOB_KEYS = frozenset(
    """JobId ArrayJobId ArrayTaskId ArrayTaskThrottle HetJobId HetJobOffset HetJobIdSet JobName
    UserId GroupId MCS_label Priority Nice Account QOS WCKey JobState Reason Dependency Requeue
    Restarts BatchFlag Reboot ExitCode DerivedExitCode RunTime TimeLimit TimeMin SubmitTime
    EligibleTime AccrueTime StartTime EndTime Deadline PreemptEligibleTime PreemptTime SuspendTime
    SecsPreSuspend LastSchedEval Scheduler ResizeTime Partition AllocNode:Sid ReqNodeList
    ExcNodeList NodeList SchedNodeList BatchHost FedOrigin FedViableSiblings FedActiveSiblings
    NumNodes NumCPUs NumTasks CPUs/Task ReqB:S:C:T TRES ReqTRES AllocTRES Socks/Node
    NtasksPerN:B:S:C CoreSpec ThreadSpec JOB_GRES Nodes CPU_IDs Mem GRES MinCPUsNode MinMemoryCPU
    MinMemoryNode MinTmpDiskNode Features Prefer DelayBoot Reservation OverSubscribe Contiguous
    Licenses LicensesAlloc Network Command WorkDir AdminComment SystemComment Comment StdErr StdIn
    StdOut BatchScript Switches BurstBuffer BurstBufferState CpuFrequency Power CpusPerTres
    MemPerTres TresBind TresFreq TresPerJob TresPerNode TresPerSocket TresPerTask GresEnforceBind
    KillOnInvalidDependent SpreadJob MailUser MailType NtasksPerTRES SLUID
    Container ContainerID Extra SegmentSize ResvPorts SelinuxContext""".split()
)
_JOB = _Layout(
    first_key="JobId",
    free={
        "JobName": None,
        "Comment": None,
        "AdminComment": None,
        "SystemComment": None,
        "WorkDir": None,
        "Command": None,
        "StdErr": None,
        "StdIn": None,
        "StdOut": None,
        "Extra": None,
        "Container": None,
        "ContainerID": None,
        "Network": None,
        "BurstBuffer": None,
        "SelinuxContext": None,
        "Features": "DelayBoot",
        "MailUser": "MailType",
    },
    first_line=frozenset(
        {"JobId", "ArrayJobId", "ArrayTaskId", "ArrayTaskThrottle", "HetJobId", "HetJobOffset", "HetJobIdSet", "JobName"}
    ),
    known=_JOB_KEYS,
    detail=True,
    second=("UserId", "SLUID"),
)
_NODE = _Layout(
    first_key="NodeName",
    free={
        "OS": None,
        "Reason": None,
        "Comment": None,
        "Extra": None,
        "AvailableFeatures": None,
        "ActiveFeatures": None,
        "Partitions": None,
        "InstanceId": "InstanceType",
        "InstanceType": None,
        "Topology": None,
    },
    first_line=frozenset({"NodeName"}),
    known=frozenset(
        """NodeName Arch CoresPerSocket CPUAlloc CPUEfctv CPUTot CPULoad AvailableFeatures
        ActiveFeatures Gres GresDrain GresUsed NodeAddr NodeHostName Port Version OS RealMemory
        AllocMem FreeMem Sockets Boards State ThreadsPerCore TmpDisk Weight Owner MCS_label
        Partitions BootTime SlurmdStartTime LastBusyTime ResumeAfterTime CfgTRES AllocTRES
        CurrentWatts AveWatts CapWatts ExtSensorsJoules ExtSensorsWatts ExtSensorsTemp Reason
        Comment Extra InstanceId InstanceType Topology MemSpecLimit CoreSpecCount CPUSpecList
        TresWeights Lowest""".split()
    ),
)
_PARTITION = _Layout(
    first_key="PartitionName",
    free={},
    first_line=frozenset({"PartitionName"}),
    known=frozenset(
        """PartitionName AllowGroups AllowAccounts AllowQos AllocNodes Default QoS DefaultTime
        DisableRootJobs ExclusiveUser ExclusiveTopo GraceTime Hidden MaxNodes MaxTime MinNodes LLN
        MaxCPUsPerNode MaxCPUsPerSocket Nodes PriorityJobFactor PriorityTier RootOnly ReqResv
        OverSubscribe OverTimeLimit PreemptMode State TotalCPUs TotalNodes SelectTypeParameters
        JobDefaults DefMemPerNode MaxMemPerNode DefMemPerCPU MaxMemPerCPU TRES TRESBillingWeights
        DenyAccounts DenyQos Alternate PowerDownOnIdle ResumeTimeout SuspendTime SuspendTimeout
        Topology""".split()
    ),
)
_STEP = _Layout(
    first_key="StepId",
    free={"Name": "Network", "Network": None, "Container": None, "ContainerID": None},
    first_line=frozenset({"StepId", "UserId", "StartTime", "TimeLimit"}),
    known=frozenset(
        """StepId UserId StartTime TimeLimit State Partition NodeList Nodes CPUs Tasks Name Network
        TRES ResvPorts CPUFreqReq Dist SrunHost:Pid TresPerStep TresPerNode TresPerTask
        TresPerSocket CpusPerTres MemPerTres TresBind TresFreq Container ContainerID""".split()
    ),
)
_LAYOUTS = {lay.first_key: lay for lay in (_JOB, _NODE, _PARTITION, _STEP)}
_ONELINE_END: dict[str, re.Pattern[str]] = {k: lay.oneline_end() for k, lay in _LAYOUTS.items()}


@dataclass
class Record:
    """One ``KEY=VALUE …`` record. ``fields`` holds each key's value (a key appears once);
    ``details`` the per-node blocks of ``show job -d``; ``record_id`` the first key's value."""

    text: str
    fields: dict[str, str] = field(default_factory=dict)
    details: list[dict[str, str]] = field(default_factory=list)
    record_id: str | None = None

    def get(self, key: str) -> str | None:
        value = self.fields.get(key)
        return None if value is None or value.strip() in _NULL else value.strip()

    def need(self, key: str, what: str) -> str:
        value = self.get(key)
        if value is None:
            raise ParseError(what, self.text, hint=f"the record has no {key}=", record_id=self.record_id)
        return value


_NOTHING = re.compile(r"No (?:jobs|job steps|nodes|partitions|reservations) in the system\.?")
_RECORD_ID = re.compile(r"=(\S{1,200})")


def _bad(lines: list[str], why: str, record_id: str | None) -> ParseError:
    return ParseError(
        "scontrol record",
        "\n".join(lines),
        hint=f"{why}; a record laid out otherwise than Slurm prints it is refused, not guessed at",
        record_id=record_id,
    )


def _line_fields(line: str, pos: int, lay: _Layout, oneline: bool) -> list[tuple[str, str]]:
    """The KEY=VALUE fields of one printed line, from ``pos``. A free-text field ends where
    Slurm ends it (see _Layout); any other value holds no space but the words of a value
    Slurm itself prints with spaces, which never read KEY=."""
    out: list[tuple[str, str]] = []
    end_all = len(line)
    while pos < end_all:
        while pos < end_all and line[pos] in " \t":
            pos += 1
        if pos >= end_all:
            break
        m = _KEY_AT.match(line, pos)
        if m is None:
            raise ValueError(f"{line[pos:pos + 40]!r} is not KEY=VALUE")
        key, start = m.group(1), m.end()
        if key in lay.free:
            if oneline:
                nxt = _ONELINE_END[lay.first_key].search(line, start)
                end = nxt.start() if nxt else end_all
            else:
                follower = lay.free[key]
                # the last one: whatever the user wrote comes before what Slurm prints after it
                end = line.rfind(f" {follower}=", start) if follower else -1
                end = end_all if end < 0 else end
        else:
            nxt = _NEXT_KEY.search(line, start)
            end = nxt.start() if nxt else end_all
        out.append((key, line[start:end]))
        pos = end
    return out


def _read_record(lines: list[str], lay: _Layout, oneline: bool) -> Record:
    first = _RECORD_ID.search(lines[0][: len(lay.first_key) + 202])
    rid = first.group(1) if first else None
    rec = Record(text="\n".join(lines), record_id=rid)
    prev: str | None = None
    for n, line in enumerate(lines):
        if not line.strip():
            continue
        indent = len(line) - len(line.lstrip(" "))
        is_detail = False
        if not oneline and n > 0:
            if indent == 5 and lay.detail and line.startswith("Nodes=", 5):
                is_detail = True
            elif indent != 3:
                raise _bad(lines, f"line {n + 1} is indented {indent} spaces (Slurm indents 3)", rid)
        try:
            pairs = _line_fields(line, indent, lay, oneline)
        except ValueError as exc:
            raise _bad(lines, f"line {n + 1}: {exc}", rid) from None
        if not oneline and lay.second and pairs and prev in lay.first_line and pairs[0][0] not in lay.second:
            raise _bad(lines, f"the second line starts with {pairs[0][0]}=, not {' or '.join(lay.second)}=", rid)
        for key, value in pairs:
            if not oneline and n > 0 and key in lay.first_line:
                raise _bad(lines, f"{key}= is printed on the first line only, not on line {n + 1}", rid)
            if lay.detail and key == "Nodes":
                if prev not in _BEFORE_DETAIL | {"JOB_GRES", "GRES"} or (not oneline and not is_detail):
                    raise _bad(lines, "a per-node Nodes= block where Slurm prints none", rid)
                rec.details.append({"Nodes": value})
            elif lay.detail and rec.details and (is_detail or (oneline and prev in _DETAIL_KEYS)):
                if key in rec.details[-1]:
                    raise _bad(lines, f"{key}= twice in one per-node block", rid)
                rec.details[-1][key] = value
            else:
                if key in rec.fields:
                    raise _bad(lines, f"{key}= appears twice (a value holding a forged line?)", rid)
                if lay.detail and key == "JOB_GRES" and prev not in _BEFORE_DETAIL:
                    raise _bad(lines, "JOB_GRES= away from where Slurm prints it", rid)
                rec.fields[key] = value
            prev = key
    if rid is None or rec.fields.get(lay.first_key) is None:
        raise _bad(lines, f"the record does not start with {lay.first_key}=VALUE", rid)
    return rec


def _chunks(text: str, first_key: str) -> tuple[list[list[str]], bool]:
    """The records' lines, and whether this is the one-line (``-o``) form."""
    lines = text.splitlines()
    oneline = not any(line.startswith(" ") and line.strip() for line in lines)
    chunks: list[list[str]] = []
    for line in lines:
        if line.startswith(first_key + "="):
            chunks.append([line])
        elif not line.strip():
            continue
        elif chunks and not oneline:
            chunks[-1].append(line)
        elif chunks:
            chunks.append([line])  # a stray line of the one-line form: its own (bad) record
        else:
            raise ParseError(f"scontrol output (records start with {first_key}=)", line)
    return chunks, oneline


def parse_records(text: str, first_key: str, problems: list[ParseError] | None = None) -> list[Record]:
    """Split ``text`` into records starting with ``first_key=`` and read their fields.

    The multi-line form (what slurmlab runs) is read the way Slurm prints it: records start at
    column 0, their lines are indented 3 spaces (a job's per-node lines 5), and a free-text
    value (JobName, Comment, WorkDir, StdOut, node Reason, …) ends only where Slurm ends it,
    so a name such as ``y UserId=root(0)`` stays the name. A record that does not fit (a key
    twice, a forged line, a per-node block out of place) is refused with ParseError; so are
    two records with the same id. The one-line ``-o`` form is read on a best-effort basis
    (free text ends at the next known key): slurmlab never takes a decision from it.

    With ``problems`` a list, a bad record is skipped and its ParseError appended there;
    without, the first one raises. scontrol's answer for an empty list (``No jobs in the
    system``, …) is no records, not an error.
    """
    if _NOTHING.fullmatch(text.strip()):
        return []
    lay = _LAYOUTS.get(first_key) or _Layout(first_key=first_key, free={})
    chunks, oneline = _chunks(text, first_key)
    read: list[Record | ParseError] = []
    for lines in chunks:
        try:
            read.append(_read_record(lines, lay, oneline))
        except ParseError as exc:
            read.append(exc)
    counts = Counter(r.record_id for r in read if isinstance(r, Record))
    records: list[Record] = []
    for r in read:
        if isinstance(r, Record) and counts[r.record_id] > 1:
            r = _bad(r.text.splitlines(), f"{first_key}={r.record_id} is printed more than once", r.record_id)
        if isinstance(r, ParseError):
            if problems is None:
                raise r
            problems.append(r)
        else:
            records.append(r)
    return records


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
    for d in rec.details:
        items = parse_gres(d.get("GRES"))
        if not items:
            continue  # the node block of a job that holds no GRES there
        mem = d.get("Mem")
        block_nodes = expand(d["Nodes"])
        if not set(block_nodes) <= set(nodes):
            raise ParseError(
                "per-node GRES block",
                d["Nodes"],
                hint=f"it names nodes outside the job's NodeList={nodelist}",
                record_id=rec.record_id,
            )
        for node in block_nodes:
            allocs.append(
                GresAlloc(
                    node=node,
                    items=items,
                    cpu_ids=d.get("CPU_IDs"),
                    mem_mb=parse_mem_mb(mem) if mem else None,
                )
            )
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
        num_nodes=_int_or_none(rec.get("NumNodes"), rec, "NumNodes"),
        num_cpus=_int_or_none(rec.get("NumCPUs"), rec, "NumCPUs"),
        num_tasks=_int_or_none(rec.get("NumTasks"), rec, "NumTasks"),
        comment=rec.get("Comment") or None,
    )


_T = TypeVar("_T")


def _each(records: list[Record], build: Callable[[Record], _T], problems: list[ParseError] | None) -> list[_T]:
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

