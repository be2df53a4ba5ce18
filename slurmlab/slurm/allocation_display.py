"""How an allocation shows itself: a one-line summary, and the mime bundle a notebook displays.

The Slurm room never imports ipywidgets: the widgets room registers its live panel in :data:`DISPLAY_HOOKS`
(it does on ``%load_ext slurmlab``), and without one an allocation is its summary as text and HTML.
"""

from __future__ import annotations

import html
from collections.abc import Callable
from typing import TYPE_CHECKING

from slurmlab.core.slurm.timefmt import format_duration

if TYPE_CHECKING:
    from slurmlab.slurm.allocation import Allocation

__all__ = ["DISPLAY_HOOKS", "mime_bundle", "summary", "summary_html"]

# Renderers registered by the widgets room: each returns a mime bundle or None.
DISPLAY_HOOKS: list[Callable[[Allocation], dict[str, object] | None]] = []


def summary(alloc: Allocation) -> str:
    """``allocation J: STATE, reason …, nodes …, GPUs node:i,j, … left, error: …`` (what is known of it)."""
    parts = [f"allocation {alloc.job_id or '(submitting)'}: {alloc.state}"]
    if alloc.reason and alloc.state == "PENDING":
        parts.append(f"reason {alloc.reason}")
    if alloc.nodes:
        parts.append("nodes " + ",".join(alloc.nodes))
    gpus = alloc.gpus
    if gpus:
        parts.append("GPUs " + "; ".join(f"{n}:{','.join(map(str, i))}" for n, i in gpus.items()))
    left = alloc.time_left()
    if left is not None:
        parts.append(f"{format_duration(left, clamp=True)} left")
    if alloc.error:
        parts.append(f"error: {alloc.error}")
    return ", ".join(parts)


def mime_bundle(alloc: Allocation) -> dict[str, object]:
    """The newest registered hook's bundle, else the summary as text and HTML."""
    for hook in reversed(DISPLAY_HOOKS):
        bundle = hook(alloc)
        if bundle is not None:
            return bundle
    return {"text/plain": repr(alloc), "text/html": alloc._html()}


def summary_html(alloc: Allocation) -> str:
    return f"<code>{html.escape(alloc.summary())}</code>"
