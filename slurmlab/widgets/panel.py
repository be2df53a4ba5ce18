"""The live panel of one allocation: what ``%salloc`` (and ``display(alloc)``) shows.

State badge, why it waits in plain words and when Slurm expects it to start, elapsed and time
left, nodes with their GPU indices (shards, MIG slices), steps, and a Cancel button. It updates
by itself: the shared job poller tells the allocation, the allocation tells the panel, and the
one widget thread (:mod:`slurmlab.widgets.live`) re-renders it.
"""

from __future__ import annotations

import html
import shlex
import threading
import time
from collections.abc import Sequence
from datetime import datetime, timezone
from typing import TYPE_CHECKING

from slurmlab._extras import require
from slurmlab.core.diagnosis.time_warnings import crossed, time_warning
from slurmlab.core.gpu.mig import is_mig_type
from slurmlab.core.slurm.reasons import explain_reason
from slurmlab.core.slurm.states import HOLDING
from slurmlab.slurm.allocation.display import OWN_JOB_WORDS, saved_html, saved_text
from slurmlab.widgets.live import LiveUpdater, get_updater
from slurmlab.widgets.panel_ended import EndedSection
from slurmlab.widgets.panel_usage import UsageSection
from slurmlab.widgets.panel_why import (
    AMBER,
    MAX_BUTTONS,
    WhyWorker,
    shown_result,
    switch_label,
    time_warning_html,
    why_html,
)
from slurmlab.widgets.rows import expected_start_text, fmt_seconds, waited_text

if TYPE_CHECKING:
    from slurmlab.slurm.allocation import Allocation

__all__ = ["STATE_COLOURS", "AllocationPanel", "display_bundle", "panel_html"]

STATE_COLOURS = {
    "SUBMITTING": "#6c757d",
    "PENDING": "#d9a400",
    "CONFIGURING": "#17a2b8",
    "RUNNING": "#28a745",
    "COMPLETING": "#17a2b8",
    "COMPLETED": "#6c757d",
    "CANCELLED": "#6c757d",
    "GONE": "#6c757d",
}
_FAILED = "#dc3545"

_panels: dict[int, AllocationPanel] = {}
_panels_lock = threading.Lock()


def badge_html(state: str) -> str:
    colour = STATE_COLOURS.get(state, _FAILED)
    return (
        f"<span class='slurmlab-badge' data-state='{html.escape(state)}' style='background:{colour};"
        f"color:white;border-radius:4px;padding:1px 8px;font-weight:bold'>{html.escape(state)}</span>"
    )


def _start(alloc: Allocation) -> float | None:
    view = alloc.view
    start = view.start_time if view is not None else None
    return start.timestamp() if start is not None else None


def _gpu_rows(alloc: Allocation) -> list[tuple[str, str, str]]:
    """(node, GPUs, shares) per node, from the job's GRES detail."""
    view = alloc.view
    rows = []
    for a in view.gpu_allocs if view is not None else ():
        types = {t: idx for t, idx in a.gpu_types.items() if idx}
        gpus = (
            "; ".join(
                f"{('MIG slice ' if is_mig_type(t) else '') + t + ' ' if t else ''}#{','.join(map(str, idx))}"
                for t, idx in types.items()
            )
            or "-"
        )
        shares = []
        for name in ("shard", "mps"):
            for i, n in sorted(a.shares(name).items()):
                shares.append(f"{name}s on GPU {i}: {'?' if n is None else n}")
        rows.append((a.node, gpus, "; ".join(shares) or "-"))
    if not rows:
        rows = [(n, "-", "-") for n in alloc.nodes]
    return rows


def node_state_words(state: str) -> str:
    """sinfo's node state in plain words (``mixed*`` -> not responding)."""
    text = state.lower()
    if text.endswith("*"):
        return f"not responding (slurmd unreachable; Slurm says {state})"
    for word, meaning in (
        ("drain", "draining: no new work"),
        ("down", "down"),
        ("fail", "failing"),
        ("reboot", "rebooting"),
        ("power", "powering down/up"),
    ):
        if word in text:
            return f"{meaning} (Slurm says {state})"
    return state


