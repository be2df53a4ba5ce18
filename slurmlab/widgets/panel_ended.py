"""The allocation panel's "how it ended" section, and the one line the owning cell prints when it ends.

``alloc.outcome()`` asks sacct (a few seconds while slurmdbd catches up; ``scontrol show job`` where accounting is
off), so the panel never runs it on the kernel's thread: :class:`EndedSection` asks once per job in a worker
thread when the allocation has ended, marks the panel dirty when done, and the updater thread renders.

Stable CSS hooks for tests and the browser: ``slurmlab-ended`` (the section; ``data-state`` the judged end:
COMPLETED, TIMEOUT, OUT_OF_MEMORY, CANCELLED ..., or ``computing`` / ``failed``), ``slurmlab-ended-advice``.
"""

from __future__ import annotations

import html
import threading
from collections.abc import Callable
from typing import TYPE_CHECKING, Protocol

from slurmlab._extras import require
from slurmlab.core.diagnosis.ended import Ended

if TYPE_CHECKING:
    from slurmlab.slurm.allocation import Allocation

__all__ = ["EndedSection", "ended_html"]

AskFunction = Callable[["Allocation"], Ended]
_COLOURS = {"COMPLETED": "#28a745", "CANCELLED": "#6c757d"}  # anything else is a failure: red
_FAILED = "#dc3545"


class _Output(Protocol):
    def append_stdout(self, text: str) -> None: ...


def ended_html(result: Ended | None, error: str | None, computing: bool) -> str:
    """The section: the end, the steps, the advice and the efficiency; or that it is being asked, or why not."""
    if computing:
        return (
            "<div class='slurmlab-ended' data-state='computing' style='color:#666'>asking Slurm accounting "
            "how it ended…</div>"
        )
    if error:
        return (
            f"<div class='slurmlab-ended' data-state='failed' style='color:{_FAILED}'>could not tell how it "
            f"ended: {html.escape(error)}</div>"
        )
    if result is None:
        return ""
    colour = _COLOURS.get(result.state, _FAILED)
    inner = result._repr_html_()
    return f"<div style='border-left:4px solid {colour};padding:2px 6px'>{inner}</div>"


class EndedSection:
    """Asks how the allocation ended, once per job, in a worker thread; renders it and prints its line once."""

    def __init__(self, mark_dirty: Callable[[], None], ask: AskFunction | None = None) -> None:
        w = require("ipywidgets", feature="the allocation panel", extra="widgets")
        self.widget = w.HTML(value="")
        self.mark_dirty = mark_dirty
        self.ask: AskFunction = ask or (lambda alloc: alloc.outcome())
        self.result: Ended | None = None
        self.error: str | None = None
        self.computing = False
        self._job: str | None = None  # the job last asked about
        self._printed: str | None = None
        self._lock = threading.Lock()

    def _start(self, alloc: Allocation) -> None:
        with self._lock:
            self._job, self.computing, self.result, self.error = str(alloc.job_id), True, None, None

        def work() -> None:
            try:
                result, error = self.ask(alloc), None
            except Exception as exc:  # shown in the section, never raised into the kernel
                result, error = None, getattr(exc, "message", None) or str(exc) or type(exc).__name__
            with self._lock:
                self.result, self.error, self.computing = result, error, False
            self.mark_dirty()

        threading.Thread(target=work, name="slurmlab-ended", daemon=True).start()

    def render(self, alloc: Allocation, output: _Output) -> bool:
        """Update the section (the updater thread calls this); True once there is nothing more to wait for."""
        if not alloc.ended or alloc.job_id is None:
            value = ""
        else:
            if self._job != str(alloc.job_id):
                self._start(alloc)
            with self._lock:
                result, error, computing = self.result, self.error, self.computing
            value = ended_html(result, error, computing)
            if result is not None and self._printed != result.job_id:
                self._printed = result.job_id
                output.append_stdout(f"slurmlab: {result.line()}\n")
        if self.widget.value != value:
            self.widget.value = value
        return not self.computing
