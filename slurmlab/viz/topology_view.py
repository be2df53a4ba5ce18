"""Bokeh view of a node's GPU topology.

GPUs sit on a ring, grouped by NUMA node (shaded sectors). A direct NVLink mesh is drawn as chords whose width
grows with the bonded link count; a switched fabric (NVSwitch, see :mod:`slurmlab.core.gpu.nvlink.fabric`) as
one NVSwitch node in the middle with a spoke from every GPU, since its NV# are paths through the switch, not
cables. GPUs with inactive or slow links (``nvidia-smi nvlink -s``) get a red dashed ring and a label such as
"2 of 18 links inactive". PCIe relations between GPUs appear on demand; NICs sit outside the ring next to their
closest GPUs; below, one bar per NUMA group shows its CPUs with the task CPU sets coloured in. The NVLink layer
is drawn by :mod:`.topology_nvlink_view`.

Five renderers draw it all (see :mod:`.glyphs` for why so few): ``numa_groups`` (sectors), ``links`` (rows of kind
``pcie``, ``nvlinks``, ``nic_links``), ``nodes`` (``nvswitch``, ``nics``, ``link_faults``, ``gpus``,
``task_keys``), ``cpus`` and ``labels``. ``slurmlab.viz.glyphs.drawn(fig, "gpus")`` reads back the data of one
kind, whichever renderer holds it.
"""

from __future__ import annotations

import math
from collections.abc import Iterable, Mapping
from typing import Any

from slurmlab.core.gpu.devices import format_cpu_list
from slurmlab.core.gpu.links import LinkKind
from slurmlab.core.gpu.nvlink import NvlinkFabric
from slurmlab.core.gpu.topology import Topology
from slurmlab.core.palette import (
    BLACK,
    CATEGORICAL,
    EDGE,
    EMPTY,
    HIGHLIGHT,
    INK,
    INK_SOFT,
    LINK_KIND_COLOURS,
    NUMA_FILLS,
    OUTLINE,
    UNKNOWN_LINK,
    WHITE,
)
from slurmlab.viz._bokeh import bokeh
from slurmlab.viz.glyphs import Labels, Layer, add_glyph, col
from slurmlab.viz.topology_nvlink_view import draw_link_faults, draw_nvlinks, draw_switch

__all__ = ["layout_positions", "topology_figure"]

_R = 1.0


def layout_positions(topo: Topology) -> dict[str, Any]:
    """Ring positions: GPU name -> (x, y, angle), plus the angular span of each NUMA group."""
    groups = topo.numa_groups()
    order = [(label, idx) for label, members in groups.items() for idx in members]
    n_groups = len(groups)
    slots = len(order) + (n_groups if n_groups > 1 else 0)
    step = 2 * math.pi / max(slots, 1)
    start = math.pi / 2 + step / 2  # first GPU just left of the top, going anticlockwise
    pos: dict[str, tuple[float, float, float]] = {}
    spans: dict[str, tuple[float, float]] = {}
    slot = 0
    previous: str | None = None
    for label, idx in order:
        if previous is not None and label != previous:
            slot += 1  # an empty slot separates NUMA groups
        angle = start + slot * step
        pos[f"GPU{idx}"] = (_R * math.cos(angle), _R * math.sin(angle), angle)
        lo, hi = spans.get(label, (angle, angle))
        spans[label] = (min(lo, angle), max(hi, angle))
        previous = label
        slot += 1
    return {"gpus": pos, "groups": spans, "step": step}


def _closest_gpus(topo: Topology, nic: str) -> tuple[LinkKind | None, list[str]]:
    """The best link kind from any GPU to ``nic``, and the GPUs that have it."""
    best: LinkKind | None = None
    near: list[str] = []
    for g in topo.gpus:
        link = topo.link(g.name, nic)
        if link is None:
            continue
        if best is None or link.kind.rank < best.rank:
            best, near = link.kind, [g.name]
        elif link.kind is best:
            near.append(g.name)
    return best, near


