"""Bokeh views of MIG: layouts (:func:`mig_figure`) and the catalogue of what can still be carved
(:func:`mig_catalogue_figure`).

Layout: per GPU, a compute row (7 slices) over a memory row (8 slices). Slice ``i`` of compute sits above memory
slice ``i`` (the 8th memory slice has no compute slice), so a GPU instance at placement ``start:size`` is one
coloured block: its compute slices above, its memory slices below; under the rows, what can still be carved.
Renderers are named ``slots`` (empty grid cells), ``instances`` (one row per block part), ``labels`` and
``room``.
"""

from __future__ import annotations

from collections.abc import Iterable
from typing import Any

from slurmlab.core.gpu.mig import GpuInstance, MigCatalogue, MigLayout, ProfileRoom
from slurmlab.core.palette import (
    BACKGROUND,
    BLACK,
    CATEGORICAL,
    INK,
    INK_FAINT,
    INK_SOFT,
    MIG_FREE,
    MIG_TAKEN,
    MIG_UNKNOWN,
    OUTLINE,
    WHITE,
)
from slurmlab.viz._bokeh import bokeh

__all__ = ["mig_catalogue_figure", "mig_figure"]

_ROW_H = 0.9  # height of a compute or memory row
_GPU_H = 2.6  # vertical space per GPU


def mig_figure(
    layout: MigLayout, highlight: Iterable[Any] = (), *, title: str | None = None, width: int = 860
) -> Any:
    """A Bokeh figure of ``layout``, titled with the GPU model the input names (or the models its geometry fits),
    with what can still be carved written under each GPU.

    ``highlight`` holds ``(gpu, gi_id)`` or ``(gpu, "start:size")`` pairs, MIG UUIDs or profile names; the
    matching instances get a thick outline and keep their profile colour. Each block's hover names its slice the
    one way slurmlab names it everywhere (``GPU 0 · 3g.71gb @ 4:4 · GI 2``, see
    :func:`~slurmlab.core.gpu.mig.mig_slice_label`).

    In a notebook a MIG layout needs no call: ``alloc.mig()``, ``slurmlab.mig("mig-lgi.txt")`` or
    ``slurmlab.mig(profile="h200-mig")`` evaluated alone draws this figure. To place it yourself:
    ``mig_figure(**alloc.mig("node1").figure_args())`` or ``mig_figure(MigLayout.from_spec("H200-141GB",
    {0: ["3g.71gb", "3g.71gb"]}))``, then ``bokeh.io.show`` or :func:`slurmlab.viz.save_html`.
    """
    plotting = bokeh("plotting", "the MIG view")
    models = bokeh("models", "the MIG view")
    hot = {id(i) for i in layout.matching(highlight)}
    notes = list(layout.notes)
    if any(i.placement_inferred for i in layout.instances()):
        notes.append("hatched = placement inferred (the source does not print placements)")
    fig, y_top = _blank_figure(plotting, layout, title, width, notes)

    cols = _Columns()
    for row, g in enumerate(layout.gpus):
        top = -row * _GPU_H
        cols.add_gpu_grid(g.index, g.model, top, layout.compute_slices, layout.memory_slices)
        for inst in g.instances:
            cols.add_instance(g.index, inst, id(inst) in hot, layout.compute_slices, top)

    _draw(fig, models, cols, layout.memory_slices)
    room = [
        (g.index, -row * _GPU_H - 2.08, " ".join(layout.room_lines(g.index)[1:]).strip())
        for row, g in enumerate(layout.gpus)
    ]
    fig.text(
        x=[-2.1] * len(room),
        y=[y for _g, y, _t in room],
        text=[t for _g, _y, t in room],
        text_font_size="11px",
        text_color=INK,
        text_baseline="middle",
        name="room",
    )
    if notes:
        fig.text(
            x=[-2.1] * len(notes),
            y=[y_top - 0.2 - 0.3 * i for i in range(len(notes))],
            text=notes,
            text_font_size="11px",
            text_color=INK_SOFT,
            text_baseline="middle",
        )
    return fig


def _blank_figure(
    plotting: Any, layout: MigLayout, title: str | None, width: int, notes: list[str]
) -> tuple[Any, float]:
    """The empty figure, one band per GPU plus room for the notes on top; and its top."""
    n_gpus = max(len(layout.gpus), 1)
    head = title or (f"MIG layout — {layout.model_label}" if layout.model_label else "MIG layout")
    if not layout.complete:
        head += " (partial capture)"
    y_top = 0.85 + 0.3 * len(notes)
    height = int(60 + 170 * n_gpus + 55 * len(notes))
    fig = plotting.figure(
        title=head,
        width=width,
        height=height,
        x_range=(-2.2, layout.memory_slices + 0.2),
        y_range=(-_GPU_H * n_gpus + 0.25, y_top),
        tools="hover,save,reset",
        toolbar_location="above",
    )
    fig.axis.visible = False
    fig.grid.visible = False
    fig.outline_line_color = None
    fig.title.text_font_size = "15px"
    return fig, y_top


