"""The NVLink layer of the topology view: pair chords for a direct mesh, one NVSwitch node with a spoke per GPU
for a switched fabric, and the red marks of GPUs whose links ``nvidia-smi nvlink -s`` showed inactive or slow.

Each draws into a figure that :func:`slurmlab.viz.topology_view.topology_figure` made, at the ring positions it
laid out; renderers are named ``nvlinks``, ``nvswitch`` and ``link_faults``. Their texts go into the figure's one
:class:`Labels` glyph. Also here: :func:`add_glyph`, a renderer with one glyph model (see topology_view for why).
"""

from __future__ import annotations

import math
from typing import Any

from slurmlab.core.gpu.topology import NvlinkFabric, Topology
from slurmlab.viz._bokeh import HIGHLIGHT

__all__ = ["Labels", "add_glyph", "col", "draw_link_faults", "draw_nvlinks", "draw_switch"]

_FAULT = "#D62728"
_NVLINK = "#2F6B3A"


def col(name: str) -> dict[str, str]:
    """A glyph property read from the data source's column ``name`` (explicit, never a guessed colour name)."""
    return {"field": name}


def add_glyph(fig: Any, models: Any, kind: str, data: dict[str, list[Any]], *, name: str | None = None,
              **props: Any) -> Any:
    """A renderer of one ``models.<kind>`` glyph over ``data`` (selection and muted looks left to the browser)."""
    source = models.ColumnDataSource(data)
    return fig.add_glyph(source, getattr(models, kind)(**props), name=name)


class Labels:
    """Every text of a figure, drawn by one Text glyph (renderer ``labels``) with size, weight, colour and
    alignment per row; drawn last, so texts sit above the shapes."""

    _KEYS = ("x", "y", "text", "size", "style", "colour", "align", "baseline")

    def __init__(self) -> None:
        self.data: dict[str, list[Any]] = {k: [] for k in self._KEYS}

    def add(self, x: float, y: float, text: str, *, size: str = "11px", style: str = "normal",
            colour: str = "#444444", align: str = "left", baseline: str = "middle") -> None:
        for key, value in zip(self._KEYS, (x, y, text, size, style, colour, align, baseline), strict=True):
            self.data[key].append(value)

    def draw(self, fig: Any, models: Any) -> None:
        if self.data["x"]:
            add_glyph(fig, models, "Text", self.data, name="labels", x=col("x"), y=col("y"), text=col("text"),
                      text_font_size=col("size"), text_font_style=col("style"), text_color=col("colour"),
                      text_align=col("align"), text_baseline=col("baseline"))


def _bw_text(fabric: NvlinkFabric, gbps: float | None) -> str:
    gen = fabric.generation
    return f"{gbps:g} GB/s per direction ({gen.name})" if gbps and gen else (
        f"{gbps:g} GB/s per direction" if gbps else "generation unknown")


def draw_switch(
    fig: Any, models: Any, topo: Topology, fabric: NvlinkFabric, gpu_pos: dict[str, tuple[float, float, float]],
    highlight: set[int], labels: Labels,
) -> None:
    """A switched fabric: one NVSwitch node in the middle, a spoke from every NVLink GPU (``nvlinks``), red and
    dashed for a GPU with inactive or slow links."""
    gpus = fabric.nvlink_gpus()
    full = fabric.links_per_gpu or max(fabric.pair_links.values())
    nv: dict[str, list[Any]] = {k: [] for k in (
        "xs", "ys", "a", "b", "links", "width", "label", "bw", "colour", "dash")}
    for g in gpus:
        name = f"GPU{g}"
        x0, y0, _ = gpu_pos[name]
        links = fabric.gpu_links(g)
        state = topo.link_state(g)
        fault = state is not None and not state.healthy
        nv["xs"].append([x0, 0.0])
        nv["ys"].append([y0, 0.0])
        nv["a"].append(name)
        nv["b"].append("NVSwitch")
        nv["links"].append(links)
        nv["width"].append(1.5 + 6.5 * links / max(full, 1))
        nv["label"].append(f"NV{links}")
        nv["bw"].append(_bw_text(fabric, fabric.gpu_gbps(g)) + " to any peer")
        nv["colour"].append(_FAULT if fault else (HIGHLIGHT if g in highlight else _NVLINK))
        nv["dash"].append("dashed" if fault else "solid")
    nv_r = add_glyph(fig, models, "MultiLine", nv, name="nvlinks", xs=col("xs"), ys=col("ys"),
                     line_width=col("width"), line_color=col("colour"), line_dash=col("dash"), line_alpha=0.6)
    sw_r = add_glyph(fig, models, "Scatter", {"x": [0.0], "y": [0.0], "name": ["NVSwitch"], "why": [fabric.reason]},
                     name="nvswitch", x=col("x"), y=col("y"), marker="square", size=52, fill_color="#4D4D4D",
                     line_color="#FFFFFF", line_width=2)
    labels.add(0.0, 0.0, "NVSwitch", size="8px", style="bold", colour="#FFFFFF", align="center")
    fig.add_tools(models.HoverTool(renderers=[nv_r], line_policy="interp",
                                   tooltips=[("NVLink", "@a – @b: @label"), ("bandwidth", "@bw")]),
                  models.HoverTool(renderers=[sw_r], tooltips=[("", "@name"), ("why switched", "@why")]))


