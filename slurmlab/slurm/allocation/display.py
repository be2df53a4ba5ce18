"""How an allocation shows itself: a one-line summary, and the mime bundle a notebook displays.

The Slurm room never imports ipywidgets: ``%load_ext slurmlab`` registers the live panel of the widgets room
with IPython's own display formatter (by class name, ``for_type_by_name``), which then shows an allocation as
its panel; without that (plain Python, an IPython without the extension) an allocation is its dated summary as
text and HTML, :func:`mime_bundle`.

Text and HTML in a notebook are frozen the moment they are shown, and they are what a saved notebook shows
once the kernel that made them is gone (the live panel's fallbacks too). So they never claim a live state:
they say when the state was seen, what became of a live job when its kernel ended (a reopened notebook is read
after that: a kernel killed with ``kill -9`` had its job cancelled by its guardian a second later), and how to
follow it again (:func:`saved_text`, :func:`saved_html`), e.g.
``<Allocation 7: RUNNING as of 2026-12-01 14:02:11 — cancelled when its kernel ends; re-run the cell to
reconnect>``.
"""

from __future__ import annotations

import html
import time
from datetime import datetime
from typing import TYPE_CHECKING

from slurmlab.core.slurm.timefmt import format_duration

if TYPE_CHECKING:
    from slurmlab.slurm.allocation.lifecycle import Allocation

__all__ = [
    "OWN_JOB_WORDS",
    "RECONNECT",
    "as_of",
    "mime_bundle",
    "saved_html",
    "saved_text",
    "summary",
    "summary_html",
]

RECONNECT = "re-run the cell to reconnect"
# the job the kernel runs in (Allocation.own): the kernel does not own it, so neither its end nor slurmlab ends it
OWN_JOB_WORDS = (
    "the job this session runs in: slurmlab never cancels it, not when the kernel ends either; "
    "it ends when the session is stopped or its time runs out"
)


def summary(alloc: Allocation) -> str:
    """``allocation J: STATE, reason …, nodes …, GPUs node:i,j, … left, error: …`` (what is known of it)."""
    left = alloc.time_left()
    return ", ".join(
        _parts(alloc, alloc.state, None if left is None else f"{format_duration(left, clamp=True)} left")
    )


def _parts(alloc: Allocation, state: str, left: str | None) -> list[str]:
    parts = [f"allocation {alloc.job_id or '(submitting)'}: {state}"]
    if alloc.reason and alloc.state == "PENDING":
        parts.append(f"reason {alloc.reason}")
    if alloc.nodes:
        parts.append("nodes " + ",".join(alloc.nodes))
    gpus = alloc.gpus
    if gpus:
        parts.append("GPUs " + "; ".join(f"{n}:{','.join(map(str, i))}" for n, i in gpus.items()))
    if left is not None:
        parts.append(left)
    if alloc.error:
        parts.append(f"error: {alloc.error}")
    if alloc.note:
        parts.append(f"note: {alloc.note}")
    return parts


def as_of(alloc: Allocation, now: float | None = None) -> str:
    """When the state shown was last heard from Slurm (local time); the display time before any answer."""
    at = alloc.updated_at if alloc.updated_at is not None else (time.time() if now is None else now)
    return datetime.fromtimestamp(at).strftime("%Y-%m-%d %H:%M:%S")


def _saved_line(alloc: Allocation, now: float | None) -> str:
    # no time left: a countdown frozen in a saved notebook would be wrong a minute later
    return ", ".join(_parts(alloc, f"{alloc.state} as of {as_of(alloc, now)}", None))


def _after_kernel(alloc: Allocation) -> str:
    """What became of a live job once its kernel ended, which a saved state cannot show: the kernel cancels what
    it holds as it exits, and its guardian process does when it dies without a word (``kill -9``)."""
    if alloc.ended:
        return ""
    if alloc.own_job:
        return f"{OWN_JOB_WORDS}; "
    return "cancelled when its kernel ends; " if alloc.release_at_exit else "kept when its kernel ends; "


def saved_text(alloc: Allocation, now: float | None = None) -> str:
    """``<Allocation 7: RUNNING as of … — cancelled when its kernel ends; re-run the cell to reconnect>``: the text
    a notebook keeps."""
    line = _saved_line(alloc, now).removeprefix("allocation ")
    return f"<Allocation {line} — {_after_kernel(alloc)}{RECONNECT}>"


def saved_html(alloc: Allocation, now: float | None = None) -> str:
    """:func:`saved_text` as HTML, with the job and state as attributes for whoever styles or tests it."""
    esc = html.escape
    return (
        f"<div class='slurmlab-saved-allocation' data-job='{esc(str(alloc.job_id or ''))}' "
        f"data-state='{esc(str(alloc.state))}'><code>{esc(_saved_line(alloc, now))}</code> — "
        f"<i>{esc(_after_kernel(alloc))}{RECONNECT}</i></div>"
    )


def mime_bundle(alloc: Allocation) -> dict[str, object]:
    """The dated summary as text and HTML (the live panel, where registered, is IPython's formatter's)."""
    return {"text/plain": saved_text(alloc), "text/html": saved_html(alloc)}


def summary_html(alloc: Allocation) -> str:
    return f"<code>{html.escape(alloc.summary())}</code>"
