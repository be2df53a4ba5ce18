"""Rows of the job and node tables, and how long a pending job has waited and when Slurm expects it to start.

``plain_reason`` is :func:`slurmlab.core.slurm.reasons.plain_reason` (one table of reasons for the panel,
``%squeue`` and the sidebar), re-exported here for the views that import it from the rows.

Plain data and strings only (no ipywidgets): the magics print these as text or HTML tables and
the widgets show them. Columns follow what a GPU user asks first: which GPUs (indices per node),
shards, state, why it waits, how long is left.
"""

from __future__ import annotations

import html
from collections.abc import Iterator, Sequence
from datetime import datetime, timezone
from typing import TYPE_CHECKING

from slurmlab.core.slurm.reasons import plain_reason
from slurmlab.core.slurm.timefmt import duration_in_words, format_duration

if TYPE_CHECKING:  # %load_ext imports this module (via %squeue's table): the models load on first use
    from slurmlab.core.slurm.job_view import JobView
    from slurmlab.core.slurm.models import Job, Node

__all__ = [
    "JOB_COLUMNS",
    "NODE_COLUMNS",
    "Table",
    "fmt_seconds",
    "expected_start_text",
    "gpus_text",
    "is_mig_type",  # noqa: F822 - served by __getattr__ below, so that %load_ext does not load the MIG tables
    "job_row",
    "node_row",
    "pending_text",
    "plain_reason",
    "shards_text",
    "waited_text",
]


def __getattr__(name: str) -> object:
    # is_mig_type is re-exported for the views that import it from here; the MIG tables load when asked
    if name == "is_mig_type":
        from slurmlab.core.gpu.mig import is_mig_type

        return is_mig_type
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")


def fmt_seconds(seconds: float | None) -> str:
    """``1-02:03:04`` / ``02:03:04``; ``-`` when unknown; a countdown past its end shows 0."""
    return format_duration(seconds, unlimited="-", clamp=True)


def waited_text(seconds: float) -> str:
    """``45 seconds`` / ``2 minutes 5 seconds`` / ``1 hour 5 minutes``: how long a job has waited, in words (a
    clock reads like a countdown), to its two largest units."""
    return " ".join(duration_in_words(max(0, int(seconds))).split()[:4]) or "0 seconds"


def expected_start_text(start: datetime, now: datetime) -> str:
    """``14:05:00 (in 3 min)`` in local time, with the date when it is not today; ``now`` once it is due
    (Slurm keeps its estimate while the job still waits)."""
    local, today = start.astimezone(), now.astimezone()
    at = local.strftime("%H:%M:%S") if local.date() == today.date() else local.strftime("%Y-%m-%d %H:%M")
    ahead = (start - now).total_seconds()
    return f"{at} (in {waited_text(ahead)})" if ahead >= 1 else f"{at} (due now)"


def pending_text(job: Job | JobView, now: datetime | None = None) -> str:
    """``pending for 2 min; expected start 14:05:00 (in 3 min)`` for a pending job ("" otherwise); the
    expected start only once Slurm has computed one."""
    view = _view(job)
    if view.state != "PENDING":
        return ""
    now = now or _now()
    parts = []
    if view.submit_time is not None:
        parts.append(f"pending for {waited_text((now - view.submit_time).total_seconds())}")
    start = view.expected_start
    if start is not None:
        parts.append(f"expected start {expected_start_text(start, now)}")
    return "; ".join(parts)


def _now() -> datetime:
    return datetime.now(timezone.utc)


def _view(job: Job | JobView) -> JobView:
    from slurmlab.core.slurm.job_view import JobView

    return job if isinstance(job, JobView) else JobView.from_job(job)


def gpus_text(job: Job | JobView) -> str:
    """``node1:0,1 node2:3`` (GPU indices per node, with the type when Slurm names one)."""
    view = _view(job)
    parts = []
    for alloc in view.gpu_allocs:
        types = alloc.gpu_types
        idx = ",".join(str(i) for i in alloc.gpu_indices)
        named = [t for t in types if t]
        if idx:
            parts.append(f"{alloc.node}:{idx}" + (f" ({'/'.join(named)})" if named else ""))
    if parts:
        return " ".join(parts)
    # pending (or no detail yet): what was asked for
    return ("asked " + " ".join(view.gpus_asked)) if view.gpus_asked else "-"


def shards_text(job: Job | JobView) -> str:
    """``node1 gpu3:4`` (shards held per GPU), ``-`` when none."""
    parts = []
    for alloc in _view(job).gpu_allocs:
        shares = alloc.shares("shard")
        if shares:
            parts.append(
                alloc.node
                + " "
                + ",".join(f"gpu{i}:{'?' if n is None else n}" for i, n in sorted(shares.items()))
            )
    return " ".join(parts) if parts else "-"