def _nic_positions(
    topo: Topology, gpu_pos: dict[str, tuple[float, float, float]]
) -> dict[str, tuple[float, float]]:
    wanted: list[tuple[float, str]] = []
    for nic in topo.nics:
        best, near = _closest_gpus(topo, nic.name)
        if not near or best is LinkKind.SYS:
            wanted.append((-math.pi / 2, nic.name))  # far from every GPU: park at the bottom
            continue
        sx = sum(math.cos(gpu_pos[n][2]) for n in near)
        sy = sum(math.sin(gpu_pos[n][2]) for n in near)
        wanted.append((math.atan2(sy, sx) if (sx or sy) else gpu_pos[near[0]][2], nic.name))
    # spread NICs that want the same spot so labels do not collide
    wanted.sort()
    min_gap = min(2 * math.pi / max(len(wanted), 1), math.radians(13))
    placed: list[tuple[float, str]] = []
    for angle, name in wanted:
        if placed and angle - placed[-1][0] < min_gap:
            angle = placed[-1][0] + min_gap
        placed.append((angle, name))
    radius = 1.72
    return {name: (radius * math.cos(a), radius * math.sin(a)) for a, name in placed}


def topology_figure(
    topo: Topology,
    highlight_gpus: Iterable[int] = (),
    task_cpus: Mapping[str, Iterable[int]] | None = None,
    show_pcie: bool = False,
    *,
    title: str | None = None,
    width: int = 820,
) -> Any:
    """A Bokeh figure of ``topo``; ``highlight_gpus`` (indices) and ``task_cpus`` (task -> CPU ids) are marked.

    In a notebook a topology needs no call: ``alloc.topology()`` (every node), ``alloc.explain_binding()`` or
    ``slurmlab.topology(profile="dgx-h100")`` evaluated alone draws this figure. To place it yourself:
    ``topology_figure(**alloc.topology("node1").figure_args())`` or ``topology_figure(**binding.figure_args(node))``.
    """
    plotting = bokeh("plotting", "the topology view")
    models = bokeh("models", "the topology view")
    highlight = {int(i) for i in highlight_gpus}
    tasks = {str(k): frozenset(int(c) for c in v) for k, v in (task_cpus or {}).items()}
    lay = layout_positions(topo)
    gpu_pos: dict[str, tuple[float, float, float]] = lay["gpus"]
    groups = topo.numa_groups()
    group_cpus = _group_cpus(topo, groups)
    show_cpus = any(group_cpus.values())
    fabric = topo.fabric()
    key = _key_lines(topo, fabric, highlight, show_pcie)
    cpu_rows = 0.3 + 0.5 * len(groups) + 0.3 * len(tasks) if show_cpus else 0.0
    fig, y_top = _blank_figure(plotting, topo, fabric, title, width, key, cpu_rows)
    labels = Labels()
    links = Layer({"colour": EDGE, "width": 1.2, "alpha": 1.0, "dash": "solid"})
    nodes = Layer(
        {
            "marker": "circle",
            "size": 11,
            "fill": WHITE,
            "fill_alpha": 1.0,
            "line": WHITE,
            "line_alpha": 1.0,
            "lw": 2.0,
            "dash": "solid",
        }
    )

    _draw_numa_sectors(fig, models, lay, groups, group_cpus, labels)
    if show_pcie:
        _draw_pcie(links, topo, gpu_pos)
    if fabric.switched:
        draw_switch(links, nodes, topo, fabric, gpu_pos, highlight, labels)
    else:
        draw_nvlinks(links, topo, fabric, gpu_pos, highlight)
    _draw_nics(links, nodes, topo, gpu_pos, labels)
    draw_link_faults(nodes, topo, gpu_pos, labels)
    _draw_gpus(nodes, topo, fabric, gpu_pos, highlight, groups, labels)
    cpu_bars = _cpu_bars(nodes, groups, group_cpus, tasks, labels) if show_cpus else None
    links.draw(
        fig,
        models,
        "MultiLine",
        name="links",
        line_policy="interp",
        xs=col("xs"),
        ys=col("ys"),
        line_color=col("colour"),
        line_width=col("width"),
        line_alpha=col("alpha"),
        line_dash=col("dash"),
    )
    nodes.draw(
        fig,
        models,
        "Scatter",
        name="nodes",
        x=col("x"),
        y=col("y"),
        marker=col("marker"),
        size=col("size"),
        fill_color=col("fill"),
        fill_alpha=col("fill_alpha"),
        line_color=col("line"),
        line_alpha=col("line_alpha"),
        line_width=col("lw"),
        line_dash=col("dash"),
    )
    if cpu_bars is not None:
        r = add_glyph(
            fig,
            models,
            "Rect",
            cpu_bars,
            name="cpus",
            x=col("x"),
            y=col("y"),
            width=col("w"),
            height=0.28,
            fill_color=col("fill"),
            line_color=WHITE,
            line_width=0.3 if len(cpu_bars["x"]) > 100 else 1,
        )
        fig.add_tools(
            models.HoverTool(
                renderers=[r], tooltips=[("CPU", "@cpu"), ("group", "@group"), ("task", "@task")]
            )
        )
    for i, line in enumerate(key):
        labels.add(-2.3, y_top - 0.05 - 0.13 * i, line, colour=INK_SOFT, baseline="top")
    labels.draw(fig, models)
    return fig


