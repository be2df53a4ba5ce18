"""How a job ended, in plain words, and what to change next time: the judgement behind ``alloc.outcome()`` and the
panel's "ended" section (pure: sacct records in, an :class:`Ended` report out).

The end is Slurm's word (COMPLETED, TIMEOUT, OUT_OF_MEMORY, NODE_FAIL, PREEMPTED, FAILED, CANCELLED ...), with
who cancelled ("you" when it was you), the exit code of every step, and advice: a longer ``-t`` after a
TIMEOUT, a larger ``--mem`` after a memory overrun, ``--requeue`` after a preemption or node failure, each as the
request's own ``%salloc`` line changed. Where memory is enforced by Slurm's gatherer rather than by cgroups
(``JobAcctGatherParams=OverMemoryKill``, as in the sandbox) an overrun ends the step with SIGKILL and no
OUT_OF_MEMORY state: a step killed by signal 9 whose MaxRSS passed the memory requested is judged
OUT_OF_MEMORY too, and the report says it was inferred.
"""

from __future__ import annotations

import html
import json
import math
import shlex
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field

from slurmlab.core.diagnosis.efficiency import efficiency
from slurmlab.core.slurm.exit_status import signal_text
from slurmlab.core.slurm.models import Job
from slurmlab.core.slurm.sacct import SacctRecord
from slurmlab.core.slurm.states import ENDED
from slurmlab.core.slurm.timefmt import duration_in_words, format_duration

__all__ = ["Ended", "StepEnd", "explain_end", "records_from_job", "with_option"]

_KILL = 9
_TIME_OPTIONS = ("-t", "--time")
_MEM_OPTIONS = ("--mem", "--mem-per-cpu", "--mem-per-gpu")
_WORDS = {
    "COMPLETED": "completed",
    "TIMEOUT": "reached its time limit and was stopped",
    "OUT_OF_MEMORY": "ran out of memory",
    "NODE_FAIL": "lost a node it ran on (the node failed)",
    "PREEMPTED": "was preempted: Slurm took its resources for a job of higher priority",
    "FAILED": "failed",
    "CANCELLED": "was cancelled",
    "BOOT_FAIL": "could not start: a node failed to boot",
    "DEADLINE": "passed its --deadline before it could finish",
}


@dataclass(frozen=True)
class StepEnd:
    """One step's end: ``exit`` as ``code`` and ``signal``; ``max_rss_mb`` its peak memory when measured."""

    step: str
    name: str
    state: str
    code: int | None
    signal: int
    max_rss_mb: int | None

    def line(self) -> str:
        how = (
            signal_text(self.signal)
            if self.signal
            else ("exit code ?" if self.code is None else f"exit code {self.code}")
        )
        rss = f", peak memory {self.max_rss_mb} MiB" if self.max_rss_mb is not None else ""
        return f"step {self.step} ({self.name}): {self.state}, {how}{rss}"


@dataclass(frozen=True)
class Ended:
    """How job ``job_id`` ended. ``state`` is the judged end (OUT_OF_MEMORY also when inferred from a killed
    step); ``slurm_state`` Slurm's own word; ``source`` ``sacct`` or ``scontrol`` (then ``note`` says what sacct
    would add)."""

    job_id: str
    state: str
    slurm_state: str
    headline: str
    steps: tuple[StepEnd, ...] = ()
    advice: tuple[str, ...] = ()
    efficiency: str = ""
    source: str = "sacct"
    note: str = ""
    cancelled_by: str | None = None
    details: tuple[str, ...] = field(default=())

    @property
    def over(self) -> bool:
        return self.slurm_state in ENDED

    def line(self) -> str:
        """The one line the owning cell prints: the end and the first piece of advice."""
        first = f" -> {self.advice[0]}" if self.advice else ""
        return f"Job {self.job_id} {self.headline}{first}"

    def text(self) -> str:
        out = [f"Job {self.job_id} {self.headline}", *self.details]
        out += [f"  {s.line()}" for s in self.steps]
        out += [f"  -> {a}" for a in self.advice]
        out += [x for x in (self.efficiency, self.note) if x]
        return "\n".join(out)

    def __str__(self) -> str:
        return self.text()

    def to_dict(self) -> dict[str, object]:
        return {
            "job_id": self.job_id,
            "state": self.state,
            "slurm_state": self.slurm_state,
            "headline": self.headline,
            "cancelled_by": self.cancelled_by,
            "details": list(self.details),
            "steps": [s.__dict__.copy() for s in self.steps],
            "advice": list(self.advice),
            "efficiency": self.efficiency,
            "source": self.source,
            "note": self.note,
        }

    def to_json(self) -> str:
        return json.dumps(self.to_dict(), indent=2)

    def _repr_html_(self) -> str:
        esc = html.escape
        rows = "".join(f"<li>{esc(s.line())}</li>" for s in self.steps)
        advice = "".join(
            f"<div class='slurmlab-ended-advice'>&rarr; <code>{esc(a)}</code></div>" for a in self.advice
        )
        extra = "".join(f"<div>{esc(x)}</div>" for x in (*self.details, self.efficiency, self.note) if x)
        return (
            f"<div class='slurmlab-ended' data-state='{esc(self.state)}'><b>Job {esc(self.job_id)} "
            f"{esc(self.headline)}</b>{extra}{f'<ul>{rows}</ul>' if rows else ''}{advice}</div>"
        )


