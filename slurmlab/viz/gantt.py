"""The Gantt chart of a time-slicing run: one row per process, one bar per measured run.

Takes anything shaped like :class:`slurmlab.experiments.timeslice_result.TimesliceResult` (viz does not
import the experiments room): its labels, its runs per process as ``(n, 2)`` arrays of ns on the shared
clock, the window and the classification. :func:`timeslice_page` puts the result's own table above the
chart in one standalone page, written by :func:`slurmlab.viz.export.figure_html`.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any, Protocol

from slurmlab.core.palette import CATEGORICAL
from slurmlab.viz._bokeh import bokeh
from slurmlab.viz.export import figure_html

__all__ = ["FIRST_VIEW_RUNS", "RunLog", "ensure_available", "first_view_ms", "gantt_figure", "timeslice_page"]

_FEATURE = "the time-slicing Gantt chart"
# runs (of all processes together) the first view shows: a 2 s window of 1 ms slices is 2,000 bars, a barcode at
# any width, while some 40 are a few rounds whose turns can be read; the wheel zooms out to the whole window
FIRST_VIEW_RUNS = 40


class RunLog(Protocol):
    """What the chart needs of a time-slicing result."""

    @property
    def labels(self) -> Sequence[str]: ...
    @property
    def runs(self) -> Sequence[Any]: ...  # per process, an (n, 2) int64 array of run start/end ns
    @property
    def window(self) -> tuple[int, int]: ...
    @property
    def classification(self) -> str: ...


class ShownRunLog(RunLog, Protocol):
    """A result that also describes itself as HTML (its measured table)."""

    def _repr_html_(self) -> str: ...


def ensure_available(feature: str = _FEATURE) -> None:
    """Raise :class:`~slurmlab.errors.MissingExtraError` (naming ``slurmlab[viz]``) now if bokeh is missing.

    For a caller about to spend minutes measuring before it draws.
    """
    bokeh("plotting", feature)


def gantt_figure(result: RunLog, *, max_runs_per_process: int = 20000, width: int = 900) -> Any:
    """A Bokeh figure: one row per process, a bar per measured run (ms since T0)."""
    plotting = bokeh("plotting", _FEATURE)
    models = bokeh("models", _FEATURE)
    labels = list(result.labels)
    t0 = result.window[0]
    whole_ms = (result.window[1] - t0) / 1e6
    shown_ms = first_view_ms(result)
    part = "" if shown_ms >= whole_ms else f"; the first {_ms(shown_ms)} ms of {_ms(whole_ms)} ms shown"
    fig = plotting.figure(
        title=f"measured runs — {result.classification}{part} (the wheel zooms, drag pans, ⟲ goes back)",
        y_range=list(reversed(labels)),
        # panning stops at the window's ends; reset returns to this first view
        x_range=models.Range1d(0, shown_ms, bounds=(0, whole_ms)),
        x_axis_label="ms since T0 (measured)",
        height=80 + 40 * len(labels),
        width=width,
        tools="xpan,xwheel_zoom,box_zoom,reset,hover",
        active_drag="xpan",
        active_scroll="xwheel_zoom",  # Bokeh leaves the wheel to the page unless told
        tooltips=[("process", "@label"), ("start ms", "@left{0.000}"), ("length µs", "@length{0.0}")],
    )
    for i, (label, runs) in enumerate(zip(labels, result.runs, strict=True)):
        shown = runs[:max_runs_per_process]
        src = models.ColumnDataSource(
            {
                "left": (shown[:, 0] - t0) / 1e6,
                "right": (shown[:, 1] - t0) / 1e6,
                "label": [label] * len(shown),
                "length": (shown[:, 1] - shown[:, 0]) / 1e3,
            }
        )
        fig.hbar(
            y="label",
            left="left",
            right="right",
            height=0.7,
            source=src,
            color=CATEGORICAL[i % len(CATEGORICAL)],
        )
    return fig


def first_view_ms(result: RunLog, runs: int = FIRST_VIEW_RUNS) -> float:
    """Where the chart's first view ends (ms since T0): the end of the ``runs``-th run of all processes together,
    or the whole window when there are fewer."""
    t0, t1 = result.window
    ends = sorted(int(end) for process in result.runs for end in process[:, 1][: runs + 1])
    last = ends[runs - 1] if len(ends) >= runs else t1
    return max(min(last, t1) - t0, 1) / 1e6


def _ms(value: float) -> str:
    return f"{value:,.0f}" if value >= 100 else f"{value:.3g}"


def timeslice_page(result: ShownRunLog, title: str = "slurmlab timeslice") -> str:
    """One standalone HTML page (BokehJS inlined): the result's measured table, then its Gantt chart."""
    models = bokeh("models", "the HTML page with a Gantt chart")
    layouts = bokeh("layouts", "the HTML page with a Gantt chart")
    layout = layouts.column(models.Div(text=result._repr_html_()), gantt_figure(result))
    return figure_html(layout, title)
