"""The allocation panel's "why it waits" section and its switch buttons, and the time-left warning.

``alloc.why()`` runs several Slurm commands (one ``sbatch --test-only`` per change tried), so the panel never
runs it on the kernel's thread nor on every poll: :class:`WhyWorker` asks in a worker thread when the job's
state or reason changed, at most once per :data:`MIN_INTERVAL` seconds, and marks the panel dirty when done.
A switch button submits the alternative as a new allocation; the old one is cancelled once Slurm accepted the
new one, and the panel follows the new job (``alloc.replaced_by``).

Stable CSS classes for tests and the browser: ``slurmlab-why`` (the section; ``data-state`` computing / done /
failed), ``slurmlab-why-computing``, ``slurmlab-why-finding`` (``data-check`` = the finding's id),
``slurmlab-switch`` (a button), ``slurmlab-switch-status``, ``slurmlab-time-warning`` (``data-level``) and
``slurmlab-Panel-warn`` on the panel while a time warning stands.
"""

from __future__ import annotations

import html
import threading
import time
from collections.abc import Callable
from datetime import datetime, timezone
from typing import TYPE_CHECKING

from slurmlab.core.diagnosis.alternatives import Alternative
from slurmlab.core.diagnosis.findings import Finding
from slurmlab.core.diagnosis.job_checks import NOT_SOONER
from slurmlab.core.diagnosis.time_warnings import TimeWarning, time_warning
from slurmlab.slurm.allocation.pending import PendingWhy

if TYPE_CHECKING:
    from slurmlab.slurm.allocation import Allocation

__all__ = [
    "AMBER",
    "MAX_BUTTONS",
    "MIN_INTERVAL",
    "WhyWorker",
    "shown_result",
    "switch_label",
    "time_warning_html",
    "time_warning_of",
    "why_html",
]

MIN_INTERVAL = 30.0
MAX_BUTTONS = 3
AMBER = "#d9a400"
_VERDICT_COLOURS = {"OK": "#28a745", "SKIP": "#6c757d", "WARN": "#b8860b", "FAIL": "#dc3545"}

WhyFunction = Callable[["Allocation"], PendingWhy]


class WhyWorker:
    """Asks ``why`` for one allocation in the background, when it is due; ``result`` is the latest answer."""

    def __init__(self, ask: WhyFunction | None = None, *, min_interval: float = MIN_INTERVAL) -> None:
        self.ask: WhyFunction = ask or (lambda alloc: alloc.why())
        self.min_interval = min_interval
        self.result: PendingWhy | None = None
        self.error: str | None = None
        self.computing = False
        self.runs = 0
        self._key: tuple[str, str, str, bool] | None = None
        self._last = -float("inf")
        self._lock = threading.Lock()

    def reset(self) -> None:
        with self._lock:
            self.result, self.error, self._key, self._last = None, None, None, -float("inf")

    @staticmethod
    def key(alloc: Allocation) -> tuple[str, str, str, bool]:
        """What a new ask is due on: the job, its state, its reason, and whether Slurm has estimated its start
        (it may give one while the reason still says None: only then are changes worth a --test-only)."""
        view = alloc.view
        estimated = view is not None and view.expected_start is not None
        return (str(alloc.job_id), str(alloc.state), str(alloc.reason), estimated)

    def due(self, alloc: Allocation, now: float) -> bool:
        """Pending, the state, reason or estimate changed since the last ask, and that ask is old enough."""
        key = self.key(alloc)
        return (
            alloc.state == "PENDING"
            and not self.computing
            and key != self._key
            and now - self._last >= self.min_interval
        )

    def maybe_start(self, alloc: Allocation, done: Callable[[], None], now: float | None = None) -> bool:
        """Start an ask in a worker thread when :meth:`due`; ``done()`` is called when it ends."""
        now = time.monotonic() if now is None else now
        with self._lock:
            if not self.due(alloc, now):
                return False
            self.computing, self._last, self.runs = True, now, self.runs + 1
            self._key = self.key(alloc)

        def work() -> None:
            try:
                result, error = self.ask(alloc), None
            except Exception as exc:  # shown in the panel, never raised into the kernel
                result, error = None, getattr(exc, "message", None) or str(exc) or type(exc).__name__
            with self._lock:
                if result is not None and result.job_id == str(alloc.job_id):
                    self.result = result
                self.error, self.computing = error, False
            done()

        threading.Thread(target=work, name="slurmlab-why", daemon=True).start()
        return True