def _pending_lines(alloc: Allocation, now: float) -> list[str]:
    """Why it waits (plain words, Slurm's word, what would help), for how long, and when Slurm expects it
    to start once Slurm has computed that (the backfill scheduler does, every bf_interval)."""
    esc = html.escape
    explained = explain_reason(alloc.reason)
    lines = []
    if explained is None:
        lines.append("<div class='slurmlab-reason'><b>Waiting:</b> to be scheduled</div>")
    else:
        words = f"{explained.words} ({explained.code})" if explained.known else explained.code
        colour = f" style='color:{_FAILED}'" if explained.never else ""
        lines.append(
            f"<div class='slurmlab-reason' data-reason='{esc(explained.code)}'{colour}><b>Waiting:</b> "
            f"{esc(words)}</div>"
        )
        if explained.hint:
            lines.append(
                f"<div class='slurmlab-reason-hint'><b>What would help:</b> {esc(explained.hint)}</div>"
            )
    view = alloc.view
    submitted = view.submit_time.timestamp() if view is not None and view.submit_time is not None else None
    if submitted is None and alloc.request_argv:  # submitted by this kernel; Slurm's SubmitTime comes soon
        submitted = alloc.submitted_at
    if submitted is not None:
        lines.append(f"<div class='slurmlab-pending-for'>Pending for {waited_text(now - submitted)}</div>")
    start = view.expected_start if view is not None else None
    at_now = datetime.fromtimestamp(now, tz=timezone.utc)
    if start is not None:
        lines.append(
            f"<div class='slurmlab-expected-start'><b>Expected start:</b> "
            f"{esc(expected_start_text(start, at_now))} — Slurm's estimate</div>"
        )
    else:
        lines.append(
            "<div class='slurmlab-expected-start-unknown' style='color:#666'>Slurm has not estimated "
            "a start time yet</div>"
        )
    return lines


def panel_html(alloc: Allocation, now: float | None = None) -> str:
    """The panel's body as HTML (also used by tests and the text view)."""
    now = time.time() if now is None else now
    esc = html.escape
    state = str(alloc.state)
    lines: list[str] = []
    if alloc.own_job:  # the job the kernel runs in (Allocation.own): what ends it is not this kernel
        lines.append(f"<div class='slurmlab-own-job'><b>This session:</b> {esc(OWN_JOB_WORDS)}</div>")
    if state == "PENDING":
        lines += _pending_lines(alloc, now)
    elif state in HOLDING:
        start = _start(alloc)
        left = alloc.time_left(now)
        if left is None and alloc.job is not None:
            left = alloc.job.time_left(datetime.fromtimestamp(now, tz=timezone.utc))
        elapsed = fmt_seconds(now - start) if start else "-"
        limit = alloc.job.time_limit if alloc.job is not None else None
        warning = time_warning(left, float(limit) if limit else None)
        amber = f" style='color:{AMBER}'" if warning is not None else ""
        lines.append(
            f"<div class='slurmlab-times'><b>Elapsed:</b> {elapsed} &nbsp; <b{amber}>Time left:</b> "
            f"{fmt_seconds(left) if left is not None else 'no limit'}</div>"
        )
        if warning is not None:
            lines.append(time_warning_html(warning))
            if alloc.own_job:
                lines.append(
                    f"<div class='slurmlab-own-job-time' style='color:{AMBER}'>this kernel runs in this job: "
                    "it ends with it; save the notebook</div>"
                )
    alerts = alloc.node_alerts
    if alerts and state in HOLDING:
        # Slurm keeps the job RUNNING while a node's slurmd is silent; only the node's state tells.
        words = "; ".join(f"{node}: {node_state_words(st)}" for node, st in alerts)
        lines.append(
            f"<div class='slurmlab-node-alert' style='color:{_FAILED}'><b>Node trouble:</b> "
            f"{esc(words)} — steps there may hang; if it lasts, cancel and allocate again</div>"
        )
    if state in HOLDING and (alloc.job is not None or alloc.nodes):
        body = "".join(
            f"<tr><td>{esc(n)}</td><td>{esc(g)}</td><td>{esc(s)}</td></tr>" for n, g, s in _gpu_rows(alloc)
        )
        lines.append(
            "<table class='slurmlab-nodes'><thead><tr><th style='text-align:left'>node</th>"
            "<th style='text-align:left'>GPUs (index)</th><th style='text-align:left'>shares</th>"
            f"</tr></thead><tbody>{body}</tbody></table>"
        )
    steps = alloc.steps
    if steps:
        items = "".join(
            f"<li><code>{esc(_step_text(s.argv))}</code> → "
            f"{'interrupted' if s.interrupted else f'exit {s.returncode}'} ({s.duration:.1f} s)</li>"
            for s in steps[-5:]
        )
        lines.append(f"<div><b>Steps</b> ({len(steps)}):<ul style='margin:0'>{items}</ul></div>")
    if alloc.request_argv:
        lines.append(
            f"<div style='color:#666'>asked for: <code>{esc(' '.join(alloc.request_argv))}</code></div>"
        )
    return "".join(lines + _remarks(alloc, state))