def draw_link_faults(fig: Any, models: Any, topo: Topology, gpu_pos: dict[str, tuple[float, float, float]],
                     labels: Labels) -> None:
    """A red dashed ring and a label on each GPU whose links ``nvidia-smi nvlink -s`` showed inactive or slow."""
    bad = [s for s in topo.link_states if not s.healthy and f"GPU{s.gpu}" in gpu_pos]
    if not bad:
        return
    fl: dict[str, list[Any]] = {k: [] for k in ("x", "y", "tx", "ty", "gpu", "label", "detail", "inactive", "slow")}
    for s in bad:
        x, y, angle = gpu_pos[f"GPU{s.gpu}"]
        fl["x"].append(x)
        fl["y"].append(y)
        # the label sits just outside the ring, beside its GPU
        fl["tx"].append(x + 0.33 * math.cos(angle))
        fl["ty"].append(y + 0.33 * math.sin(angle))
        fl["gpu"].append(f"GPU{s.gpu}")
        fl["label"].append(s.fault_label())
        fl["detail"].append(s.detail())
        fl["inactive"].append(list(s.inactive))
        fl["slow"].append([n for n, _ in s.slow])
    r = add_glyph(fig, models, "Scatter", fl, name="link_faults", x=col("x"), y=col("y"), marker="circle", size=62,
                  fill_color=None, line_color=_FAULT, line_width=3, line_dash="dashed")
    for tx, ty, label in zip(fl["tx"], fl["ty"], fl["label"], strict=True):
        labels.add(tx, ty, label, size="10px", style="bold", colour=_FAULT, align="center")
    fig.add_tools(models.HoverTool(renderers=[r], tooltips=[("GPU", "@gpu"), ("NVLink", "@label"),
                                                            ("", "@detail")]))


def draw_nvlinks(
    fig: Any, models: Any, topo: Topology, fabric: NvlinkFabric, gpu_pos: dict[str, tuple[float, float, float]],
    highlight: set[int],
) -> None:
    """NVLink chords of a direct mesh, wider for more bonded links; a chord between two highlighted GPUs is
    highlighted."""
    nv_links = topo.nvlink_edges()
    most = max((lk.nvlinks for lk in nv_links), default=1)
    nv: dict[str, list[Any]] = {k: [] for k in ("xs", "ys", "a", "b", "links", "width", "label", "bw", "colour")}
    for link in nv_links:
        (x0, y0, _), (x1, y1, _) = gpu_pos[link.a], gpu_pos[link.b]
        nv["xs"].append([x0, x1])
        nv["ys"].append([y0, y1])
        nv["a"].append(link.a)
        nv["b"].append(link.b)
        nv["links"].append(link.nvlinks)
        nv["width"].append(1.5 + 6.5 * link.nvlinks / most)
        nv["label"].append(link.label)
        nv["bw"].append(_bw_text(fabric, fabric.pair_gbps(int(link.a[3:]), int(link.b[3:]))))
        hot = int(link.a[3:]) in highlight and int(link.b[3:]) in highlight
        nv["colour"].append(HIGHLIGHT if hot else _NVLINK)
    nv_r = add_glyph(fig, models, "MultiLine", nv, name="nvlinks", xs=col("xs"), ys=col("ys"),
                     line_width=col("width"), line_color=col("colour"), line_alpha=0.55)
    fig.add_tools(models.HoverTool(renderers=[nv_r], line_policy="interp",
                                   tooltips=[("NVLink", "@a – @b: @label"), ("bandwidth", "@bw")]))
