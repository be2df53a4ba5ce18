"""``sacct`` records: one job's own line and one line per step, as Slurm accounting keeps them.

API::

    SACCT_FIELDS                      the --format field names, in the order parse_sacct expects
    parse_sacct(text) -> list[SacctRecord]
    SacctRecord                       job_id, step (None for the job's own line), state, exit, times, TRES ...

The output is ``sacct --parsable2 --noheader --format=<",".join(SACCT_FIELDS)>``: fields joined by ``|``, one
record a line. ``JobName`` is the one field a user writes freely and may hold ``|`` or a newline, so it comes
last: everything after the last fixed ``|`` is the name, and a line too short to be a record continues the name
of the record before it. Every value is parsed by the helpers of this package (timefmt, tres, exit_status);
a record that does not parse raises ParseError naming its job id.
"""

from __future__ import annotations

import re
from dataclasses import dataclass, field
from datetime import datetime

from slurmlab.core.jsontypes import JSONObject
from slurmlab.core.slurm.exit_status import ExitStatus
from slurmlab.core.slurm.hostlist import expand
from slurmlab.core.slurm.states import JOB_STATES
from slurmlab.core.slurm.timefmt import (
    format_duration,
    parse_duration,
    parse_optional_duration,
    parse_timestamp,
)
from slurmlab.core.slurm.tres import Tres, parse_mem_mb
from slurmlab.errors import ParseError

__all__ = ["SACCT_FIELDS", "SacctRecord", "parse_sacct"]

SACCT_FIELDS = (
    "JobID",
    "UID",
    "User",
    "Account",
    "Partition",
    "QOS",
    "State",
    "ExitCode",
    "Elapsed",
    "Timelimit",
    "Submit",
    "Start",
    "End",
    "NodeList",
    "AllocCPUS",
    "AllocTRES",
    "ReqMem",
    "MaxRSS",
    "TotalCPU",
    "TRESUsageInAve",
    "JobName",
)
_N = len(SACCT_FIELDS)
# 123, 123_4 (array task), 123_[1-3] (pending array), 123+1 (het component); then .batch/.extern/.0/.interactive
_JOB_ID = re.compile(
    r"([1-9][0-9]{0,9}(?:_(?:[0-9]{1,10}|\[[0-9,\-%]{1,64}\]))?(?:\+[0-9]{1,4})?)"
    r"(?:\.([A-Za-z0-9_+]{1,32}))?"
)
_STATE = re.compile(r"([A-Z_]{1,40})(?: by ([0-9]{1,10}))?\+?")
_FRACTION = re.compile(r"\.[0-9]{1,6}$")


@dataclass(frozen=True)
class SacctRecord:
    """One line of sacct. ``step`` is None on the job's own line, else ``batch``, ``extern``, ``0`` ...

    ``state`` is Slurm's word (``CANCELLED``); ``cancelled_by`` the uid in ``CANCELLED by 1000``. Durations are
    seconds; ``time_limit`` None means none (UNLIMITED, or a step, which has no limit of its own).
    """

    job_id: str
    step: str | None
    name: str
    uid: int | None
    user: str
    account: str
    partition: str
    qos: str
    state: str
    cancelled_by: int | None
    exit: ExitStatus | None
    elapsed: int | None
    time_limit: int | None
    submit: datetime | None
    start: datetime | None
    end: datetime | None
    nodes: tuple[str, ...]
    cpus: int | None
    alloc_tres: dict[str, str] = field(hash=False)
    req_mem_mb: int | None
    max_rss_mb: int | None
    total_cpu: float | None
    usage_ave: dict[str, str] = field(hash=False)

    @property
    def is_job(self) -> bool:
        return self.step is None

    @property
    def tres(self) -> Tres | None:
        """``alloc_tres`` as numbers (cpus, mem, GPUs)."""
        if not self.alloc_tres:
            return None
        return Tres.parse(",".join(f"{k}={v}" for k, v in self.alloc_tres.items()))

    @property
    def requested_mem_mb(self) -> int | None:
        """The memory asked for: ReqMem, else the memory allocated (AllocTRES ``mem``)."""
        if self.req_mem_mb is not None:
            return self.req_mem_mb
        tres = self.tres
        return tres.mem_mb if tres is not None else None

    @property
    def gpus(self) -> int:
        """GPUs held (``gres/gpu=N`` in AllocTRES); 0 when none."""
        value = self.alloc_tres.get("gres/gpu", "0")
        return int(value) if value.isdigit() else 0

    @property
    def gpu_util_percent(self) -> float | None:
        """Average GPU utilisation Slurm accounted (``gres/gpuutil``, 23.02+ on real GPUs); None when not."""
        value = self.usage_ave.get("gres/gpuutil")
        try:
            return float(value) if value is not None else None
        except ValueError:
            return None

    def to_dict(self) -> JSONObject:
        return {
            "job_id": self.job_id,
            "step": self.step,
            "name": self.name,
            "uid": self.uid,
            "user": self.user,
            "account": self.account,
            "partition": self.partition,
            "qos": self.qos,
            "state": self.state,
            "cancelled_by": self.cancelled_by,
            "exit": self.exit.to_dict() if self.exit else None,
            "elapsed": self.elapsed,
            "time_limit": self.time_limit,
            "submit": self.submit.isoformat() if self.submit else None,
            "start": self.start.isoformat() if self.start else None,
            "end": self.end.isoformat() if self.end else None,
            "nodes": list(self.nodes),
            "cpus": self.cpus,
            "alloc_tres": dict(self.alloc_tres),
            "req_mem_mb": self.req_mem_mb,
            "max_rss_mb": self.max_rss_mb,
            "total_cpu": self.total_cpu,
            "elapsed_text": format_duration(self.elapsed, unlimited="-"),
        }