def _remarks(alloc: Allocation, state: str) -> list[str]:
    """The lines under the state: how the controller slows the updates, the error, slurmlab's note."""
    esc = html.escape
    lines = []
    slow = _slow_words(alloc, state)
    if slow:  # the controller holds the poller's answers back: said where the user looks, not in a log
        lines.append(f"<div class='slurmlab-slow' style='color:{AMBER}'>{esc(slow)}</div>")
    if alloc.error:
        lines.append(f"<div class='slurmlab-error' style='color:{_FAILED}'>{esc(str(alloc.error))}</div>")
    if alloc.note:  # what slurmlab did that the state alone does not say (a lost cancel, redone)
        lines.append(f"<div class='slurmlab-note' style='color:{AMBER}'>{esc(alloc.note)}</div>")
    return lines


def _slow_words(alloc: Allocation, state: str) -> str | None:
    """The poller's rate-limit line, where polling is what brings this panel's news: not for an ended job, nor
    for a granted one whose salloc hears of its life from slurmctld (a push is not held back by the back-off)."""
    if alloc.ended or (
        state in HOLDING and alloc.job_id is not None and alloc.poller.is_pushed(alloc.job_id)
    ):
        return None
    return alloc.poller.slow_words


def _step_text(argv: Sequence[str], width: int = 90) -> str:
    """What the step ran (srun's arguments after the job), on one line."""
    args = list(argv)
    if "--overlap" in args:
        args = args[args.index("--overlap") + 1 :]
    text = " ".join(shlex.quote(a) for a in args).replace("\n", " ⏎ ")
    return text if len(text) <= width else text[: width - 1] + "…"


def _whose(alloc: Allocation) -> str:
    """Who a time warning is about: the session itself when the job is the one the kernel runs in."""
    if alloc.own_job:
        return f"this session (job {alloc.job_id}, the kernel's own: it ends with it)"
    return f"allocation {alloc.job_id}"


def header_html(alloc: Allocation) -> str:
    name = f" <span style='color:#666'>{html.escape(alloc.name)}</span>" if alloc.name else ""
    what = "this session: job" if alloc.own_job else "allocation"
    return f"{badge_html(str(alloc.state))} <b>{what} {html.escape(str(alloc.job_id or '…'))}</b>{name}"