def _group_cpus(topo: Topology, groups: dict[str, tuple[int, ...]]) -> dict[str, frozenset[int]]:
    """NUMA group -> the CPUs its GPUs have affinity with."""
    group_cpus: dict[str, frozenset[int]] = {}
    for label, members in groups.items():
        cpus: frozenset[int] = frozenset()
        for i in members:
            cpus |= topo.gpu(i).cpu_affinity or frozenset()
        group_cpus[label] = cpus
    return group_cpus


def _key_lines(topo: Topology, fabric: NvlinkFabric, highlight: set[int], show_pcie: bool) -> list[str]:
    """The lines of text in the top left corner that say how to read the figure."""
    nv_all = topo.nvlink_edges()
    key = []
    if fabric.switched:
        links = fabric.links_per_gpu or max(lk.nvlinks for lk in nv_all)
        bw = links * fabric.per_link_gbps if fabric.per_link_gbps else None  # a healthy GPU's figure
        speed = f", {bw:g} GB/s per direction to any peer" if bw else ""
        key.append(f"switched fabric: each GPU's {links} NVLinks go to the NVSwitch{speed}")
    elif nv_all:
        key.append(f"chord width = bonded NVLinks (NV{max(lk.nvlinks for lk in nv_all)} widest)")
    if any(not s.healthy for s in topo.link_states):
        key.append("red dashed ring = NVLinks inactive or slow (nvidia-smi nvlink -s)")
    if show_pcie:
        kinds = sorted({lk.kind for lk in topo.gpu_links() if not lk.is_nvlink}, key=lambda k: k.rank)
        key.append(
            "dashed = PCIe: " + ", ".join(k.value for k in kinds)
            if kinds
            else "no PCIe-only GPU pairs: every pair has NVLink"
        )
    if highlight:
        key.append(f"highlighted: GPU {', '.join(map(str, sorted(highlight)))}")
    if not topo.complete:
        key.append("partial capture: some rows missing")
    return key


def _blank_figure(
    plotting: Any,
    topo: Topology,
    fabric: NvlinkFabric,
    title: str | None,
    width: int,
    key: list[str],
    cpu_rows: float,
) -> tuple[Any, float]:
    """The empty figure, tall enough for the ring, the NICs, the key and ``cpu_rows`` of CPU bars; and its top."""
    y_bottom = -2.1 - cpu_rows
    gen = fabric.generation or topo.nvlink_generation
    head = title or (
        f"{len(topo.gpus)} GPUs"
        + (f" ({topo.gpu_model})" if topo.gpu_model else "")
        + (f", {len(topo.nics)} NICs" if topo.nics else "")
        + (f", {gen.name}" if gen else "")
        + (" via NVSwitch" if fabric.switched else "")
        + ("" if topo.complete else " — partial capture")
    )
    y_top = (2.0 if topo.nics else 1.55) + 0.13 * len(key) + 0.1
    height = int(width * (y_top - y_bottom) / 4.7)
    # no axes (nor their grids): this view would only hide them. Still a figure, which pages find as .bk-Figure
    fig = plotting.figure(
        title=head,
        width=width,
        height=height,
        x_range=(-2.35, 2.35),
        y_range=(y_bottom, y_top),
        x_axis_type=None,
        y_axis_type=None,
        tools="pan,wheel_zoom,reset,save",
        toolbar_location="above",
        match_aspect=True,
        outline_line_color=None,
    )
    fig.title.text_font_size = "15px"
    return fig, y_top