def with_option(argv: Sequence[str], names: Sequence[str], value: str) -> list[str]:
    """``argv`` with every ``NAME VALUE`` / ``NAME=VALUE`` of ``names`` removed and ``names[0]=value`` (or
    ``-t value`` for a short option) appended: the same request with one part changed."""
    out: list[str] = []
    skip = False
    for arg in argv:
        if skip:
            skip = False
            continue
        if arg in names:
            skip = True
            continue
        if any(arg.startswith(n + "=") for n in names if n.startswith("--")):
            continue
        if any(arg.startswith(n) and len(arg) > len(n) for n in names if not n.startswith("--")):
            continue  # -t30
        out.append(arg)
    first = names[0]
    return [*out, *((first, value) if not first.startswith("--") else (f"{first}={value}",))]


def _salloc(argv: Sequence[str]) -> str:
    return "%salloc " + " ".join(shlex.quote(a) for a in argv)


def _mem_text(mb: float) -> str:
    return f"{math.ceil(mb / 1024)}G" if mb >= 1024 else f"{max(100, math.ceil(mb / 100) * 100)}M"


def _memory_advice(argv: Sequence[str], peak_mb: int | None, job: SacctRecord) -> str:
    want = (peak_mb or job.requested_mem_mb or 1000) * 1.5
    per_gpu = any(a == "--mem-per-gpu" or a.startswith("--mem-per-gpu=") for a in argv)
    per_cpu = any(a == "--mem-per-cpu" or a.startswith("--mem-per-cpu=") for a in argv)
    if per_gpu and job.gpus:
        changed = with_option(argv, ("--mem-per-gpu", "--mem", "--mem-per-cpu"), _mem_text(want / job.gpus))
    elif per_cpu and job.cpus:
        changed = with_option(argv, ("--mem-per-cpu", "--mem", "--mem-per-gpu"), _mem_text(want / job.cpus))
    else:
        changed = with_option(argv, _MEM_OPTIONS, _mem_text(want))
    return f"more memory: {_salloc(changed)}"


def _time_advice(argv: Sequence[str], job: SacctRecord) -> str:
    limit = job.time_limit or job.elapsed or 60
    minutes = max(2, math.ceil(limit * 2 / 60))
    return (
        f"more time ({duration_in_words(minutes * 60)} instead of {duration_in_words(limit)}; "
        f"or save work on a --signal): {_salloc(with_option(argv, _TIME_OPTIONS, str(minutes)))}"
    )


def _overrun(steps: Sequence[SacctRecord], job: SacctRecord) -> SacctRecord | None:
    """The step Slurm's memory gatherer killed: signal 9 (or OUT_OF_MEMORY) with MaxRSS over the request."""
    limit = job.requested_mem_mb
    for s in steps:
        if s.state == "OUT_OF_MEMORY":
            return s
        killed = s.exit is not None and s.exit.signal == _KILL
        if killed and limit and s.max_rss_mb is not None and s.max_rss_mb > limit:
            return s
    return None


def _who(uid: int | None, me: int, names: Mapping[int, str]) -> str | None:
    if uid is None:
        return None
    return "you" if uid == me else names.get(uid, f"uid {uid}")


def _headline(state: str, job: SacctRecord, by: str | None, oom: SacctRecord | None) -> str:
    words = _WORDS.get(state, f"ended ({state})")
    ran = f" after {format_duration(job.elapsed, unlimited='?')}" if job.elapsed is not None else ""
    if state == "TIMEOUT" and job.time_limit:
        return f"{words} (TIMEOUT{ran}, limit {format_duration(job.time_limit)})"
    if state == "OUT_OF_MEMORY" and oom is not None:
        used = (
            f": step {oom.step} ({oom.name}) used {oom.max_rss_mb} MiB" if oom.max_rss_mb is not None else ""
        )
        asked = f" of {job.requested_mem_mb} MiB requested" if used and job.requested_mem_mb else ""
        return f"{words} (OUT_OF_MEMORY{ran}){used}{asked}"
    if state == "CANCELLED":
        return f"{words} by {by} (CANCELLED{ran})" if by else f"{words} (CANCELLED{ran})"
    if state == "FAILED" and job.exit is not None:
        how = signal_text(job.exit.signal) if job.exit.signal else f"exit code {job.exit.code}"
        return f"{words} (FAILED{ran}, {how})"
    if state == "COMPLETED":
        return f"{words} (COMPLETED{ran}, exit code 0)"
    if state not in ENDED:
        return f"has not ended yet ({state})"
    return f"{words} ({state}{ran})"


