"""The NVLink layer of the topology view: pair chords for a direct mesh, one NVSwitch node with a spoke per GPU
for a switched fabric, and the red marks of GPUs whose links ``nvidia-smi nvlink -s`` showed inactive or slow.

Each adds rows to the figure's layers that :func:`slurmlab.viz.topology_view.topology_figure` made, at the ring
positions it laid out: kinds ``nvlinks`` (in the ``links`` layer), ``nvswitch`` and ``link_faults`` (in the
``nodes`` layer). Their texts go into the figure's one :class:`~slurmlab.viz.glyphs.Labels` glyph.
"""

from __future__ import annotations

import math

from slurmlab.core.gpu.nvlink import NvlinkFabric
from slurmlab.core.gpu.topology import Topology
from slurmlab.core.palette import FAILED, HIGHLIGHT, NVLINK, NVSWITCH, WHITE
from slurmlab.viz.glyphs import Labels, Layer

__all__ = ["draw_link_faults", "draw_nvlinks", "draw_switch"]


def _bw_text(fabric: NvlinkFabric, gbps: float | None) -> str:
    gen = fabric.generation
    return (
        f"{gbps:g} GB/s per direction ({gen.name})"
        if gbps and gen
        else (f"{gbps:g} GB/s per direction" if gbps else "generation unknown")
    )


def draw_switch(
    links: Layer,
    nodes: Layer,
    topo: Topology,
    fabric: NvlinkFabric,
    gpu_pos: dict[str, tuple[float, float, float]],
    highlight: set[int],
    labels: Labels,
) -> None:
    """A switched fabric: one NVSwitch node in the middle, a spoke from every NVLink GPU (``nvlinks``), red and
    dashed for a GPU with inactive or slow links."""
    full = fabric.links_per_gpu or max(fabric.pair_links.values())
    for g in fabric.nvlink_gpus():
        name = f"GPU{g}"
        x0, y0, _ = gpu_pos[name]
        count = fabric.gpu_links(g)
        state = topo.link_state(g)
        fault = state is not None and not state.healthy
        label = f"NV{count}"
        bw = _bw_text(fabric, fabric.gpu_gbps(g)) + " to any peer"
        links.add(
            "nvlinks",
            f"{name} – NVSwitch: {label}",
            [("bandwidth", bw)],
            xs=[x0, 0.0],
            ys=[y0, 0.0],
            a=name,
            b="NVSwitch",
            links=count,
            width=1.5 + 6.5 * count / max(full, 1),
            label=label,
            bw=bw,
            colour=FAILED if fault else (HIGHLIGHT if g in highlight else NVLINK),
            dash="dashed" if fault else "solid",
            alpha=0.6,
        )
    nodes.add(
        "nvswitch",
        "NVSwitch",
        [("why switched", fabric.reason)],
        x=0.0,
        y=0.0,
        name="NVSwitch",
        why=fabric.reason,
        marker="square",
        size=52,
        fill=NVSWITCH,
    )
    labels.add(0.0, 0.0, "NVSwitch", size="8px", style="bold", colour=WHITE, align="center")


def draw_link_faults(
    nodes: Layer, topo: Topology, gpu_pos: dict[str, tuple[float, float, float]], labels: Labels
) -> None:
    """A red dashed ring and a label on each GPU whose links ``nvidia-smi nvlink -s`` showed inactive or slow."""
    for s in topo.link_states:
        if s.healthy or f"GPU{s.gpu}" not in gpu_pos:
            continue
        x, y, angle = gpu_pos[f"GPU{s.gpu}"]
        label, detail = s.fault_label() or "", s.detail()
        nodes.add(
            "link_faults",
            f"GPU{s.gpu}",
            [("NVLink", label), ("", detail)],
            x=x,
            y=y,
            gpu=f"GPU{s.gpu}",
            label=label,
            detail=detail,
            inactive=list(s.inactive),
            slow=[n for n, _ in s.slow],
            marker="circle",
            size=62,
            fill_alpha=0.0,
            line=FAILED,
            lw=3,
            dash="dashed",
        )
        # the label sits just outside the ring, beside its GPU
        labels.add(
            x + 0.33 * math.cos(angle),
            y + 0.33 * math.sin(angle),
            label,
            size="10px",
            style="bold",
            colour=FAILED,
            align="center",
        )


def draw_nvlinks(
    links: Layer,
    topo: Topology,
    fabric: NvlinkFabric,
    gpu_pos: dict[str, tuple[float, float, float]],
    highlight: set[int],
) -> None:
    """NVLink chords of a direct mesh, wider for more bonded links; a chord between two highlighted GPUs is
    highlighted."""
    nv_links = topo.nvlink_edges()
    most = max((lk.nvlinks for lk in nv_links), default=1)
    for link in nv_links:
        (x0, y0, _), (x1, y1, _) = gpu_pos[link.a], gpu_pos[link.b]
        bw = _bw_text(fabric, fabric.pair_gbps(int(link.a[3:]), int(link.b[3:])))
        hot = int(link.a[3:]) in highlight and int(link.b[3:]) in highlight
        links.add(
            "nvlinks",
            f"{link.a} – {link.b}: {link.label}",
            [("bandwidth", bw)],
            xs=[x0, x1],
            ys=[y0, y1],
            a=link.a,
            b=link.b,
            links=link.nvlinks,
            width=1.5 + 6.5 * link.nvlinks / most,
            label=link.label,
            bw=bw,
            colour=HIGHLIGHT if hot else NVLINK,
            alpha=0.55,
        )