def parse_sacct(text: str) -> list[SacctRecord]:
    """Every record of ``sacct --parsable2 --noheader --format=<SACCT_FIELDS>`` output, in order."""
    records: list[list[str]] = []
    for line in text.rstrip("\r\n").split("\n"):
        if line.endswith("\r"):
            line = line[:-1]
        parts = line.split("|", _N - 1)
        if len(parts) == _N and _JOB_ID.fullmatch(parts[0]):
            records.append(parts)
        elif records:  # a newline inside the job name before it
            records[-1][-1] += "\n" + line
        elif line.strip():
            raise ParseError(
                "sacct output", line, hint=f"expected {_N} fields joined by '|' ({','.join(SACCT_FIELDS)})"
            )
    return [_record(parts) for parts in records]


def _record(parts: list[str]) -> SacctRecord:
    (
        jobid,
        uid,
        user,
        account,
        partition,
        qos,
        state,
        exit_code,
        elapsed,
        limit,
        submit,
        start,
        end,
        nodelist,
        cpus,
        alloc,
        req_mem,
        max_rss,
        total_cpu,
        usage,
        name,
    ) = parts
    m = _JOB_ID.fullmatch(jobid)
    assert m is not None  # parse_sacct took only lines whose first field is a job id
    try:
        word, by = _state(state)
        Tres.parse(alloc)  # reject a malformed AllocTRES here, not later in a property
        return SacctRecord(
            job_id=m.group(1),
            step=m.group(2),
            name=name,
            uid=_optional_int(uid, "uid"),
            user=user,
            account=account,
            partition=partition,
            qos=qos,
            state=word,
            cancelled_by=by,
            exit=ExitStatus.from_text(exit_code) if exit_code.strip() else None,
            elapsed=_duration(elapsed),
            time_limit=_duration(limit),
            submit=parse_timestamp(submit),
            start=parse_timestamp(start),
            end=parse_timestamp(end),
            nodes=tuple(expand(nodelist if nodelist != "None assigned" else "")),
            cpus=_optional_int(cpus, "AllocCPUS"),
            alloc_tres=_pairs(alloc, "AllocTRES"),
            req_mem_mb=_req_mem(req_mem),
            max_rss_mb=_mem(max_rss),
            total_cpu=_cpu_time(total_cpu),
            usage_ave=_pairs(usage, "TRESUsageInAve"),
        )
    except ParseError as e:
        raise e.for_record(jobid) from None


def _state(text: str) -> tuple[str, int | None]:
    m = _STATE.fullmatch(text.strip())
    if m is None:
        raise ParseError(
            "job state", text, hint="expected a state word such as COMPLETED or 'CANCELLED by 1000'"
        )
    word = m.group(1)
    if word not in JOB_STATES and not word.isupper():
        raise ParseError("job state", text)
    return word, int(m.group(2)) if m.group(2) else None


def _optional_int(text: str, what: str) -> int | None:
    raw = text.strip()
    if not raw:
        return None
    if not (raw.isascii() and raw.isdigit() and len(raw) <= 12):
        raise ParseError(what, text, hint="expected a whole number")
    return int(raw)


def _duration(text: str) -> int | None:
    if not text.strip():
        return None
    return parse_optional_duration(text)[1]


def _cpu_time(text: str) -> float | None:
    """TotalCPU: ``[D-][HH:]MM:SS[.mmm]``; the fraction is kept."""
    raw = text.strip()
    if not raw:
        return None
    frac = _FRACTION.search(raw)
    whole = raw[: frac.start()] if frac else raw
    seconds = parse_duration(whole)
    if seconds is None:
        raise ParseError("TotalCPU", text, hint="CPU time is never unlimited")
    return seconds + (float("0" + frac.group()) if frac else 0.0)


def _req_mem(text: str) -> int | None:
    """ReqMem: ``4000M``; before 21.08 a ``c`` (per CPU) or ``n`` (per node) followed it."""
    raw = text.strip()
    # "16?": slurmdbd's first record of a job just started, before slurmctld sent its memory request
    if not raw or raw == "0" or raw.endswith("?"):
        return None
    return parse_mem_mb(raw[:-1] if raw[-1:] in ("c", "n") else raw)


def _mem(text: str) -> int | None:
    """MaxRSS in MiB (``12345K``); empty on the job's own line."""
    raw = text.strip()
    return parse_mem_mb(raw) if raw else None


def _pairs(text: str, what: str) -> dict[str, str]:
    """``cpu=1,mem=1000M,gres/gpu=1`` as a dict of its entries, values as Slurm wrote them."""
    raw = text.strip()
    out: dict[str, str] = {}
    if not raw:
        return out
    for piece in raw.split(","):
        key, eq, value = piece.partition("=")
        if not eq or not key or len(key) > 64:
            raise ParseError(what, raw, hint=f"the entry {piece!r} is not KEY=VALUE")
        out[key] = value
    return out
