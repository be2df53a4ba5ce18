"""The cheap state poll: ``squeue -h -o BRIEF_FORMAT`` and its parser.

API::

    BRIEF_FORMAT: str                          # pass as: ["squeue", "-h", "-t", "all", "-j", ids, "-o", BRIEF_FORMAT]
    BRIEF_FIELDS: tuple[str, ...]              # the field names, in order
    parse_squeue_brief(text, tz=None) -> list[JobBrief]

Each field letter exists in both 22.05 and 24.11 (``man squeue``, ``-o``): %i job id as printed
(``10_1``, ``10_[2-5%3]``), %A the real job id, %F array job id, %K array task id(s), %T state,
%r reason, %S start (expected start when pending), %e end, %l time limit, %L time left,
%M time used, %D node count, %N node list, %P partition, %u user, %b GRES/TRES per node.
The separator is ``|``, which none of these fields can hold.

The job name (%j) is left out on purpose: it is free text its submitter chose, a newline
and ``|`` included, so it could end a line early or forge a whole line for another job's
id. Without it every line is one job, written by Slurm alone. ``JobBrief.name`` stays ""
(the name comes with the job's detail).
"""

from __future__ import annotations

from dataclasses import dataclass
from datetime import datetime, tzinfo

from slurmlab.core.jsontypes import JSONObject
from slurmlab.core.slurm.gres import GresItem, parse_gres
from slurmlab.core.slurm.hostlist import expand
from slurmlab.core.slurm.timefmt import parse_optional_duration, parse_timestamp
from slurmlab.errors import ParseError

__all__ = ["BRIEF_FIELDS", "BRIEF_FORMAT", "JobBrief", "parse_squeue_brief"]

_LETTERS = (
    ("display_id", "%i"),
    ("job_id", "%A"),
    ("array_job_id", "%F"),
    ("array_task", "%K"),
    ("state", "%T"),
    ("reason", "%r"),
    ("start_time", "%S"),
    ("end_time", "%e"),
    ("time_limit", "%l"),
    ("time_left", "%L"),
    ("time_used", "%M"),
    ("num_nodes", "%D"),
    ("nodelist", "%N"),
    ("partition", "%P"),
    ("user", "%u"),
    ("tres_per_node", "%b"),
)
BRIEF_FIELDS: tuple[str, ...] = tuple(name for name, _ in _LETTERS)
BRIEF_FORMAT: str = "|".join(letter for _, letter in _LETTERS)
_NULL = {"", "N/A", "(null)", "None", "n/a"}


@dataclass(frozen=True)
class JobBrief:
    """One line of the brief poll. Durations in seconds (None = unlimited or not known).
    ``array_job_id``/``array_task`` are None for a job that is not part of an array."""

    display_id: str
    job_id: int
    array_job_id: int | None
    array_task: str | None
    state: str
    reason: str | None
    start_time: datetime | None
    end_time: datetime | None
    time_limit: int | None
    time_left: int | None
    time_used: int | None
    num_nodes: int | None
    nodelist: str
    nodes: tuple[str, ...]
    partition: str | None
    user: str | None
    tres_per_node: tuple[GresItem, ...]
    name: str = ""  # not in BRIEF_FORMAT (free text); filled by backends that have it

    @property
    def held(self) -> bool:
        return self.state == "PENDING" and (self.reason or "").startswith("JobHeld")

    def to_dict(self) -> JSONObject:
        return {
            "display_id": self.display_id,
            "job_id": self.job_id,
            "array_job_id": self.array_job_id,
            "array_task": self.array_task,
            "state": self.state,
            "reason": self.reason,
            "start_time": self.start_time.isoformat() if self.start_time else None,
            "end_time": self.end_time.isoformat() if self.end_time else None,
            "time_limit": self.time_limit,
            "time_left": self.time_left,
            "time_used": self.time_used,
            "num_nodes": self.num_nodes,
            "nodelist": self.nodelist,
            "nodes": list(self.nodes),
            "partition": self.partition,
            "user": self.user,
            "tres_per_node": [g.to_dict() for g in self.tres_per_node],
            "name": self.name,
        }


def _opt(value: str) -> str | None:
    return None if value.strip() in _NULL else value.strip()


def _int(value: str, line: str, what: str) -> int | None:
    v = _opt(value)
    if v is None:
        return None
    if not (v.isascii() and v.isdigit() and len(v) <= 19):
        raise ParseError(f"squeue {what}", line, hint=f"{v!r} is not a number")
    return int(v)


def _dur(value: str) -> int | None:
    return parse_optional_duration(value)[1]


def parse_squeue_brief(
    text: str, tz: tzinfo | None = None, *, problems: list[ParseError] | None = None
) -> list[JobBrief]:
    """Lines of ``squeue -h -o BRIEF_FORMAT``. A line with too few fields raises ParseError
    quoting it (for example output of a different format string).

    With ``problems`` a list, a line that does not parse is left out and its ParseError
    (``record_id`` = the line's first field) appended; without, it raises."""
    out: list[JobBrief] = []
    for line in text.splitlines():
        if not line.strip():
            continue
        try:
            out.append(_brief_line(line, tz))
        except ParseError as exc:
            rid = line.split("|", 1)[0].strip()[:40] or None
            err = exc.for_record(rid)
            if problems is None:
                raise err from None
            problems.append(err)
    return out


def _brief_line(line: str, tz: tzinfo | None) -> JobBrief:
    n = len(BRIEF_FIELDS)
    cells = line.split("|")
    if len(cells) != n:
        raise ParseError(
            "squeue brief line",
            line,
            hint=f"expected {n} '|'-separated fields from squeue -h -o '{BRIEF_FORMAT}'",
        )
    c = dict(zip(BRIEF_FIELDS, cells, strict=True))
    job_id = _int(c["job_id"], line, "job id")
    if job_id is None:
        raise ParseError("squeue brief line", line, hint="no job id")
    state = c["state"].strip().upper()
    if not state:
        raise ParseError("squeue brief line", line, hint="no state")
    reason = _opt(c["reason"])
    try:
        nodes = tuple(expand(c["nodelist"]))
        record = JobBrief(
            display_id=c["display_id"].strip(),
            job_id=job_id,
            # %F prints the job id itself for a job that is not an array; keep None there
            array_job_id=_int(c["array_job_id"], line, "array job id") if _opt(c["array_task"]) else None,
            array_task=_opt(c["array_task"]),
            state=state,
            reason=None if reason == "None" else reason,
            start_time=parse_timestamp(c["start_time"], tz),
            end_time=parse_timestamp(c["end_time"], tz),
            time_limit=_dur(c["time_limit"]),
            time_left=_dur(c["time_left"]),
            time_used=_dur(c["time_used"]),
            num_nodes=_int(c["num_nodes"], line, "node count"),
            nodelist=c["nodelist"].strip(),
            nodes=nodes,
            partition=_opt(c["partition"]),
            user=_opt(c["user"]),
            tres_per_node=parse_gres(c["tres_per_node"]),
        )
    except ParseError as exc:
        raise ParseError("squeue brief line", line, hint=str(exc)) from None
    return record
