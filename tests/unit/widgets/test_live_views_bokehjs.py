"""The live Bokeh views (jupyter_bokeh's ``BokehModel``) draw with the page's BokehJS and load none of their own, so
slurmlab sends BokehJS inline before the first of them, once per kernel: the explorer in the cell's output area
before its widget, the panel's usage chart in the chart's own Output before the view (one output area renders in
order). The browser check is tests/browser/test_live_bokeh_views.py; this is the fast one."""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

import pytest

pytest.importorskip("ipywidgets")
pytest.importorskip("bokeh")
pytest.importorskip("jupyter_bokeh")

from slurmlab.core.gpu.usage import UsageSample, UsageTable
from slurmlab.viz import notebook
from slurmlab.widgets.explorer import TopologyExplorer
from slurmlab.widgets.panel_usage import UsageSection

WIDGET_VIEW = "application/vnd.jupyter.widget-view+json"


@pytest.fixture
def fresh_kernel() -> Iterator[None]:
    """A kernel that has sent no BokehJS yet (and leaves the next test the same)."""
    notebook.resend_bokehjs()
    yield
    notebook.resend_bokehjs()


def _table(job_id: str) -> UsageTable:
    return UsageTable(
        job_id, "sstat", (UsageSample("step 1.0", 1.0, 42.0), UsageSample("step 1.0", 2.0, 40.0))
    )


def _chart_outputs(section: UsageSection) -> tuple[dict[str, Any], ...]:
    summary, holder = section.widget.children
    assert "slurmlab-usage-chart" in holder._dom_classes
    return tuple(holder.outputs)


@pytest.mark.usefixtures("fresh_kernel")
def test_the_first_usage_chart_carries_bokehjs_before_its_view_and_the_next_does_not() -> None:
    first = UsageSection(object(), lambda: None)  # type: ignore[arg-type]
    first._draw(_table("3"))
    loader, view = _chart_outputs(first)
    page = loader["data"]["text/html"]
    assert "slurmlab-bokehjs" in page and "<script" in page and "Bokeh" in page
    assert WIDGET_VIEW in view["data"]
    second = UsageSection(object(), lambda: None)  # type: ignore[arg-type]
    second._draw(_table("4"))
    (only,) = _chart_outputs(second)
    assert WIDGET_VIEW in only["data"]


@pytest.mark.usefixtures("fresh_kernel")
def test_the_explorer_shows_bokehjs_before_its_widget_once_per_kernel(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    from IPython import display as ipd
    from jupyter_bokeh import BokehModel

    shown: list[Any] = []  # what goes into the cell's output area (the figures go into the explorer's Output)
    monkeypatch.setattr(
        ipd, "display", lambda obj, **kw: None if isinstance(obj, BokehModel) else shown.append(obj)
    )
    TopologyExplorer(profiles=["dgx-h100"], n=2)._ipython_display_()
    assert len(shown) == 2, shown
    assert "slurmlab-bokehjs" in shown[0].data and "<script" in shown[0].data
    assert WIDGET_VIEW in shown[1]
    shown.clear()
    TopologyExplorer(profiles=["dgx-h100"], n=2)._ipython_display_()
    assert len(shown) == 1 and WIDGET_VIEW in shown[0], shown
