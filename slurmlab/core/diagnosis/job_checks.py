"""The doctor's job checks as judgement: a job stuck pending (why, who holds what it needs, what would start it
sooner), held, or stuck running (its nodes, its steps, its time left).

Checks (ids): ``job.held``; ``job.pending`` the reason in plain words and Slurm's expected start;
``job.blockers`` the running jobs on the nodes it may use that hold GPUs of its type; ``job.alternatives``
changes ``sbatch --test-only`` says would start sooner and no limit would hold; ``job.running``; ``job.ended``.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from datetime import datetime

from slurmlab.core.diagnosis.alternatives import NO_ALTERNATIVES, Alternative
from slurmlab.core.diagnosis.cluster_checks import unhealthy
from slurmlab.core.diagnosis.findings import Finding, Verdict
from slurmlab.core.slurm.models import Job, Node, Partition, Step
from slurmlab.core.slurm.ranges import render_index_list
from slurmlab.core.slurm.reasons import explain_reason, plain_reason
from slurmlab.core.slurm.states import HOLDING
from slurmlab.core.slurm.timefmt import duration_in_words, parse_timestamp
from slurmlab.errors import ParseError

__all__ = [
    "PlannedStart",
    "blockers",
    "judge_alternatives",
    "judge_blockers",
    "judge_ended",
    "judge_held",
    "judge_pending",
    "judge_running",
    "judge_unlooked",
    "looked_at",
    "parse_planned_start",
    "usable_nodes",
    "NOT_SOONER",
    "waits_for",
    "when",
]

NOT_SOONER = "(not sooner) "  # how a change that starts no sooner is listed: never with a line to type


def when(moment: datetime | None, now: datetime) -> str:
    """``2026-12-01 08:11:18 (in 19 minutes)``; "unknown" for no time."""
    if moment is None:
        return "unknown"
    seconds = int((moment - now).total_seconds())
    rel = (
        f"in {duration_in_words(seconds) or 'under a second'}"
        if seconds > 0
        else f"{duration_in_words(-seconds) or 'just now'} ago"
        if seconds < 0
        else "now"
    )
    return f"{moment.strftime('%Y-%m-%d %H:%M:%S')} ({rel})"


def judge_held(job: Job) -> Finding:
    """A held job starts only once released: by its owner (user hold) or by an admin (admin hold)."""
    jid = job.display_id
    reason = job.reason or ""
    known = explain_reason(reason)
    explained = f"{known.words} ({known.code})" if known is not None else ""
    if reason.startswith("JobHeldAdmin"):
        fix = f"an admin holds it: ask the admins to release it (`scontrol release {jid}` needs an operator)"
    else:
        fix = (
            f"`scontrol release {jid}` (its owner or an admin), or `%scancel {jid}` if it is no longer wanted"
        )
    return Finding(
        "job.held",
        "job held",
        Verdict.FAIL,
        f"pending and held: {explained or reason} — it will not start until it is released",
        fix,
        f"job {jid}",
    )


@dataclass(frozen=True)
class PlannedStart:
    """What ``squeue --start`` says of a pending job: the scheduler's planned start and nodes (either unknown)."""

    start: datetime | None
    nodes: str | None


def parse_planned_start(text: str) -> PlannedStart:
    """``squeue --start -h -j J -o %S|%Y`` output: one ``START|SCHEDNODES`` line (N/A and (null) are unknown);
    no line at all (the job started or ended meanwhile) is unknown too. Garbage: ParseError."""
    lines = [ln for ln in text.splitlines() if ln.strip()]
    if not lines:
        return PlannedStart(None, None)
    cells = lines[0].split("|")
    if len(lines) > 1 or len(cells) != 2:
        raise ParseError("squeue --start", text[:200], hint="expected one START|SCHEDNODES line")
    nodes = cells[1].strip()
    return PlannedStart(parse_timestamp(cells[0]), None if nodes in ("", "(null)", "N/A") else nodes)


def waits_for(job: Job, now: datetime) -> str:
    """What a pending job waits for that no change of its resources cures ("" when resources may): its begin
    time (``--begin``: Slurm's EligibleTime still ahead, whatever reason Slurm shows meanwhile: it says "None"
    for a moment after a release), a dependency, or a hold. Changes of GPUs, time or partition are then never
    offered: they would drop the very thing it waits for."""
    begin = job.eligible_time
    if begin is not None and begin > now:
        return "begin"
    reason = job.reason or ""
    if job.held or reason.startswith("JobHeld"):
        return "hold"
    if reason.startswith("Dependency"):
        return "dependency"
    return "begin" if reason.startswith(NO_ALTERNATIVES) else ""


