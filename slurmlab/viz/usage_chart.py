"""A small live chart of an allocation's usage: utilisation over time, one line per GPU (or step's tasks).

:class:`UsageChart` draws a :class:`~slurmlab.core.gpu.usage.UsageTable` and then takes new tables with
:meth:`UsageChart.update`, which streams only the samples it has not drawn yet into each line's
``ColumnDataSource`` (in a notebook that is a small message, not a redraw). A saved notebook keeps the last
state. Bokeh is imported when a chart is made, never before.
"""

from __future__ import annotations

from typing import Any

from slurmlab.core.gpu.usage import UsageTable
from slurmlab.core.palette import CATEGORICAL
from slurmlab.viz._bokeh import bokeh

__all__ = ["ROLLOVER", "UsageChart"]

ROLLOVER = 1800  # points kept per line in the browser (an hour at 2 s)
FULL_SCALE = (
    105.0  # the axis always shows 100 % (one GPU busy, or one CPU): an idle job is a line near 0, not
)
# a line across an automatic 0-1 axis whose ticks read like whole CPUs


class UsageChart:
    """``figure`` is the Bokeh figure; ``sources`` one ColumnDataSource per series."""

    def __init__(self, table: UsageTable, *, width: int = 520, height: int = 200) -> None:
        plotting = bokeh("plotting", "the usage chart")
        models = bokeh("models", "the usage chart")
        cpu = table.source == "sstat"
        self.figure: Any = plotting.figure(
            width=width,
            height=height,
            x_axis_type="datetime",
            toolbar_location=None,
            title=table.label,
            y_axis_label="CPU % (100 = one CPU)" if cpu else "GPU utilisation %",
        )
        self.figure.y_range.start = 0
        self.figure.y_range.end = FULL_SCALE
        self._cpu = cpu
        self.figure.add_tools(
            models.HoverTool(tooltips=[("", "@series"), ("util", "@util{0.0} %"), ("memory", "@mem MiB")])
        )
        self.figure.css_classes = ["slurmlab-usage-chart"]
        self.sources: dict[str, Any] = {}
        self._drawn: dict[str, float] = {}  # the time of the last sample drawn, per series
        self.update(table)

    def _line(self, series: str) -> Any:
        models = bokeh("models", "the usage chart")
        source = models.ColumnDataSource(data={"t": [], "util": [], "mem": [], "series": []})
        colour = CATEGORICAL[len(self.sources) % len(CATEGORICAL)]
        self.figure.line("t", "util", source=source, color=colour, line_width=2, legend_label=series)
        self.sources[series] = source
        self._drawn[series] = float("-inf")
        if self.figure.legend:
            self.figure.legend.location = "top_left"
            self.figure.legend.label_text_font_size = "8pt"
        return source

    def update(self, table: UsageTable) -> int:
        """Stream the samples of ``table`` not drawn yet; returns how many were added."""
        if table.label != self.figure.title.text:
            self.figure.title.text = table.label
        added = 0
        for row in table.rows:
            samples = table.series(row.series)
            source = self.sources.get(row.series) or self._line(row.series)
            new = [s for s in samples if s.t > self._drawn[row.series]]
            if not new:
                continue
            source.stream(
                {
                    "t": [s.t * 1000.0 for s in new],
                    "util": [s.util for s in new],
                    "mem": [s.mem_used_mb if s.mem_used_mb is not None else float("nan") for s in new],
                    "series": [row.series] * len(new),
                },
                rollover=ROLLOVER,
            )
            self._drawn[row.series] = new[-1].t
            added += len(new)
            if self._cpu:
                # CPU % passes 100 with every further CPU busy: the axis grows with the peak, never below 100
                peak = max(s.util for s in new) * 1.05
                if peak > self.figure.y_range.end:
                    self.figure.y_range.end = peak
        return added