def _draw_numa_sectors(
    fig: Any,
    models: Any,
    lay: dict[str, Any],
    groups: dict[str, tuple[int, ...]],
    group_cpus: dict[str, frozenset[int]],
    labels: Labels,
) -> None:
    """Shaded sectors behind the ring, one per NUMA group (none when the NUMA node is unknown)."""
    step = lay["step"]
    sec: dict[str, list[Any]] = {k: [] for k in ("start", "end", "fill", "label", "cpus", "tx", "ty")}
    for label, (lo, hi) in lay["groups"].items():
        mid = (lo + hi) / 2
        sec["start"].append(lo - step * 0.48)
        sec["end"].append(hi + step * 0.48)
        sec["fill"].append(NUMA_FILLS[list(groups).index(label) % len(NUMA_FILLS)])
        sec["label"].append(label)
        cpus = group_cpus[label]
        sec["cpus"].append(format_cpu_list(cpus) if cpus else "not shown")
        sec["tx"].append(1.36 * math.cos(mid))
        sec["ty"].append(1.36 * math.sin(mid))
    if len(groups) > 1 or next(iter(groups), "") != "NUMA ?":
        add_glyph(
            fig,
            models,
            "AnnularWedge",
            sec,
            name="numa_groups",
            x=0,
            y=0,
            inner_radius=0.55,
            outer_radius=1.27,
            start_angle=col("start"),
            end_angle=col("end"),
            fill_color=col("fill"),
            line_color=OUTLINE,
            fill_alpha=0.8,
        )
        for tx, ty, label in zip(sec["tx"], sec["ty"], sec["label"], strict=True):
            labels.add(tx, ty, label, size="13px", style="bold", align="center")


def _draw_pcie(links: Layer, topo: Topology, gpu_pos: dict[str, tuple[float, float, float]]) -> None:
    """Dashed curves for the GPU pairs that have no NVLink, coloured by PCIe path."""
    for link in topo.gpu_links():
        if link.is_nvlink:
            continue
        (x0, y0, _), (x1, y1, _) = gpu_pos[link.a], gpu_pos[link.b]
        # bow towards the centre so PCIe curves stay apart from NVLink chords
        links.add(
            "pcie",
            f"{link.a} – {link.b}: {link.label}",
            [("", link.kind.description)],
            xs=[x0, (x0 + x1) * 0.3, x1],
            ys=[y0, (y0 + y1) * 0.3, y1],
            a=link.a,
            b=link.b,
            path=link.label,
            colour=LINK_KIND_COLOURS.get(link.kind.value, UNKNOWN_LINK),
            desc=link.kind.description,
            width=1.6,
            alpha=0.8,
            dash="dashed",
        )


def _draw_nics(
    links: Layer, nodes: Layer, topo: Topology, gpu_pos: dict[str, tuple[float, float, float]], labels: Labels
) -> None:
    """NICs outside the ring, with dotted lines to their closest GPUs (none when every path crosses NUMA)."""
    nic_pos = _nic_positions(topo, gpu_pos)
    for nic in topo.nics:
        x, y = nic_pos[nic.name]
        best, close = _closest_gpus(topo, nic.name)
        if best is not None and best is not LinkKind.SYS:
            for gname in close:
                gx, gy, _ = gpu_pos[gname]
                links.add(
                    "nic_links",
                    f"{nic.device} – {gname}: {best.value}",
                    [("", best.description)],
                    xs=[x, gx],
                    ys=[y, gy],
                    nic=nic.name,
                    gpu=gname,
                    path=best.value,
                    dash="dotted",
                )
        closest = f"{', '.join(close)} ({best.value})" if best is not None else "unknown"
        nodes.add(
            "nics",
            f"{nic.name} = {nic.device}",
            [("closest GPUs", closest)],
            x=x,
            y=y,
            name=nic.name,
            device=nic.device,
            closest=closest,
            marker="square",
            size=15,
            line=INK_SOFT,
            lw=1.5,
        )
        labels.add(x, y - 0.13, nic.device, size="10px", colour=INK, align="center", baseline="top")


