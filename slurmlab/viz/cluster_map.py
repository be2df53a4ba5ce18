"""Bokeh map of a cluster's GPUs: one row per node, one cell per GPU, coloured by the job using it.

Input is deliberately simple so any room can build it: ``(node, gpu_index, job_id | None, shard_used,
shard_total)`` tuples. A GPU used whole has ``shard_total == 0``; a GPU split into shards may appear in
several tuples (one per job), and each job then fills its fraction of the cell. The renderer named ``cells``
holds one row per drawn segment (inspect its data in tests).
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from typing import Any

from slurmlab.errors import RequestError
from slurmlab.viz._bokeh import PALETTE, bokeh

__all__ = ["GpuUse", "cluster_gpu_map"]

GpuUse = tuple[str, int, "str | int | None", int, int]
_IDLE = "#E8E8E8"


def _check(row: Sequence[Any]) -> tuple[str, int, str | None, int, int]:
    if not isinstance(row, Sequence) or isinstance(row, str) or len(row) != 5:
        raise RequestError(f"cluster_gpu_map needs (node, gpu_index, job_id|None, shard_used, shard_total); "
                           f"got {row!r}")
    node, gpu, job, used, total = row
    if not isinstance(gpu, int) or gpu < 0:
        raise RequestError(f"GPU index must be a non-negative int, got {gpu!r} in {row!r}")
    if not isinstance(used, int) or not isinstance(total, int) or used < 0 or total < 0 or used > max(total, 1):
        raise RequestError(f"shard counts must satisfy 0 <= used <= total, got {used}/{total} in {row!r}")
    return str(node), gpu, None if job is None else str(job), used, total


def cluster_gpu_map(nodes: Iterable[Sequence[Any]], *, title: str = "GPUs by job", width: int = 820) -> Any:
    """A nodes x GPUs map; whole-GPU jobs fill their cell, shard jobs a fraction of it."""
    plotting = bokeh("plotting", "the cluster GPU map")
    models = bokeh("models", "the cluster GPU map")
    rows = [_check(r) for r in nodes]
    node_names = list(dict.fromkeys(r[0] for r in rows))
    max_gpu = max((r[1] for r in rows), default=0)
    jobs = list(dict.fromkeys(r[2] for r in rows if r[2] is not None))
    colour = {j: PALETTE[k % len(PALETTE)] for k, j in enumerate(jobs)}

    # per (node, gpu): the segments left to right; shards stack by their fractions
    per_cell: dict[tuple[str, int], list[tuple[str | None, int, int]]] = {}
    for node, gpu, job, used, total in rows:
        per_cell.setdefault((node, gpu), []).append((job, used, total))
    seg: dict[str, list[Any]] = {k: [] for k in ("x", "y", "w", "fill", "node", "gpu", "job", "share", "alpha")}
    txt: dict[str, list[Any]] = {k: [] for k in ("x", "y", "text")}
    for (node, gpu), uses in per_cell.items():
        totals = {t for _, _, t in uses if t}
        if len(totals) > 1:
            raise RequestError(f"{node} GPU {gpu} is given different shard totals {sorted(totals)}")
        total = totals.pop() if totals else 0
        cursor = gpu - 0.45
        used_sum = 0
        whole = [u for u in uses if u[2] == 0 and u[0] is not None]
        if whole and total:
            raise RequestError(f"{node} GPU {gpu} is used both whole and as shards; Slurm allocates one or the other")
        if whole:
            job = whole[0][0]
            seg_row(seg, gpu, node, gpu, 0.9, colour[job] if job else _IDLE, job or "-", "whole GPU", 1.0)
        else:
            for job, used, _t in uses:
                if job is None or not total:
                    continue
                frac = used / total
                seg_row(seg, cursor + 0.9 * frac / 2, node, gpu, 0.9 * frac, colour[job], job,
                        f"{used}/{total} shards", 1.0)
                cursor += 0.9 * frac
                used_sum += used
            if total and used_sum > total:
                raise RequestError(f"{node} GPU {gpu}: shard jobs use {used_sum} of only {total} shards")
            free = 0.45 + gpu - cursor
            if free > 1e-9:
                seg_row(seg, cursor + free / 2, node, gpu, free, _IDLE, "-",
                        f"{total - used_sum}/{total} shards free" if total else "idle", 1.0)
            if total:
                txt["x"].append(gpu)
                txt["y"].append(node)
                txt["text"].append(f"{used_sum}/{total}")
    height = 120 + 46 * max(len(node_names), 1)
    fig = plotting.figure(title=title, width=width, height=height,
                          x_range=(-0.6, max_gpu + 0.6), y_range=list(reversed(node_names)),
                          tools="hover,save,reset", toolbar_location="above")
    r = fig.rect(x="x", y="y", width="w", height=0.8, fill_color="fill", line_color="#FFFFFF",
                 fill_alpha="alpha", source=models.ColumnDataSource(seg), name="cells")
    fig.text(x="x", y="y", text="text", source=models.ColumnDataSource(txt), text_align="center",
             text_baseline="middle", text_font_size="10px", text_color="#222222", name="shard_labels")
    fig.xaxis.ticker = list(range(max_gpu + 1))
    fig.xaxis.axis_label = "GPU index"
    fig.grid.visible = False
    hover = fig.select_one(models.HoverTool)
    hover.renderers = [r]
    hover.tooltips = [("node", "@node"), ("GPU", "@gpu"), ("job", "@job"), ("use", "@share")]
    for k, job in enumerate(jobs):  # a small key along the top
        fig.scatter(x=[-0.5 + 0.9 * k], y=[node_names[0]], marker="square", size=0, fill_color=colour[job],
                    legend_label=f"job {job}")
    if jobs:
        fig.legend.orientation = "horizontal"
        fig.legend.location = "top_left"
        fig.legend.label_text_font_size = "10px"
        fig.add_layout(fig.legend[0], "above")
    return fig


def seg_row(seg: dict[str, list[Any]], x: float, node: str, gpu: int, w: float, fill: str, job: str,
            share: str, alpha: float) -> None:
    seg["x"].append(x)
    seg["y"].append(node)
    seg["w"].append(w)
    seg["fill"].append(fill)
    seg["node"].append(node)
    seg["gpu"].append(gpu)
    seg["job"].append(job)
    seg["share"].append(share)
    seg["alpha"].append(alpha)