def _rows(top: float) -> tuple[float, float]:
    """The y of a GPU's compute row and memory row."""
    return top - _ROW_H / 2, top - _ROW_H * 1.5 - 0.08


class _Columns:
    """The data sources of the figure, filled GPU by GPU."""

    def __init__(self) -> None:
        self.slots: dict[str, list[Any]] = {k: [] for k in ("x", "y", "w", "kind", "gpu", "slice")}
        self.blocks: dict[str, list[Any]] = {
            k: []
            for k in (
                "x",
                "y",
                "w",
                "h",
                "fill",
                "line",
                "lw",
                "hatch",
                "gpu",
                "gi",
                "profile",
                "placement",
                "part",
                "cis",
                "uuid",
                "highlighted",
                "inferred",
                "slice",
            )
        }
        self.labels: dict[str, list[Any]] = {k: [] for k in ("x", "y", "text", "size")}
        self.side: dict[str, list[Any]] = {k: [] for k in ("x", "y", "text")}
        self.colour: dict[str, str] = {}  # profile -> fill, in order of appearance

    def add_gpu_grid(self, index: int, model: str | None, top: float, n_c: int, n_m: int) -> None:
        """The row titles and the empty cells of one GPU."""
        y_c, y_m = _rows(top)
        self.side["x"] += [-2.1, -2.1, -2.1]
        self.side["y"] += [top + 0.22, y_c, y_m]
        name = f"GPU {index}" + (f" · {model}" if model else "")
        self.side["text"] += [name, f"  compute slices ({n_c})", f"  memory slices ({n_m})"]
        for kind, y, count in (("compute", y_c, n_c), ("memory", y_m, n_m)):
            for s in range(count):
                self.slots["x"].append(s + 0.5)
                self.slots["y"].append(y)
                self.slots["w"].append(1.0)
                self.slots["kind"].append(kind)
                self.slots["gpu"].append(index)
                self.slots["slice"].append(s)

    def add_instance(self, gpu: int, inst: GpuInstance, hot: bool, n_c: int, top: float) -> None:
        """A placed GPU instance: its compute block above its memory block, and their labels (an instance
        without a placement is not drawn)."""
        if inst.start is None or inst.size is None:
            return
        fill = self.colour.setdefault(inst.profile, CATEGORICAL[len(self.colour) % len(CATEGORICAL)])
        y_c, y_m = _rows(top)
        comp = inst.compute_range(n_c)
        cis = (
            ", ".join(
                f"CI {'?' if ci.ci_id is None else ci.ci_id} {ci.name}" + (f" {ci.uuid}" if ci.uuid else "")
                for ci in inst.compute_instances
            )
            or "-"
        )
        uuid = inst.uuid or next((ci.uuid for ci in inst.compute_instances if ci.uuid), None) or "-"
        parts = [("memory", inst.start, inst.size, y_m)]
        if len(comp):
            parts.insert(0, ("compute", comp.start, len(comp), y_c))
        blocks = self.blocks
        for part, start, size, y in parts:
            blocks["x"].append(start + size / 2)
            blocks["y"].append(y)
            blocks["w"].append(size - 0.08)
            blocks["h"].append(_ROW_H - 0.1)
            blocks["fill"].append(fill)
            blocks["line"].append(BLACK if hot else WHITE)
            blocks["lw"].append(5 if hot else 1.5)
            blocks["hatch"].append("/" if inst.placement_inferred else " ")
            blocks["gpu"].append(gpu)
            blocks["gi"].append("-" if inst.gi_id is None else str(inst.gi_id))
            blocks["profile"].append(inst.profile)
            blocks["placement"].append(inst.placement + (" (inferred)" if inst.placement_inferred else ""))
            blocks["part"].append(part)
            blocks["cis"].append(cis)
            blocks["uuid"].append(uuid)
            blocks["highlighted"].append(hot)
            blocks["inferred"].append(inst.placement_inferred)
            blocks["slice"].append(inst.label)
        # the block shows the parts of the slice's one name the grid does not: its profile and GI id
        gi = "" if inst.gi_id is None else f"GI {inst.gi_id}"
        self._label(
            inst.start + inst.size / 2,
            y_m,
            inst.profile if inst.size < 2 else f"{inst.profile}\n{gi}".strip(),
            "10px" if inst.size < 2 else "12px",
        )
        if len(comp) and inst.compute_instances and len(inst.compute_instances) > 1:
            self._label(comp.start + len(comp) / 2, y_c, f"{len(inst.compute_instances)} CIs", "11px")

    def _label(self, x: float, y: float, text: str, size: str) -> None:
        self.labels["x"].append(x)
        self.labels["y"].append(y)
        self.labels["text"].append(text)
        self.labels["size"].append(size)


