"""The live usage chart: one line per series, new samples streamed (never the whole data again)."""

from __future__ import annotations

from slurmlab.core.gpu.usage import UsageSample, UsageTable
from slurmlab.viz.usage_chart import UsageChart


def _table(n: int, source: str = "nvml", series: tuple[str, ...] = ("n1 GPU 0",)) -> UsageTable:
    return UsageTable(
        "5",
        source,
        tuple(UsageSample(s, float(t), float(10 * t % 100), 5.0, 80.0) for t in range(n) for s in series),
    )


def test_each_series_is_a_line_and_update_streams_only_new_samples() -> None:
    chart = UsageChart(_table(3))
    assert set(chart.sources) == {"n1 GPU 0"}
    data = chart.sources["n1 GPU 0"].data
    assert data["util"] == [0.0, 10.0, 20.0] and data["t"] == [0.0, 1000.0, 2000.0]
    assert chart.update(_table(3)) == 0
    assert chart.update(_table(5, series=("n1 GPU 0", "n1 GPU 1"))) == 2 + 5
    assert chart.sources["n1 GPU 0"].data["util"] == [0.0, 10.0, 20.0, 30.0, 40.0]
    assert len(chart.sources["n1 GPU 1"].data["t"]) == 5
    assert chart.figure.y_range.end == 105 and "NVML" in chart.figure.title.text


def test_the_sandbox_chart_says_it_shows_cpu_and_has_no_100_cap() -> None:
    chart = UsageChart(_table(2, source="sstat", series=("step 7.0",)))
    assert "this machine has no GPU" in chart.figure.title.text
    assert "CPU" in chart.figure.yaxis[0].axis_label
    four_cpus = UsageTable("5", "sstat", (UsageSample("step 7.0", 9.0, 400.0, None, None),))
    chart.update(four_cpus)
    assert chart.figure.y_range.end >= 400.0  # CPU % passes 100 with a second CPU: the axis follows


def test_an_idle_jobs_cpu_axis_still_shows_one_whole_cpu() -> None:
    # a job that only sleeps uses ~0.3 % of a CPU: an automatic axis would read 0-1 under "100 = one CPU"
    idle = UsageTable(
        "5", "sstat", tuple(UsageSample("step 7.0", float(t), 0.3, None, None) for t in range(4))
    )
    chart = UsageChart(idle)
    assert "100 = one CPU" in chart.figure.yaxis[0].axis_label
    assert (chart.figure.y_range.start, chart.figure.y_range.end) == (0, 105)


def test_the_chart_saves_as_standalone_html() -> None:
    from bokeh.embed import file_html
    from bokeh.resources import INLINE

    page = file_html(UsageChart(_table(4)).figure, INLINE, "usage")
    assert "n1 GPU 0" in page and "slurmlab-usage-chart" in page
