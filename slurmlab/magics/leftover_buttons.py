"""Attach and Cancel buttons under ``%slurm`` for the jobs earlier kernels of this notebook left.

The text above them already says ``%slurm attach ID`` and ``%scancel ID``; the buttons do the same, for a
user who would rather click. Without ipywidgets there are no buttons, and nothing is lost.
"""

from __future__ import annotations

import html
from typing import Any

from IPython.core.error import UsageError

from slurmlab.errors import SlurmlabError
from slurmlab.magics.kernel import attach_as_default
from slurmlab.slurm import queries
from slurmlab.slurm.allocation.leftovers import Leftovers
from slurmlab.slurm.allocation.release import follow_cancelled
from slurmlab.slurm.runner import get_runner

__all__ = ["leftover_bundle", "leftover_buttons"]


def leftover_buttons(leftovers: Leftovers) -> Any:
    """A widget with one row per job (Attach, Cancel) and a line for what happened; None without ipywidgets."""
    try:
        import ipywidgets as w
    except ImportError:
        return None
    said = w.HTML()
    rows = []
    for job in leftovers:
        jid = str(job.job_id)
        attach = w.Button(
            description=f"Attach {jid}", tooltip=f"%slurm attach {jid}: follow it as the default"
        )
        cancel = w.Button(description=f"Cancel {jid}", tooltip=f"%scancel {jid}", button_style="danger")
        attach.add_class("slurmlab-leftover-attach")
        cancel.add_class("slurmlab-leftover-cancel")
        attach.on_click(lambda _b, jid=jid: _say(said, _attach(jid)))
        cancel.on_click(lambda _b, jid=jid, tag=job.comment: _say(said, _cancel(jid, tag)))
        rows.append(w.HBox([w.Label(f"job {jid} ({job.state})"), attach, cancel]))
    box = w.VBox([*rows, said])
    box.add_class("slurmlab-leftovers-buttons")
    return box


def leftover_bundle(buttons: Any, leftovers: Leftovers) -> dict[str, object]:
    """How the buttons display: the widget, and for a saved notebook the jobs with what the buttons would run."""
    from slurmlab.widgets.saved import saved_bundle

    lines = [
        f"job {job.job_id} ({job.state}): %slurm attach {job.job_id} · %scancel {job.job_id}"
        for job in leftovers
    ]
    items = "".join(f"<li><code>{html.escape(line)}</code></li>" for line in lines)
    return saved_bundle(
        buttons, "leftovers", "\n".join(lines), f"<div class='slurmlab-leftovers'><ul>{items}</ul></div>"
    )


def _say(html_widget: Any, text: str) -> None:
    html_widget.value = f"<span class='slurmlab-leftover-result'>{html.escape(text)}</span>"


def _attach(jid: str) -> str:
    try:
        alloc = attach_as_default(jid)
    except UsageError as exc:
        return str(exc)
    return f"attached to job {alloc.job_id}: it is the default allocation now (%srun runs there)"


def _cancel(jid: str, comment: str | None = None) -> str:
    """``%scancel jid``, and the cancel followed until Slurm has saved it (a controller restart can bring the
    job back: :mod:`slurmlab.slurm.allocation.release`); ``comment``: the job's tag, so that a job id a restarted
    controller gave another job is never taken for it."""
    runner = get_runner()
    try:
        queries.cancel_job(jid, runner)
    except SlurmlabError as exc:
        return f"cannot cancel job {jid}: {exc}"
    follow_cancelled(jid, runner, comment)
    return f"cancelled job {jid}"