def _draw(fig: Any, models: Any, cols: _Columns, n_m: int) -> None:
    """The grid, the instance blocks and their labels, the row titles and the slice numbers, with hover."""
    fig.rect(
        x="x",
        y="y",
        width="w",
        height=_ROW_H - 0.1,
        fill_color=BACKGROUND,
        line_color=OUTLINE,
        source=models.ColumnDataSource(cols.slots),
        name="slots",
    )
    r = fig.rect(
        x="x",
        y="y",
        width="w",
        height="h",
        fill_color="fill",
        line_color="line",
        line_width="lw",
        hatch_pattern="hatch",
        hatch_color=WHITE,
        hatch_alpha=0.3,
        source=models.ColumnDataSource(cols.blocks),
        name="instances",
    )
    fig.text(
        x="x",
        y="y",
        text="text",
        text_font_size="size",
        source=models.ColumnDataSource(cols.labels),
        text_align="center",
        text_baseline="middle",
        text_color=WHITE,
        text_font_style="bold",
        name="labels",
    )
    fig.text(
        x="x",
        y="y",
        text="text",
        source=models.ColumnDataSource(cols.side),
        text_baseline="middle",
        text_font_size="12px",
        text_color=INK,
        text_align="left",
    )
    fig.text(
        x=[s + 0.5 for s in range(n_m)],
        y=[0.52] * n_m,
        text=[str(s) for s in range(n_m)],
        text_align="center",
        text_baseline="middle",
        text_font_size="10px",
        text_color=INK_FAINT,
    )
    fig.text(
        x=[-2.1],
        y=[0.52],
        text=["slice"],
        text_baseline="middle",
        text_font_size="10px",
        text_color=INK_FAINT,
    )
    hover = fig.select_one(models.HoverTool)
    hover.renderers = [r]
    hover.tooltips = [
        ("slice", "@slice"),
        ("GPU instance", "@gi (@profile)"),
        ("placement", "@placement"),
        ("part", "@part"),
        ("compute instances", "@cis"),
        ("UUID", "@uuid"),
    ]


# the catalogue: per profile a row of instance boxes (free ones filled) and a strip of memory slices with every
# allowed placement; x from -9 (labels) over the boxes (0..4) to the strip (5..5+memory slices)
_LABEL_X = -9.0
_BOX_STEP = 0.55
_STRIP_X = 5.0


