"""What a Bokeh figure draws, read back by renderer name (for tests of the viz room)."""

from __future__ import annotations

from typing import Any


def renderer_data(fig: Any, name: str) -> dict[str, list[Any]]:
    """The data source columns of the renderer called ``name``; fails the test when there is none."""
    r = fig.select_one({"name": name})
    assert r is not None, f"no renderer named {name}"
    return dict(r.data_source.data)