def shown_result(worker: WhyWorker, expected: datetime | None) -> PendingWhy | None:
    """The worker's answer held to ``expected``, the estimate the panel shows now: a change is offered only
    while it starts strictly before it."""
    result = worker.result
    return result.against(expected) if result is not None else None


def why_html(worker: WhyWorker, expected: datetime | None = None) -> str:
    """The pending section: each finding (verdict, evidence, details, fix), or that it is being asked.

    ``expected``: Slurm's estimate as the panel states it (once, above this section): the changes are held
    to it, and the reason's finding leaves out its own statement of the start (asked earlier, it may say
    another)."""
    esc = html.escape
    result = shown_result(worker, expected)
    parts = []
    if worker.computing:
        parts.append(
            "<div class='slurmlab-why-computing' style='color:#666'>asking Slurm why it waits and what "
            "would start it sooner (sbatch --test-only, and your QOS and association limits; each "
            "--test-only question uses up a job number)…</div>"
        )
    if worker.error:
        parts.append(
            f"<div class='slurmlab-why-error' style='color:#dc3545'>could not ask why it waits: "
            f"{esc(worker.error)}</div>"
        )
    for f in result.findings if result is not None else ():
        colour = _VERDICT_COLOURS.get(f.verdict.value, "#333")
        details = "".join(f"<li>{esc(d)}</li>" for d in _shown_details(f))
        fix = f"<div style='color:#555'>&rarr; {esc(f.fix)}</div>" if f.fix else ""
        parts.append(
            f"<div class='slurmlab-why-finding' data-check='{esc(f.check)}' data-verdict="
            f"'{f.verdict.value}'><b style='color:{colour}'>{esc(f.title)}:</b> {esc(f.evidence)}"
            f"{f'<ul style=margin:0>{details}</ul>' if details else ''}{fix}</div>"
        )
    if not parts:
        return ""
    state = "computing" if worker.computing else "failed" if worker.error else "done"
    return f"<div class='slurmlab-why' data-state='{state}'>{''.join(parts)}</div>"


def _shown_details(f: Finding) -> tuple[str, ...]:
    """The details the panel shows: job.pending's one detail is its expected start, which the panel states
    once from its latest poll; of the changes, only those offered (the others counted, never listed: under
    "what would start it sooner", a date a month away reads as advice)."""
    if f.check == "job.pending":
        return ()
    if f.check != "job.alternatives":
        return f.details
    kept = tuple(d for d in f.details if not d.startswith(NOT_SOONER))
    hidden = len(f.details) - len(kept)
    job = f.subject.removeprefix("job ")
    more = (f"{hidden} other change(s) checked start no sooner (`%slurm doctor --job {job}` lists them)",)
    return kept + (more if hidden else ())


def switch_label(alt: Alternative, now: datetime | None = None) -> str:
    """``Switch: 4 GPU(s) … (starts 14:05)``, with the date when the start is not today (local time, as the
    panel's expected start)."""
    starts = alt.answer.starts
    if starts is None:
        return f"Switch: {alt.variant.change} (starts ?)"
    local, today = starts.astimezone(), (now or datetime.now(timezone.utc)).astimezone()
    at = local.strftime("%H:%M") if local.date() == today.date() else local.strftime("%Y-%m-%d %H:%M")
    return f"Switch: {alt.variant.change} (starts {at})"


def time_warning_of(alloc: Allocation, now: float) -> TimeWarning | None:
    """The warning due for a running allocation now (none without a time limit)."""
    limit = alloc.job.time_limit if alloc.job is not None else None
    return time_warning(alloc.time_left(now), float(limit) if limit else None)


def time_warning_html(warning: TimeWarning) -> str:
    return (
        f"<div class='slurmlab-time-warning' data-level='{warning.level}' style='background:#fff3cd;"
        f"color:#7a5b00;border-left:4px solid {AMBER};padding:2px 6px'>{html.escape(warning.message)}</div>"
    )