def looked_at(job: Job) -> bool:
    """Slurm's scheduler has looked at the pending job: it gave a reason or an expected start."""
    return job.reason not in (None, "", "None") or job.expected_start is not None


def judge_unlooked(job: Job) -> Finding:
    """No change is tried before the scheduler has looked at the job: each ``sbatch --test-only`` question
    uses up a job number, and the answers are asked again once it has (the reason changes)."""
    return Finding(
        "job.alternatives",
        "what would start it sooner",
        Verdict.SKIP,
        "not asked yet: Slurm's scheduler had not looked at the job (it gave no reason and no estimate)",
        "ask again in a few seconds: each `sbatch --test-only` question uses up a job number, so none is "
        "asked before Slurm has something to compare with",
        f"job {job.display_id}",
    )


def _expected_line(job: Job, now: datetime, planned: PlannedStart | None) -> str:
    start = planned.start if planned is not None and planned.start is not None else job.expected_start
    on = f" on {planned.nodes}" if planned is not None and planned.nodes else ""
    source = " (squeue --start)" if planned is not None and planned.start is not None else ""
    if start is None:
        return "Slurm has no expected start for it yet (`squeue --start` shows the same)"
    return f"Slurm expects it to start {when(start, now)}{on}{source}"


def judge_pending(job: Job, now: datetime, planned: PlannedStart | None = None) -> Finding:
    """Why a pending job waits, the real cause first (its ``--begin`` time when that is still ahead, even while
    Slurm's reason says something else), in plain words, and — in one detail line, the only place it is said —
    when Slurm expects it to start (``squeue --start``'s planned start and nodes when given, else the job
    record's StartTime) or that it has no estimate yet."""
    jid = job.display_id
    explained = explain_reason(job.reason)
    words = plain_reason(job.reason) or "no reason given yet (the scheduler has not looked at it)"
    details = (_expected_line(job, now, planned),)
    begin = job.eligible_time
    if begin is not None and begin > now:
        said = f"Slurm's reason: {words}" if job.reason not in (None, "", "None", "BeginTime") else ""
        return Finding(
            "job.pending",
            "job pending",
            Verdict.WARN,
            f"it may not start before its begin time {when(begin, now)} (it was submitted with --begin)"
            + (f"; {said}" if said else ""),
            "wait for it; to start sooner, submit it again without --begin (no other change starts it "
            "before that time)",
            f"job {jid}",
            details,
        )
    if explained is not None and explained.never:
        return Finding(
            "job.pending",
            "job pending",
            Verdict.FAIL,
            f"it will not start as asked: {words}",
            explained.hint or "cancel it and ask differently",
            f"job {jid}",
            details,
        )
    return Finding(
        "job.pending",
        "job pending",
        Verdict.WARN,
        words,
        "see below what holds it and what change would start it sooner",
        f"job {jid}",
        details,
    )


def usable_nodes(job: Job, nodes: Sequence[Node], partitions: Sequence[Partition]) -> list[Node]:
    """The nodes the job's partition(s) hold (every node when its partition is unknown)."""
    mine = {p for p in (job.partition or "").split(",") if p}
    names = {n for p in partitions if p.name in mine for n in p.nodes}
    return [n for n in nodes if n.name in names or mine & set(n.partitions)] or list(nodes)


def _wanted_type(job: Job) -> str | None:
    for g in (*job.tres_per_job, *job.tres_per_node, *job.tres_per_task):
        if g.name in ("gpu", "shard", "mps"):
            return g.type
    return None


def _holds(other: Job, names: set[str], gpu_type: str | None) -> list[str]:
    out = []
    for a in other.gpu_allocs:
        if a.node not in names:
            continue
        for g in a.items:
            if g.name not in ("gpu", "shard", "mps") or (gpu_type and g.type and g.type != gpu_type):
                continue
            idx = f" [{render_index_list(g.indices)}]" if g.indices else ""
            out.append(f"{g.amount} {g.name}{':' + g.type if g.type else ''} on {a.node}{idx}")
    return out


def blockers(job: Job, jobs: Sequence[Job], usable: Sequence[Node]) -> list[tuple[Job, list[str]]]:
    """The jobs holding nodes now that hold GPUs (or shards of them) of the job's type on nodes it may use,
    soonest to end first, each with what it holds."""
    names = {n.name for n in usable}
    wanted = _wanted_type(job)
    found = [
        (o, held)
        for o in jobs
        if o.job_id != job.job_id and o.state in HOLDING and (held := _holds(o, names, wanted))
    ]
    found.sort(key=lambda pair: pair[0].end_time.timestamp() if pair[0].end_time else float("inf"))
    return found


