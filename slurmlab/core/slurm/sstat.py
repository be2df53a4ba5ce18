"""``sstat`` output: CPU time and memory of a running job's steps, as Slurm's accounting gatherer sees them.

API::

    SSTAT_FIELDS                        # the ``--format`` field names, in order (for
                                        # ``sstat --parsable2 --noheader --allsteps -j J --format=...``)
    parse_sstat(text) -> list[SstatRecord]
    sstat_problem(stderr) -> str | None # sstat's "no data" messages in plain words (it exits 0 on them)
    job_not_running(stderr) -> bool     # sstat says the job is not running (ended, or unknown)

sstat prints CPU times as ``[D-]HH:MM:SS`` or ``MM:SS.mmm`` and sizes with K/M/G suffixes; the ``cpu=`` entry of
``TRESUsageInTot`` is the CPU time of all the step's tasks together (``AveCPU`` is the mean of one task). Seen on
22.05, 24.11 and 26.05: ``1.0|2|node1|00:00:03|00:00:03|cpu=00:00:07,energy=0,...,mem=26920K,...|13460K|13460K``.

In the first tens of milliseconds of a step the gatherer has no reading yet, and sstat prints Slurm's "no value"
(NO_VAL64 milliseconds) as a CPU time with the other fields empty — recorded on 24.11:
``1.0|1|node1|213503982334-14:25:51||energy=0||``. Such a step is listed with its CPU time unknown (None), never
as 213 billion days of CPU.
"""

from __future__ import annotations

import re
from dataclasses import dataclass

from slurmlab.core.jsontypes import JSONObject
from slurmlab.core.slurm.hostlist import expand
from slurmlab.core.slurm.timefmt import parse_duration
from slurmlab.core.slurm.tres import parse_mem_mb
from slurmlab.errors import ParseError

__all__ = ["SSTAT_FIELDS", "SstatRecord", "job_not_running", "parse_sstat", "sstat_problem"]

SSTAT_FIELDS = ("JobID", "NTasks", "Nodelist", "AveCPU", "MinCPU", "TRESUsageInTot", "AveRSS", "MaxRSS")

# "1234.0", "1234.batch", "1234.extern", "1234_7.0" (array), "1234+1.0" (heterogeneous)
_STEP_ID = re.compile(r"([0-9]{1,12}(?:[_+][0-9]{1,12})?)\.([0-9]{1,9}|batch|extern|interactive)")
_FRACTION = re.compile(r"\.[0-9]{1,6}$")
_MAX_LINE = 20_000  # a line longer than this is corrupt output, not a step
# More CPU time than 30 million CPU-years is no measurement: Slurm's NO_VAL64/INFINITE64 milliseconds print as
# 213503982334 days (1.8e16 s), the largest real jobs reach ~1e11 s.
_UNSET_CPU_S = 1e15


@dataclass(frozen=True)
class SstatRecord:
    """One running step: its tasks' CPU time (seconds) and memory (MiB) so far."""

    job_id: str
    step: str  # "0", "batch", "extern", "interactive"
    tasks: int
    nodes: tuple[str, ...]
    total_cpu_s: float | None  # all tasks together; None: the gatherer has no reading yet
    ave_cpu_s: float | None  # one task, on average
    ave_rss_mb: float | None
    max_rss_mb: float | None

    @property
    def step_id(self) -> str:
        return f"{self.job_id}.{self.step}"

    def to_dict(self) -> JSONObject:
        return {
            "job_id": self.job_id,
            "step": self.step,
            "tasks": self.tasks,
            "nodes": list(self.nodes),
            "total_cpu_s": self.total_cpu_s,
            "ave_cpu_s": self.ave_cpu_s,
            "ave_rss_mb": self.ave_rss_mb,
            "max_rss_mb": self.max_rss_mb,
        }