def _advice(state: str, argv: Sequence[str], job: SacctRecord, oom: SacctRecord | None) -> list[str]:
    if state == "TIMEOUT":
        return [_time_advice(argv, job)]
    if state == "OUT_OF_MEMORY":
        return [_memory_advice(argv, oom.max_rss_mb if oom else None, job)]
    if state in ("PREEMPTED", "NODE_FAIL"):
        return [
            "let Slurm start it again: a batch job with `sbatch --requeue` (salloc cannot be requeued), "
            "saving checkpoints so the restart goes on where it stopped"
        ]
    if state == "FAILED":
        return [
            "read the failing step's output; exit code 137 or signal 9 means it was killed (often memory), "
            "127 a command not found"
        ]
    return []


def explain_end(
    records: Sequence[SacctRecord],
    *,
    me: int,
    names: Mapping[int, str] | None = None,
    argv: Sequence[str] = (),
    source: str = "sacct",
    note: str = "",
) -> Ended:
    """The end of the job whose records (its own line and its steps) are given. ``me``: your uid; ``names``:
    uid -> user name for a cancel by someone else; ``argv``: the request's salloc options, changed in the advice.
    ValueError when no record is given."""
    if not records:
        raise ValueError("explain_end() needs the records of a job")
    jid = records[0].job_id
    rows = [r for r in records if r.job_id == jid]
    job = next((r for r in rows if r.is_job), rows[0])
    steps = [r for r in rows if not r.is_job and r.step != "extern"]
    oom = _overrun(steps, job)
    state = "OUT_OF_MEMORY" if oom is not None or job.state == "OUT_OF_MEMORY" else job.state
    by = _who(job.cancelled_by, me, names or {}) if state == "CANCELLED" else None
    details = []
    if oom is not None and oom.state != "OUT_OF_MEMORY" and job.state != "OUT_OF_MEMORY":
        details.append(
            f"  Slurm says {job.state}; step {oom.step} was killed (signal 9) by Slurm's memory "
            "watchdog for going over the memory requested"
        )
    if by == "you":
        details.append("  (slurmlab cancels an allocation on .cancel(), %scancel, or when its kernel ends)")
    eff = efficiency(rows).line() if source == "sacct" and job.state in ENDED else ""
    return Ended(
        job_id=jid,
        state=state,
        slurm_state=job.state,
        headline=_headline(state, job, by, oom),
        steps=tuple(
            StepEnd(
                s.step or "",
                s.name,
                s.state,
                s.exit.code if s.exit else None,
                s.exit.signal if s.exit else 0,
                s.max_rss_mb,
            )
            for s in steps
        ),
        advice=tuple(_advice(state, list(argv), job, oom)),
        efficiency=eff,
        source=source,
        note=note,
        cancelled_by=by,
        details=tuple(details),
    )


def records_from_job(job: Job) -> list[SacctRecord]:
    """The controller's record of an ended job (``scontrol show job``) as a job-level sacct record, when sacct
    cannot answer: no steps, no peak memory, no canceller."""
    elapsed = (
        int((job.end_time - job.start_time).total_seconds())
        if job.end_time is not None and job.start_time is not None
        else None
    )
    tres = job.tres_alloc
    alloc = {k: v for k, v in (p.partition("=")[::2] for p in tres.text.split(","))} if tres else {}
    base = SacctRecord(
        job_id=str(job.job_id),
        step=None,
        name=job.name,
        uid=None,
        user=job.user or "",
        account="",
        partition=job.partition or "",
        qos="",
        state=job.state,
        cancelled_by=None,
        exit=job.exit,
        elapsed=elapsed,
        time_limit=job.time_limit,
        submit=job.submit_time,
        start=job.start_time,
        end=job.end_time,
        nodes=job.nodes,
        cpus=job.num_cpus,
        alloc_tres=alloc,
        req_mem_mb=job.tres_req.mem_mb if job.tres_req else None,
        max_rss_mb=None,
        total_cpu=None,
        usage_ave={},
    )
    return [base]
