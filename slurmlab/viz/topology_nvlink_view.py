"""The NVLink layer of the topology view: pair chords for a direct mesh, one NVSwitch node with a spoke per GPU
for a switched fabric, and the red marks of GPUs whose links ``nvidia-smi nvlink -s`` showed inactive or slow.

Each draws into a figure that :func:`slurmlab.viz.topology_view.topology_figure` made, at the ring positions it
laid out; renderers are named ``nvlinks``, ``nvswitch`` and ``link_faults``.
"""

from __future__ import annotations

import math
from typing import Any

from slurmlab.core.gpu.topology import NvlinkFabric, Topology
from slurmlab.viz._bokeh import HIGHLIGHT

__all__ = ["draw_link_faults", "draw_nvlinks", "draw_switch"]

_FAULT = "#D62728"
_NVLINK = "#2F6B3A"


def _bw_text(fabric: NvlinkFabric, gbps: float | None) -> str:
    gen = fabric.generation
    return f"{gbps:g} GB/s per direction ({gen.name})" if gbps and gen else (
        f"{gbps:g} GB/s per direction" if gbps else "generation unknown")


def draw_switch(
    fig: Any, models: Any, topo: Topology, fabric: NvlinkFabric, gpu_pos: dict[str, tuple[float, float, float]],
    highlight: set[int],
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
    nv_r = fig.multi_line(xs="xs", ys="ys", line_width="width", line_color="colour", line_dash="dash",
                          line_alpha=0.6, source=models.ColumnDataSource(nv), name="nvlinks")
    fig.add_tools(models.HoverTool(renderers=[nv_r], line_policy="interp",
                                   tooltips=[("NVLink", "@a – @b: @label"), ("bandwidth", "@bw")]))
    sw = models.ColumnDataSource({"x": [0.0], "y": [0.0], "name": ["NVSwitch"], "why": [fabric.reason]})
    sw_r = fig.scatter(x="x", y="y", marker="square", size=52, fill_color="#4D4D4D", line_color="#FFFFFF",
                       line_width=2, source=sw, name="nvswitch")
    fig.text(x="x", y="y", text="name", source=sw, text_align="center", text_baseline="middle",
             text_font_size="8px", text_font_style="bold", text_color="#FFFFFF")
    fig.add_tools(models.HoverTool(renderers=[sw_r], tooltips=[("", "@name"), ("why switched", "@why")]))


def draw_link_faults(fig: Any, models: Any, topo: Topology, gpu_pos: dict[str, tuple[float, float, float]]) -> None:
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
    src = models.ColumnDataSource(fl)
    r = fig.scatter(x="x", y="y", marker="circle", size=62, fill_color=None, line_color=_FAULT, line_width=3,
                    line_dash="dashed", source=src, name="link_faults")
    fig.text(x="tx", y="ty", text="label", source=src, text_align="center", text_baseline="middle",
             text_font_size="10px", text_font_style="bold", text_color=_FAULT)
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
    nv_r = fig.multi_line(xs="xs", ys="ys", line_width="width", line_color="colour", line_alpha=0.55,
                          source=models.ColumnDataSource(nv), name="nvlinks")
    fig.add_tools(models.HoverTool(renderers=[nv_r], line_policy="interp",
                                   tooltips=[("NVLink", "@a – @b: @label"), ("bandwidth", "@bw")]))
