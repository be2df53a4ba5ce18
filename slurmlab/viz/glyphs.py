"""Cheap Bokeh renderers for figures of many kinds of small things (the topology view).

Why not ``bokeh.plotting``'s glyph methods: each makes five glyph models (normal, selection, nonselection, hover,
muted), and every renderer costs Bokeh some 9,000 Python calls to build, however few rows it has. So a figure here
draws with few renderers: :class:`Layer` puts several kinds of thing (GPUs, NICs, the NVSwitch, ...) in one renderer
whose rows carry their own look and hover text, and :class:`Labels` puts every text in one Text glyph.
:func:`drawn` reads back what a figure draws of one kind, whichever renderer holds it.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from typing import Any

from slurmlab.core.palette import INK

__all__ = ["Labels", "Layer", "add_glyph", "col", "drawn"]

# the hover text of a layer's row: its title, then its lines. Bokeh escapes both fields (no {safe}): a device
# name or a reason read from nvidia-smi or Slurm is text, never markup
_TIP = (
    '<div style="font-weight:bold">@title</div>'
    f'<div style="white-space:pre-line;max-width:420px;color:{INK}">@tip</div>'
)


def col(name: str) -> dict[str, str]:
    """A glyph property read from the data source's column ``name`` (explicit, never a guessed colour name)."""
    return {"field": name}


def add_glyph(
    fig: Any, models: Any, kind: str, data: dict[str, list[Any]], *, name: str | None = None, **props: Any
) -> Any:
    """A renderer of one ``models.<kind>`` glyph over ``data`` (selection and muted looks left to the browser)."""
    source = models.ColumnDataSource(data)
    return fig.add_glyph(source, getattr(models, kind)(**props), name=name)


class Layer:
    """The rows of one renderer that draws several kinds of thing.

    Column ``kind`` says what a row is; the look columns (given with their defaults) style each row; ``title`` and
    ``tip`` are its hover text; any other column holds what one kind records about its rows, ``None`` on rows of
    other kinds. Rows are drawn in the order added, so a later kind sits on top.
    """

    def __init__(self, looks: Mapping[str, Any]) -> None:
        self._looks = dict(looks)
        self.data: dict[str, list[Any]] = {"kind": [], "title": [], "tip": [], **{k: [] for k in looks}}

    @property
    def _rows(self) -> int:
        return len(self.data["kind"])

    def add(self, kind: str, title: str, tip: Iterable[tuple[str, object]] = (), **values: Any) -> None:
        """One row of ``kind``: hover text ``title`` and ``label: value`` lines, its looks and its facts."""
        for key in values.keys() - self.data.keys():
            self.data[key] = [None] * self._rows
        row = {
            **self._looks,
            **values,
            "kind": kind,
            "title": title,
            "tip": "\n".join(f"{label}: {value}" if label else str(value) for label, value in tip),
        }
        for key, column in self.data.items():
            column.append(row.get(key))

    def draw(
        self, fig: Any, models: Any, glyph: str, *, name: str, line_policy: str | None = None, **props: Any
    ) -> Any:
        """The renderer ``name`` of ``glyph`` over these rows, with one hover tool for all (none when empty)."""
        if not self._rows:
            return None
        renderer = add_glyph(fig, models, glyph, self.data, name=name, **props)
        extra = {"line_policy": line_policy} if line_policy else {}
        fig.add_tools(models.HoverTool(renderers=[renderer], tooltips=_TIP, **extra))
        return renderer


class Labels:
    """Every text of a figure, drawn by one Text glyph (renderer ``labels``) with size, weight, colour and
    alignment per row; drawn last, so texts sit above the shapes."""

    _KEYS = ("x", "y", "text", "size", "style", "colour", "align", "baseline")

    def __init__(self) -> None:
        self.data: dict[str, list[Any]] = {k: [] for k in self._KEYS}

    def add(
        self,
        x: float,
        y: float,
        text: str,
        *,
        size: str = "11px",
        style: str = "normal",
        colour: str = INK,
        align: str = "left",
        baseline: str = "middle",
    ) -> None:
        for key, value in zip(self._KEYS, (x, y, text, size, style, colour, align, baseline), strict=True):
            self.data[key].append(value)

    def draw(self, fig: Any, models: Any) -> None:
        if self.data["x"]:
            add_glyph(
                fig,
                models,
                "Text",
                self.data,
                name="labels",
                x=col("x"),
                y=col("y"),
                text=col("text"),
                text_font_size=col("size"),
                text_font_style=col("style"),
                text_color=col("colour"),
                text_align=col("align"),
                text_baseline=col("baseline"),
            )


def drawn(fig: Any, kind: str) -> dict[str, list[Any]] | None:
    """What ``fig`` draws of ``kind``: the data columns of the renderer named ``kind``, or of the rows of that kind
    in a :class:`Layer`'s renderer; ``None`` when it draws none."""
    for renderer in getattr(fig, "renderers", ()):
        source = getattr(renderer, "data_source", None)
        if source is None:
            continue
        data = source.data
        if renderer.name == kind:
            return dict(data)
        kinds = data.get("kind")
        if isinstance(kinds, list) and "title" in data and kind in kinds:
            keep = [i for i, k in enumerate(kinds) if k == kind]
            return {key: [values[i] for i in keep] for key, values in data.items()}
    return None