def cpu_seconds(text: str) -> float:
    """sstat's CPU time: ``00:00:07``, ``01:02.345`` (MM:SS.mmm), ``1-02:03:04``."""
    raw = text.strip()
    fraction = _FRACTION.search(raw)
    whole = raw[: fraction.start()] if fraction else raw
    try:
        seconds = parse_duration(whole) if whole else None
    except ParseError:
        seconds = None
    if seconds is None:
        raise ParseError("CPU time", text, hint="expected [D-]HH:MM:SS or MM:SS.mmm")
    return seconds + (float(fraction.group()) if fraction else 0.0)


def _mem(text: str) -> float | None:
    raw = text.strip()
    if raw in {"", "0", "N/A", "(null)"}:
        return 0.0 if raw == "0" else None
    return float(parse_mem_mb(raw))


def _reading(text: str) -> float | None:
    """A CPU time as a measurement: None where sstat printed Slurm's "no value" (a step just started)."""
    if not text.strip():
        return None
    seconds = cpu_seconds(text)
    return None if seconds >= _UNSET_CPU_S else seconds


def _tres_cpu(text: str) -> float | None:
    for piece in text.split(","):
        key, eq, value = piece.partition("=")
        if eq and key.strip() == "cpu":
            return _reading(value)
    return None


def _record(line: str) -> SstatRecord:
    fields = line.split("|")
    if len(fields) != len(SSTAT_FIELDS):
        raise ParseError(
            "sstat line",
            line,
            hint=f"expected {len(SSTAT_FIELDS)} '|'-separated fields "
            f"({','.join(SSTAT_FIELDS)}), got {len(fields)}",
        )
    jobid, ntasks, nodelist, ave, _min, tres, ave_rss, max_rss = (f.strip() for f in fields)
    m = _STEP_ID.fullmatch(jobid)
    if m is None:
        raise ParseError("sstat step id", jobid, hint="expected JOB.STEP (1234.0, 1234.batch)")
    if not (ntasks.isascii() and ntasks.isdigit() and len(ntasks) <= 9):
        raise ParseError("sstat task count", ntasks, record_id=jobid)
    try:
        ave_s = _reading(ave)
        total = _tres_cpu(tres)
        # TRESUsageInTot came with 18.08; without it the mean of one task times the tasks is the total
        total_s = total if total is not None else (ave_s * int(ntasks) if ave_s is not None else None)
        nodes = tuple(expand(nodelist)) if nodelist else ()
        return SstatRecord(
            m.group(1), m.group(2), int(ntasks), nodes, total_s, ave_s, _mem(ave_rss), _mem(max_rss)
        )
    except ParseError as exc:
        raise exc.for_record(jobid) from None


def parse_sstat(text: str) -> list[SstatRecord]:
    """Every step line of ``sstat --parsable2 --noheader --format=<SSTAT_FIELDS>``; ParseError on a line that
    is not one (the error names the line and what was expected)."""
    records = []
    for line in text.splitlines():
        if not line.strip():
            continue
        if len(line) > _MAX_LINE:
            raise ParseError("sstat line", line, hint="a line this long is corrupt output")
        records.append(_record(line))
    return records


_PROBLEMS = (
    ("couldn't get steps", "the job has no running step (or is not running)"),
    ("no steps running", "the job has no running step"),
    ("jobacct_gather/none", "Slurm gathers no accounting (JobAcctGatherType=jobacct_gather/none)"),
    ("Invalid job id", "Slurm does not know that job"),
)


def sstat_problem(stderr: str) -> str | None:
    """What sstat's error text means, in plain words (sstat exits 0 when a job has no step to report)."""
    text = stderr.strip()
    if not text:
        return None
    for fragment, words in _PROBLEMS:
        if fragment.lower() in text.lower():
            return f"{words} (sstat: {text.splitlines()[-1].strip()[:200]})"
    return f"sstat: {text.splitlines()[-1].strip()[:200]}"


def job_not_running(stderr: str) -> bool:
    """sstat's words for a job that runs no more (or never did): "couldn't get steps for job N" (22.05-26.05),
    "Invalid job id". A running job without a step says "No steps running" instead."""
    text = stderr.lower()
    return "couldn't get steps" in text or "invalid job id" in text
