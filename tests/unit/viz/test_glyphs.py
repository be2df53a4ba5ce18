"""Layers: several kinds of thing in one renderer, each row with its own look and hover text, read back by kind."""

from __future__ import annotations

import pytest

pytest.importorskip("bokeh", reason="the viz extra (bokeh) is not installed")

from bokeh import models
from bokeh.plotting import figure

import slurmlab
from slurmlab.viz.glyphs import Layer, col, drawn
from slurmlab.viz.topology_view import topology_figure


def _layer() -> Layer:
    layer = Layer({"fill": "#FFFFFF", "size": 10})
    layer.add("gpus", "GPU0", [("NUMA", "NUMA 0"), ("", "no links")], x=0.0, y=0.0, index=0, fill="#0072B2")
    layer.add("nics", "NIC0 = mlx5_0", [("closest GPUs", "GPU0 (PIX)")], x=1.0, y=1.0, device="mlx5_0")
    layer.add("gpus", "GPU1", x=2.0, y=2.0, index=1, size=20)
    return layer


def test_rows_keep_their_own_looks_facts_and_hover_text() -> None:
    data = _layer().data
    assert data["kind"] == ["gpus", "nics", "gpus"]
    assert data["fill"] == ["#0072B2", "#FFFFFF", "#FFFFFF"] and data["size"] == [10, 10, 20]
    # a fact of one kind is None on the rows of the others, whichever row brought it first
    assert data["index"] == [0, None, 1] and data["device"] == [None, "mlx5_0", None]
    assert data["tip"] == ["NUMA: NUMA 0\nno links", "closest GPUs: GPU0 (PIX)", ""]
    assert {len(v) for v in data.values()} == {3}


def test_drawn_reads_one_kind_back_from_a_layer_or_a_named_renderer() -> None:
    fig = figure()
    _layer().draw(fig, models, "Scatter", name="nodes", x=col("x"), y=col("y"), fill_color=col("fill"))
    fig.add_glyph(models.ColumnDataSource({"x": [1], "y": [2]}), models.Scatter(), name="extra")
    gpus = drawn(fig, "gpus")
    assert gpus is not None and gpus["index"] == [0, 1] and gpus["title"] == ["GPU0", "GPU1"]
    assert drawn(fig, "nics") == {
        **{k: [None] for k in gpus},
        "kind": ["nics"],
        "title": ["NIC0 = mlx5_0"],
        "tip": ["closest GPUs: GPU0 (PIX)"],
        "fill": ["#FFFFFF"],
        "size": [10],
        "x": [1.0],
        "y": [1.0],
        "device": ["mlx5_0"],
    }
    assert drawn(fig, "extra") == {"x": [1], "y": [2]}
    assert drawn(fig, "nvswitch") is None and drawn(fig, "nodes") is not None


def test_an_empty_layer_draws_nothing() -> None:
    fig = figure()
    assert Layer({"fill": "#FFFFFF"}).draw(fig, models, "Scatter", name="nodes") is None
    assert fig.renderers == [] and fig.select(models.HoverTool) == []


def test_hover_text_is_escaped_by_bokeh() -> None:
    # {safe} would hand a device name from nvidia-smi to the browser as markup (tests/browser/test_topology_hover)
    fig = figure()
    _layer().draw(fig, models, "Scatter", name="nodes", x=col("x"), y=col("y"))
    (hover,) = fig.select(models.HoverTool)
    assert "@title" in hover.tooltips and "@tip" in hover.tooltips and "safe" not in hover.tooltips


def test_the_topology_figure_draws_with_five_renderers_at_most() -> None:
    # each renderer costs Bokeh ~9,000 Python calls to build: the figure's kinds share layers (issue 14)
    topo = slurmlab.topology(profile="dgx-h100").topology
    fig = topology_figure(topo, highlight_gpus=[0, 1], task_cpus={"task 0": [0, 1]}, show_pcie=True)
    assert [r.name for r in fig.renderers] == ["numa_groups", "links", "nodes", "cpus", "labels"]
    assert len(fig.select(models.HoverTool)) == 3
    assert {k for k in ("gpus", "nvswitch", "task_keys", "nvlinks", "pcie") if drawn(fig, k)} == {
        "gpus",
        "nvswitch",
        "task_keys",
        "nvlinks",
    }  # a switched fabric: every GPU pair has NVLink, no PCIe curve