def mig_catalogue_figure(catalogue: MigCatalogue, *, title: str | None = None, width: int = 1000) -> Any:
    """A Bokeh figure of what can still be carved on each GPU: per profile, its instances free/total (filled
    boxes are free), its memory and SMs where ``-lgip`` gives them, and every allowed placement on the memory
    slices (``-lgipp``), green where an instance could go now, grey where taken, blue where the source does
    not say (``-lgip``/``-lgipp`` alone).

    ``mig_catalogue_figure(read_mig_capture(text, "lgip.txt").catalogue())`` for a capture, or
    ``mig_catalogue_figure(layout.catalogue())`` for the room a layout leaves. Renderers are named ``counts``,
    ``placements`` and ``rows``.
    """
    plotting = bokeh("plotting", "the MIG catalogue view")
    models = bokeh("models", "the MIG catalogue view")
    n_rows = len(catalogue.rows) + len(catalogue.gpus)
    head = title or (
        "MIG profiles: what can still be carved"
        + (f" — {catalogue.model}" if catalogue.model else "")
        + (f" ({catalogue.source})" if catalogue.source else "")
    )
    notes = list(catalogue.notes)
    if any(r.free_starts is None for r in catalogue.rows):
        notes.append(
            "blue = allowed placement, the source does not say whether it is free; green = free now; "
            "grey = taken"
        )
    top = 1.2 + 0.45 * len(notes)
    fig = plotting.figure(
        title=head,
        width=width,
        height=int(90 + 30 * n_rows + 20 * len(notes)),
        x_range=(_LABEL_X - 0.2, _STRIP_X + catalogue.memory_slices + 0.3),
        y_range=(-n_rows - 0.2, top),
        tools="hover,save,reset",
        toolbar_location="above",
    )
    fig.axis.visible = False
    fig.grid.visible = False
    fig.outline_line_color = None
    fig.title.text_font_size = "15px"
    counts: dict[str, list[Any]] = {k: [] for k in ("x", "y", "fill", "gpu", "profile", "state")}
    places: dict[str, list[Any]] = {
        k: [] for k in ("x", "y", "w", "fill", "gpu", "profile", "placement", "state")
    }
    rows: dict[str, list[Any]] = {k: [] for k in ("x", "y", "text", "style")}
    y = 0.0
    for gpu in catalogue.gpus:
        y -= 1
        rows["x"].append(_LABEL_X)
        rows["y"].append(y)
        rows["text"].append(f"GPU {gpu}")
        rows["style"].append("bold")
        for r in catalogue.of(gpu):
            y -= 1
            _catalogue_row(r, y, counts, places, rows)
    fig.rect(
        x="x",
        y="y",
        width=_BOX_STEP - 0.1,
        height=0.7,
        fill_color="fill",
        line_color=WHITE,
        source=models.ColumnDataSource(counts),
        name="counts",
    )
    strip = fig.rect(
        x="x",
        y="y",
        width="w",
        height=0.7,
        fill_color="fill",
        line_color=WHITE,
        source=models.ColumnDataSource(places),
        name="placements",
    )
    fig.text(
        x="x",
        y="y",
        text="text",
        text_font_style="style",
        source=models.ColumnDataSource(rows),
        text_baseline="middle",
        text_font_size="12px",
        text_color=INK,
        name="rows",
    )
    n_m = catalogue.memory_slices
    fig.text(
        x=[_STRIP_X + s + 0.5 for s in range(n_m)],
        y=[-0.35] * n_m,
        text=[str(s) for s in range(n_m)],
        text_align="center",
        text_baseline="middle",
        text_font_size="10px",
        text_color=INK_FAINT,
    )
    fig.text(
        x=[0.0, _STRIP_X],
        y=[0.15, 0.15],
        text=["instances (filled = free)", "placements on memory slices"],
        text_baseline="middle",
        text_font_size="11px",
        text_color=INK_SOFT,
    )
    if notes:
        fig.text(
            x=[_LABEL_X] * len(notes),
            y=[top - 0.35 - 0.4 * i for i in range(len(notes))],
            text=notes,
            text_font_size="11px",
            text_color=INK_SOFT,
            text_baseline="middle",
        )
    hover = fig.select_one(models.HoverTool)
    hover.renderers = [strip]
    hover.tooltips = [
        ("GPU", "@gpu"),
        ("profile", "@profile"),
        ("placement", "@placement"),
        ("now", "@state"),
    ]
    return fig


def _catalogue_row(
    r: ProfileRoom,
    y: float,
    counts: dict[str, list[Any]],
    places: dict[str, list[Any]],
    rows: dict[str, list[Any]],
) -> None:
    """One profile: its label, its instance boxes and its placements on the memory strip."""
    extra = ", ".join(
        x
        for x in (
            f"{r.memory_gib:g} GiB" if r.memory_gib is not None else "",
            f"{r.sm} SMs" if r.sm is not None else "",
        )
        if x
    )
    count = "" if r.free is None else f"  {r.free}/{'?' if r.total is None else r.total} free"
    rows["x"].append(_LABEL_X)
    rows["y"].append(y)
    rows["text"].append(f"  {r.label}{count}" + (f"  ({extra})" if extra else ""))
    rows["style"].append("normal")
    for k in range(r.total or 0):
        state = "unknown" if r.free is None else ("free" if k < r.free else "taken")
        counts["x"].append(k * _BOX_STEP + _BOX_STEP / 2)
        counts["y"].append(y)
        counts["fill"].append({"free": MIG_FREE, "taken": MIG_TAKEN, "unknown": MIG_UNKNOWN}[state])
        counts["gpu"].append(r.gpu)
        counts["profile"].append(r.profile)
        counts["state"].append(state)
    for start in r.starts:
        size = r.size or 1
        state = "unknown" if r.free_starts is None else ("free" if start in r.free_starts else "taken")
        places["x"].append(_STRIP_X + start + size / 2)
        places["y"].append(y)
        places["w"].append(size - 0.12)
        places["fill"].append({"free": MIG_FREE, "taken": MIG_TAKEN, "unknown": MIG_UNKNOWN}[state])
        places["gpu"].append(r.gpu)
        places["profile"].append(r.profile)
        places["placement"].append(f"{start}:{size}")
        places["state"].append(state)