def _draw_gpus(
    nodes: Layer,
    topo: Topology,
    fabric: NvlinkFabric,
    gpu_pos: dict[str, tuple[float, float, float]],
    highlight: set[int],
    groups: dict[str, tuple[int, ...]],
    labels: Labels,
) -> None:
    """GPU circles on the ring, coloured by NUMA group, with what a person asks about them on hover."""
    group_colour = {label: CATEGORICAL[i % len(CATEGORICAL)] for i, label in enumerate(groups)}
    size = max(34, min(48, 360 // max(len(topo.gpus), 1)))
    for g in topo.gpus:
        x, y, _ = gpu_pos[g.name]
        state = topo.link_state(g.index)
        near = topo.closest_nics(g.index)
        top = [n.device for n, lk in near if lk.kind is near[0][1].kind] if near else []
        hot = g.index in highlight
        facts = {
            "numa": g.numa_label,
            "cpus": format_cpu_list(g.cpu_affinity) if g.cpu_affinity else "not shown",
            "gpu_numa": "-" if g.gpu_numa_id is None else str(g.gpu_numa_id),
            # the links the GPU has (into the switch, or to its peers), never a sum over switched paths
            "nvlinks": fabric.gpu_links(g.index),
            "link_state": "not read" if state is None else (state.fault_label() or "all links up"),
            "nics": f"{', '.join(top)} ({near[0][1].kind.value})" if near else "-",
        }
        tip = [
            ("NUMA", facts["numa"]),
            ("CPU affinity", facts["cpus"]),
            ("GPU NUMA ID", facts["gpu_numa"]),
            ("NVLinks", facts["nvlinks"]),
            ("link state", facts["link_state"]),
            ("closest NICs", facts["nics"]),
        ]
        nodes.add(
            "gpus",
            g.name,
            tip,
            x=x,
            y=y,
            name=g.name,
            index=g.index,
            highlighted=hot,
            **facts,
            marker="circle",
            size=size,
            fill=HIGHLIGHT if hot else group_colour[g.numa_label],
            line=BLACK if hot else WHITE,
            lw=4 if hot else 2,
        )
        labels.add(x, y, g.name, style="bold", colour=WHITE, align="center")


def _cpu_bars(
    nodes: Layer,
    groups: dict[str, tuple[int, ...]],
    group_cpus: dict[str, frozenset[int]],
    tasks: dict[str, frozenset[int]],
    labels: Labels,
) -> dict[str, list[Any]]:
    """The cells of the CPU bars (one per CPU, for renderer ``cpus``); the task keys go into ``nodes``."""
    task_colour = {t: CATEGORICAL[(i + 10) % len(CATEGORICAL)] for i, t in enumerate(tasks)}
    cells: dict[str, list[Any]] = {k: [] for k in ("x", "y", "w", "cpu", "group", "task", "fill")}
    y = -2.3
    x0, span = -1.6, 3.8
    for label in groups:
        cpus = sorted(group_cpus[label])
        if not cpus:
            continue
        w = span / len(cpus)
        labels.add(-2.3, y, label.replace("NUMA ", "N") if len(label) > 10 else label, size="10px")
        labels.add(x0, y + 0.2, f"CPUs {format_cpu_list(cpus)}", size="10px")
        for k, cpu in enumerate(cpus):
            owner = next((t for t, s in tasks.items() if cpu in s), "")
            for column, value in zip(
                cells,
                (x0 + w * (k + 0.5), y, w, cpu, label, owner or "-", task_colour[owner] if owner else EMPTY),
                strict=True,
            ):
                cells[column].append(value)
        y -= 0.5
    local: frozenset[int] = frozenset().union(*group_cpus.values()) if group_cpus else frozenset()
    for t, task_set in tasks.items():
        outside = sorted(task_set - local)
        note = f" — {format_cpu_list(outside)} outside the GPUs' CPU affinity" if outside else ""
        text = f"{t}: CPUs {format_cpu_list(task_set) or '-'}{note}"
        nodes.add(
            "task_keys",
            t,
            [("", text)],
            x=-2.2,
            y=y,
            task=t,
            marker="square",
            size=11,
            fill=task_colour[t],
            line_alpha=0.0,
            lw=0.0,
        )
        labels.add(-2.1, y, text, colour=INK)
        y -= 0.3
    return cells