class AllocationPanel:
    """The live view of one :class:`~slurmlab.slurm.allocation.Allocation`.

    Get one with :meth:`for_allocation` (one panel per allocation, however often displayed).
    ``widget`` is the ipywidgets box; after display only the updater thread changes it.
    """

    tick: float | None = 1.0  # elapsed / time left move every second

    def __init__(self, alloc: Allocation, *, updater: LiveUpdater | None = None) -> None:
        w = require("ipywidgets", feature="the allocation panel", extra="widgets")
        self.alloc = alloc
        self.updater = updater or get_updater()
        self.header = w.HTML(value=header_html(alloc))
        self.body = w.HTML(value=panel_html(alloc))
        self.cancel_button = w.Button(
            description="Cancel allocation",
            button_style="danger",
            icon="times",
            disabled=bool(alloc.ended),
            tooltip="scancel this allocation",
        )
        self.cancel_button.add_class("slurmlab-cancel")
        if (
            alloc.own_job
        ):  # cancelling the job the kernel runs in would end the kernel: the panel never offers it
            self.cancel_button.layout.display = "none"
        self.status = w.HTML(value="")
        # the pending section (filled in the background) and one button per change that starts sooner
        self.why = w.HTML(value="")
        self.switches = w.HBox([])
        self.switches.add_class("slurmlab-switches")
        self.switch_status = w.HTML(value="")
        self.switch_status.add_class("slurmlab-switch-status")
        self.output = w.Output()  # the time warnings, printed once each, in the cell that shows the panel
        self.usage = UsageSection(alloc, lambda: self.updater.mark_dirty(self))  # the live usage chart
        self.ended = EndedSection(lambda: self.updater.mark_dirty(self))  # how it ended, once it has
        self.widget = w.VBox(
            [
                self.header,
                self.body,
                self.why,
                self.switches,
                self.switch_status,
                self.ended.widget,
                self.usage.widget,
                w.HBox([self.cancel_button, self.status]),
                self.output,
            ]
        )
        self.widget.add_class("slurmlab-allocation")
        self.worker = WhyWorker()
        self._shown_why: object = None
        self._warned: str | None = None
        self._switching = False
        self._switch_said = ""  # what the switch did; shown by render (only the updater thread sets traits)
        self._cancelling = False
        self._done = False
        self.cancel_button.on_click(self._on_cancel)
        self._unsubscribe = alloc.subscribe(self._changed)
        self.updater.add(self)

    @classmethod
    def for_allocation(cls, alloc: Allocation) -> AllocationPanel:
        with _panels_lock:
            panel = _panels.get(id(alloc))
            if panel is None or panel.alloc is not alloc:
                panel = cls(alloc)
                _panels[id(alloc)] = panel
            return panel

    # called from the poller thread: only mark, never touch a trait
    def _changed(self, _alloc: Allocation) -> None:
        self.updater.mark_dirty(self)

    # called from the kernel's comm handler: work in a worker, render in the updater thread
    def _on_cancel(self, _button: object = None) -> None:
        if self._cancelling or self.alloc.ended or self.alloc.own_job:
            return
        self._cancelling = True
        self.updater.mark_dirty(self)

        def work() -> None:
            try:
                self.alloc.cancel()
            except Exception as exc:  # shown in the panel, never raised into the kernel
                self.alloc.error = f"cancel failed: {exc}"
                self._cancelling = False
            self.updater.mark_dirty(self)

        threading.Thread(target=work, name="slurmlab-cancel", daemon=True).start()

    def cancel(self) -> None:
        """What the button does (for code and tests)."""
        self._on_cancel()

    def render(self) -> None:
        """Assign the widgets' values from the allocation (the updater thread calls this)."""
        if self.alloc.replaced_by is not None:
            self._follow(self.alloc.replaced_by)
        alloc = self.alloc
        self._render_why(alloc)
        self._render_warning(alloc)
        self.usage.render(alloc)
        head, body = header_html(alloc), panel_html(alloc)
        if self.header.value != head:
            self.header.value = head
        if self.body.value != body:
            self.body.value = body
        disabled = bool(alloc.ended or self._cancelling or alloc.own_job)
        if self.cancel_button.disabled != disabled:
            self.cancel_button.disabled = disabled
        status = "cancelling…" if self._cancelling and not alloc.ended else ""
        if self.status.value != status:
            self.status.value = status
        told = self.ended.render(alloc, self.output)  # False while it asks how it ended
        if alloc.settled and not self._done and told:
            # final state shown, and no lost cancel can bring the job back: stop following
            self._done = True
            self._unsubscribe()
            self.updater.remove(self)

    # ---- why it waits, the switch, the time warnings (slurmlab.widgets.panel_why) ----------------------
    def _render_why(self, alloc: Allocation) -> None:
        self.worker.maybe_start(alloc, lambda: self.updater.mark_dirty(self))
        pending = alloc.state == "PENDING"
        # the one estimate the panel states (its latest poll): every change offered starts before it
        expected = alloc.view.expected_start if alloc.view is not None else None
        value = why_html(self.worker, expected) if pending else ""
        if self.why.value != value:
            self.why.value = value
        if self.switch_status.value != self._switch_said:
            self.switch_status.value = self._switch_said
        result = shown_result(self.worker, expected) if pending and not self._switching else None
        if result == self._shown_why:
            return
        self._shown_why = result
        w = require("ipywidgets", feature="the allocation panel", extra="widgets")
        buttons = []
        for alt in result.sooner[:MAX_BUTTONS] if result is not None else ():
            b = w.Button(
                description=switch_label(alt),
                tooltip=alt.variant.salloc_line,
                button_style="warning",
                layout=w.Layout(width="auto"),
            )
            b.add_class("slurmlab-switch")
            b.on_click(lambda _b, alt=alt: self.switch(alt))
            buttons.append(b)
        self.switches.children = tuple(buttons)

    def switch(self, alternative: object) -> None:
        """What a switch button does: resubmit in a worker; the panel follows the new job once accepted."""
        from slurmlab.core.diagnosis.alternatives import Alternative

        if self._switching or self.alloc.ended or not isinstance(alternative, Alternative):
            return
        self._switching = True
        alloc = self.alloc
        self._switch_said = f"submitting {html.escape(alternative.variant.salloc_line)} …"
        self.updater.mark_dirty(self)

        def work() -> None:
            try:
                alloc.resubmit(alternative)
                said = f"switched to {html.escape(alternative.variant.change)}; job {alloc.job_id} cancelled"
            except Exception as exc:  # the old allocation stays; the panel says why
                said = f"<span style='color:{_FAILED}'>switch refused: {html.escape(str(exc))}</span>"
            self._switch_said, self._switching = said, False
            self.updater.mark_dirty(self)

        threading.Thread(target=work, name="slurmlab-switch", daemon=True).start()

    def _follow(self, new: Allocation) -> None:
        """Show ``new`` (the allocation that replaced this one) from now on."""
        self._unsubscribe()
        with _panels_lock:
            _panels[id(new)] = self
        self.alloc = new
        self.worker.reset()
        self._shown_why, self._warned, self._done = None, None, False
        self._unsubscribe = new.subscribe(self._changed)

    def _render_warning(self, alloc: Allocation) -> None:
        limit = alloc.job.time_limit if alloc.job is not None else None
        warning = time_warning(alloc.time_left(), float(limit) if limit else None) if alloc.running else None
        if warning is not None:
            self.widget.add_class("slurmlab-Panel-warn")
        else:
            self.widget.remove_class("slurmlab-Panel-warn")
        if crossed(self._warned, warning) and warning is not None:
            self._warned = warning.level
            self.output.append_stdout(f"slurmlab: {_whose(alloc)}: {warning.message}\n")

    def _repr_mimebundle_(self, include: object = None, exclude: object = None) -> dict[str, object]:
        bundle: dict[str, object] = self.widget._repr_mimebundle_(include=include, exclude=exclude)
        # what a saved notebook shows where the widget cannot come back: dated, never "live"
        bundle["text/plain"] = saved_text(self.alloc)
        bundle["text/html"] = saved_html(self.alloc)
        return bundle


def display_bundle(alloc: Allocation) -> dict[str, object] | None:
    """How an Allocation displays (registered with IPython's display formatter by ``%load_ext``):
    its live panel, or None where ipywidgets is not installed (the plain text view then)."""
    try:
        import ipywidgets  # noqa: F401
    except ImportError:
        return None
    return AllocationPanel.for_allocation(alloc)._repr_mimebundle_()
