"""The allocation panel's usage section: a live chart of utilisation per GPU (or the job's tasks on the sandbox).

While the allocation runs, the section starts its sampler (:mod:`slurmlab.slurm.allocation.sampler`, a worker
thread: nothing waits in the kernel) and, on each render of the panel (the one widget thread), streams the new
samples into the chart (:mod:`slurmlab.viz.usage_chart`) and rewrites the summary line. Without bokeh or
jupyter_bokeh the section shows the summary table alone. The sampler stops with the allocation, when the panel
stops following it, and at interpreter exit.

Stable CSS classes: ``slurmlab-usage`` (the section) with ``slurmlab-usage-src-nvml`` / ``-nvidia-smi`` / ``-sstat``,
``slurmlab-usage-summary``, ``slurmlab-usage-chart``.
"""

from __future__ import annotations

import html
from collections.abc import Callable
from typing import TYPE_CHECKING, Any

from slurmlab._extras import require
from slurmlab.core.gpu.usage import UsageTable
from slurmlab.errors import MissingExtraError
from slurmlab.slurm.allocation.sampler import UsageSampler, sampler_for

if TYPE_CHECKING:
    from slurmlab.slurm.allocation import Allocation
    from slurmlab.viz.usage_chart import UsageChart

__all__ = ["AUTO_START", "UsageSection", "summary_html"]

AUTO_START = True  # start sampling when a running allocation's panel renders


def summary_html(table: UsageTable) -> str:
    """One line: what is measured, then each series' latest and peak utilisation (or why there is nothing)."""
    esc = html.escape
    parts = [
        f"{esc(r.series)}: {r.last_util:.0f} % now, peak {r.peak_util:.0f} %"
        + (f", {r.mem_used_mb:,.0f} MiB" if r.mem_used_mb is not None else "")
        for r in table.rows[:8]
    ]
    said = table.error and f"<span style='color:#dc3545'>stopped: {esc(table.error)}</span>"
    text = "; ".join(parts) or esc(table.note or "no samples yet")
    return (
        f"<div class='slurmlab-usage-summary'><b>Usage</b> <span style='color:#666'>({esc(table.label)})"
        f"</span>: {text}{' — ' + said if said else ''}</div>"
    )


def _html_output(text: str) -> dict[str, Any]:
    return {"output_type": "display_data", "data": {"text/html": text, "text/plain": ""}, "metadata": {}}


class UsageSection:
    """The usage part of one panel. ``widget`` goes into the panel; :meth:`render` runs on the updater thread."""

    def __init__(self, alloc: Allocation, mark_dirty: Callable[[], None]) -> None:
        w = require("ipywidgets", feature="the allocation panel", extra="widgets")
        self._w = w
        self.alloc = alloc
        self.mark_dirty = mark_dirty
        self.summary = w.HTML(value="")
        self.widget = w.VBox([self.summary], layout=w.Layout(display="none"))
        self.widget.add_class("slurmlab-usage")
        self.sampler: UsageSampler | None = None
        self.chart: UsageChart | None = None
        self._unlisten: Callable[[], None] | None = None
        self._no_chart = False
        self._source_class: str | None = None  # slurmlab-usage-src-nvml / -nvidia-smi / -sstat

    def _attach(self, alloc: Allocation) -> UsageSampler:
        if self.sampler is not None and self.sampler.alloc is alloc:
            return self.sampler
        self.close()  # the panel now follows another job (a switch): the old sampler ends
        self.alloc, self.chart, self._no_chart = alloc, None, False
        self.widget.children = (self.summary,)
        self.sampler = sampler_for(alloc)
        self._unlisten = self.sampler.listen(self.mark_dirty)
        return self.sampler

    def render(self, alloc: Allocation) -> None:
        if not (AUTO_START and (alloc.running or (self.sampler is not None and self.sampler.alloc is alloc))):
            return
        sampler = self._attach(alloc)
        if alloc.running and not sampler.alive and not sampler.started:
            sampler.start()
        table = sampler.table()
        value = summary_html(table)
        if self.summary.value != value:
            self.summary.value = value
        if self.widget.layout.display != "":
            self.widget.layout.display = ""
        source_class = f"slurmlab-usage-src-{table.source}" if table.source else None
        if source_class != self._source_class:
            if self._source_class:
                self.widget.remove_class(self._source_class)
            if source_class:
                self.widget.add_class(source_class)
            self._source_class = source_class
        if table.samples:
            self._draw(table)
        if alloc.ended:
            self.close()

    def _draw(self, table: UsageTable) -> None:
        if self.chart is not None:
            self.chart.update(table)
            return
        if self._no_chart:
            return
        try:
            from slurmlab.viz.usage_chart import UsageChart

            model = require("jupyter_bokeh", feature="the live usage chart", extra="viz").BokehModel
            self.chart = UsageChart(table)
        except MissingExtraError:
            self._no_chart = True  # the summary line stays
            return
        self.widget.children = (self.summary, self._chart_output(model(self.chart.figure)))

    def _chart_output(self, view: Any) -> Any:
        """``view`` (jupyter_bokeh's live view) in an Output of its own, BokehJS first where the kernel has not
        sent it yet: the view draws with the page's BokehJS (``window.Bokeh``) and loads none itself, and one
        output area renders its outputs in order (the trusted scripts run before the view is made), where
        sibling widgets come up in no set order. Built on this (updater) thread: no ``with output:`` capture."""
        from slurmlab.viz.notebook import bokehjs_once

        loader = bokehjs_once(self.chart.figure) if self.chart is not None else ""
        outputs = (
            [_html_output(f"<div class='slurmlab-bokehjs' style='display:none'>{loader}</div>")]
            if loader
            else []
        )
        outputs.append({"output_type": "display_data", "data": view._repr_mimebundle_(), "metadata": {}})
        holder = self._w.Output()
        holder.outputs = tuple(outputs)
        holder.add_class("slurmlab-usage-chart")
        return holder

    def close(self) -> None:
        """Stop listening and sampling (the panel no longer shows this allocation)."""
        if self._unlisten is not None:
            self._unlisten()
            self._unlisten = None
        if self.sampler is not None:
            self.sampler.stop()