def job_row(job: Job | JobView, now: datetime | None = None) -> dict[str, str]:
    """One row of the job table (every value a string)."""
    view = _view(job)
    now = now or _now()
    state = view.state
    left = view.time_left(now)
    start = view.expected_start
    row = {
        "job": view.display_id,
        "name": view.name,
        "user": view.user or "",
        "partition": view.partition or "",
        "state": state,
        "reason": plain_reason(view.reason) if state == "PENDING" else "",
        "pending": pending_text(view, now),
        "nodes": view.nodelist or "-",
        "gpus": gpus_text(view),
        "shards": shards_text(view),
        "time_left": fmt_seconds(left) if left is not None else ("-" if state != "RUNNING" else "unlimited"),
        "expected_start": start.astimezone().strftime("%H:%M:%S") if start is not None else "",
    }
    return row


JOB_COLUMNS = (
    "job",
    "name",
    "user",
    "partition",
    "state",
    "nodes",
    "gpus",
    "shards",
    "time_left",
    "pending",
    "reason",
)
NODE_COLUMNS = ("node", "state", "partitions", "gpu_type", "gpus_used", "used_idx", "shards_used", "cpus")


def node_row(node: Node) -> dict[str, str]:
    """One row of the node table: GPU type, used/total GPUs, shards used per GPU."""
    types = node.gpu_types()
    used_idx = node.gpu_used_indices()
    shards = node.shard_usage()
    shard_txt = " ".join(
        f"gpu{i}:{'whole' if u is None and t is not None else ('?' if u is None else u)}"
        + (f"/{t}" if t is not None else "")
        for i, (u, t) in sorted(shards.items())
    )
    alloc = node.alloc_cpus
    return {
        "node": node.name,
        "state": node.state + ("+" + "+".join(node.state_flags) if node.state_flags else ""),
        "partitions": ",".join(node.partitions),
        "gpu_type": ",".join(f"{t or 'gpu'}×{n}" for t, n in types.items()) or "-",
        "gpus_used": f"{node.gpu_used}/{node.gpu_total}",
        "used_idx": " ".join(
            f"{t + ':' if t else ''}{','.join(map(str, i))}" for t, i in used_idx.items() if i
        )
        or "-",
        "shards_used": shard_txt or "-",
        "cpus": f"{alloc if alloc is not None else '?'}/{node.cpus if node.cpus is not None else '?'}",
    }


class Table:
    """Rows that display as an HTML table in a notebook and as aligned text elsewhere."""

    def __init__(
        self,
        rows: Sequence[dict[str, str]],
        columns: Sequence[str],
        *,
        title: str = "",
        empty: str = "(nothing)",
    ) -> None:
        self.rows = list(rows)
        self.columns = tuple(columns)
        self.title = title
        self.empty = empty

    def __len__(self) -> int:
        return len(self.rows)

    def __iter__(self) -> Iterator[dict[str, str]]:
        return iter(self.rows)

    def text(self) -> str:
        head = [c.upper() for c in self.columns]
        cells = [[r.get(c, "") for c in self.columns] for r in self.rows]
        widths = [max([len(h)] + [len(row[i]) for row in cells]) for i, h in enumerate(head)]
        lines = [self.title] if self.title else []
        lines.append("  ".join(h.ljust(w) for h, w in zip(head, widths, strict=True)).rstrip())
        lines += ["  ".join(v.ljust(w) for v, w in zip(row, widths, strict=True)).rstrip() for row in cells]
        if not cells:
            lines.append(self.empty)
        return "\n".join(lines)

    def __repr__(self) -> str:
        return self.text()

    def html(self) -> str:
        esc = html.escape
        head = "".join(f"<th style='text-align:left'>{esc(c.replace('_', ' '))}</th>" for c in self.columns)
        body = "".join(
            "<tr>"
            + "".join(f"<td style='text-align:left'>{esc(r.get(c, ''))}</td>" for c in self.columns)
            + "</tr>"
            for r in self.rows
        )
        if not self.rows:
            body = f"<tr><td colspan='{len(self.columns)}'>{esc(self.empty)}</td></tr>"
        title = f"<caption style='text-align:left'>{esc(self.title)}</caption>" if self.title else ""
        return f"<table class='slurmlab-table'>{title}<thead><tr>{head}</tr></thead><tbody>{body}</tbody></table>"

    def _repr_html_(self) -> str:
        return self.html()
