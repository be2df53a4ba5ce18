"""What a Bokeh figure draws, read back by kind (for tests of the viz room)."""

from __future__ import annotations

from typing import Any

from slurmlab.viz.glyphs import drawn


def renderer_data(fig: Any, kind: str) -> dict[str, list[Any]]:
    """The data columns of what ``fig`` draws of ``kind`` (a renderer of that name, or that kind's rows of a layer);
    fails the test when it draws none."""
    data = drawn(fig, kind)
    assert data is not None, f"the figure draws nothing of kind {kind}"
    return data


def highlighted_gpus(fig: Any) -> set[int]:
    """The indices of the GPUs a topology figure highlights."""
    gpus = renderer_data(fig, "gpus")
    return {i for i, h in zip(gpus["index"], gpus["highlighted"], strict=True) if h}