def judge_blockers(job: Job, found: Sequence[tuple[Job, list[str]]], now: datetime) -> Finding:
    subject = f"job {job.display_id}"
    if not found:
        return Finding(
            "job.blockers",
            "what holds its GPUs",
            Verdict.OK,
            "no running job holds GPUs of its type on the nodes it may use",
            subject=subject,
        )
    lines = tuple(
        f"job {o.display_id} ({o.user or 'user ?'}, {o.state}): {', '.join(held)}; ends "
        f"{when(o.end_time, now)}"
        for o, held in found
    )
    first = found[0][0]
    return Finding(
        "job.blockers",
        "what holds its GPUs",
        Verdict.WARN,
        f"{len(found)} running job(s) hold GPUs it needs; the first ends {when(first.end_time, now)}",
        "wait for them, or take a change below",
        subject,
        lines,
    )


def judge_alternatives(
    job: Job,
    sooner: Sequence[Alternative],
    rest: Sequence[Alternative],
    unchecked: str = "",
    compared: str = "",
) -> Finding:
    """The changes that start sooner: each one `sbatch --test-only` says starts sooner *and* no QOS,
    association or partition limit would hold (--test-only applies none); the others follow, each saying why
    not. ``unchecked``: why the limits could not be read (said beside what is offered); ``compared``: what
    "sooner" was measured against."""
    subject = f"job {job.display_id}"
    # the others say why not, without a line to type: only what starts sooner is advice
    others = tuple(f"{NOT_SOONER}{a.line(offer=False)}" for a in rest)
    caveat = (
        (f"the QOS and association limits could not be checked ({unchecked}): one may still hold a change",)
        if unchecked
        else ()
    ) + ((f"sooner means: {compared}",) if compared else ())
    if not sooner and not rest:
        return Finding(
            "job.alternatives",
            "what would start it sooner",
            Verdict.SKIP,
            "no change to try: it asks for no GPU, and its time limit is already short",
            subject=subject,
        )
    if not sooner:
        held = sum(1 for a in rest if a.held_by)
        why = f" ({held} held back by the limits)" if held else ""
        return Finding(
            "job.alternatives",
            "what would start it sooner",
            Verdict.OK,
            f"none of {len(rest)} change(s) checked would start sooner{why}: waiting is the fastest",
            subject=subject,
            details=caveat + others,
        )
    best = sooner[0]
    return Finding(
        "job.alternatives",
        "what would start it sooner",
        Verdict.WARN,
        f"{len(sooner)} change(s) would start sooner (checked with `sbatch --test-only` and the "
        f"QOS/association limits); best: {best.variant.change}",
        f"`%scancel {job.display_id}` then `{best.variant.salloc_line}`",
        subject,
        caveat + tuple(a.line() for a in sooner) + others,
    )


def judge_running(job: Job, nodes: Sequence[Node], steps: Sequence[Step], now: datetime) -> Finding:
    """A job that holds nodes: its nodes' states, its steps and its time left."""
    subject = f"job {job.display_id}"
    left = job.time_left(now)
    lines = [f"time left: {duration_in_words(int(left)) or 'none' if left is not None else 'no limit'}"]
    mine = [n for n in nodes if n.name in set(job.nodes)]
    bad = [n for n in mine if unhealthy(n)]
    lines += [f"node {n.name}: {'+'.join([n.state, *n.state_flags])}" for n in mine]
    lines += [f"step {s.step_id} ({s.name}): {s.state} on {s.nodelist or '?'}" for s in steps] or ["no steps"]
    said = f"{job.state} on {job.nodelist or ', '.join(job.nodes) or '?'}"
    if bad:
        names = ", ".join(n.name for n in bad)
        return Finding(
            "job.running",
            "job running",
            Verdict.WARN,
            said + f": node(s) {names} do not take work ({', '.join(unhealthy(bad[0]))})",
            "the job may hang on them: `%scancel` it and submit again (Slurm avoids drained nodes); "
            "see the node checks below",
            subject,
            tuple(lines),
        )
    if job.state == "COMPLETING":
        return Finding(
            "job.running",
            "job running",
            Verdict.WARN,
            said + ": still completing (its epilog runs, or a process on a node does not end)",
            "wait a minute; if it stays, ask the admins to look at the node",
            subject,
            tuple(lines),
        )
    return Finding("job.running", "job running", Verdict.OK, said, subject=subject, details=tuple(lines))


def judge_ended(job: Job) -> Finding:
    said = job.state + (f" ({plain_reason(job.reason)})" if job.reason and job.reason != "None" else "")
    return Finding(
        "job.ended",
        "job state",
        Verdict.OK,
        f"it is no longer pending or running: {said}",
        subject=f"job {job.display_id}",
    )
