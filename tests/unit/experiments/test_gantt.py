"""The Gantt chart of a time-slicing result, drawn by the viz room (experiments never import it)."""

from __future__ import annotations

import numpy as np
import pytest

from slurmlab.experiments.analysis import analyse

pytest.importorskip("bokeh")

MS = 1_000_000


def round_robin(n: int, slice_ns: int, rounds: int) -> list[np.ndarray]:
    """n processes taking turns: process i runs [k*n + i, k*n + i + 1) slices."""
    return [
        np.array(
            [[(k * n + i) * slice_ns, (k * n + i + 1) * slice_ns] for k in range(rounds)], dtype=np.int64
        )
        for i in range(n)
    ]


def test_gantt_draws_one_bar_per_run() -> None:
    from slurmlab.viz.gantt import gantt_figure

    r = analyse(round_robin(3, MS, 5), (0, 15 * MS), labels=["a", "b", "c"])
    fig = gantt_figure(r)
    bars = [g for g in fig.renderers if g.glyph.__class__.__name__ == "HBar"]
    assert len(bars) == 3
    assert len(bars[1].data_source.data["left"]) == 5
    assert bars[1].data_source.data["left"][0] == pytest.approx(1.0)  # ms since T0
    # a long log is cut per process, not dropped
    short = gantt_figure(r, max_runs_per_process=2)
    assert all(len(g.data_source.data["left"]) == 2 for g in short.renderers)


def test_the_page_holds_the_measured_table_and_the_chart_with_bokehjs_inlined() -> None:
    from slurmlab.viz.gantt import timeslice_page

    r = analyse(round_robin(2, MS, 4), (0, 8 * MS), labels=["a", "b"])
    page = timeslice_page(r)
    assert page.lstrip().lower().startswith("<!doctype html>")
    assert "measured share of D" in page and "measured runs" in page
    assert "cdn.bokeh.org" not in page  # inline resources: clusters often have no internet


def test_a_long_window_opens_readable_with_the_wheel_zooming() -> None:
    from bokeh.models import Range1d, WheelZoomTool

    from slurmlab.viz.gantt import gantt_figure

    # lesson 05's CPU run: 2 s of 1 ms slices for 2 processes, 2,000 bars
    r = analyse(round_robin(2, MS, 1000), (0, 2000 * MS), labels=["a", "b"])
    fig = gantt_figure(r)
    active = fig.toolbar.active_scroll
    assert isinstance(active, WheelZoomTool) and active.dimensions == "width"  # "the wheel zooms" is true
    assert isinstance(fig.x_range, Range1d) and fig.x_range.start == 0
    assert fig.x_range.end == pytest.approx(40.0)  # the first 40 runs (ms), not 2,000 bars
    assert fig.x_range.bounds == (0, pytest.approx(2000.0))  # zoomed out, the whole window
    assert "the first 40 ms of 2,000 ms shown" in fig.title.text
    # a short run is shown whole
    short = gantt_figure(analyse(round_robin(2, MS, 5), (0, 10 * MS), labels=["a", "b"]))
    assert short.x_range.end == pytest.approx(10.0) and "shown" not in short.title.text
