"""The topology figure's data: GPUs grouped by NUMA, NVLink edges and widths, PCIe, NICs, highlights, CPUs."""

from __future__ import annotations

import math
from typing import Any

import pytest
from figure_data import renderer_data as data
from shared_paths import require_shared

from slurmlab.viz.glyphs import drawn

pytest.importorskip("bokeh", reason="the viz extra (bokeh) is not installed")

from slurmlab.core.gpu.smi import SmiParseWarning, parse_topo_matrix
from slurmlab.core.gpu.topology import Topology
from slurmlab.viz.topology_view import layout_positions, topology_figure


def topo(name: str, **kw: Any) -> Topology:
    return parse_topo_matrix(require_shared("nvidia-smi", name).read_text(), **kw)


def test_dgx1_edges_widths_and_highlight() -> None:
    t = topo("topo-dgx1-v100-8gpu-4mlx5-tabs.txt")
    fig = topology_figure(t, highlight_gpus=[0, 3])
    nv = data(fig, "nvlinks")
    pairs = {
        frozenset((a, b)): (n, w)
        for a, b, n, w in zip(nv["a"], nv["b"], nv["links"], nv["width"], strict=True)
    }
    assert len(pairs) == 16
    assert pairs[frozenset(("GPU0", "GPU3"))][0] == 2 and pairs[frozenset(("GPU0", "GPU1"))][0] == 1
    assert pairs[frozenset(("GPU0", "GPU3"))][1] > pairs[frozenset(("GPU0", "GPU1"))][1]  # NV2 drawn wider
    assert frozenset(("GPU0", "GPU5")) not in pairs  # SYS is not an NVLink edge
    gpus = data(fig, "gpus")
    assert gpus["name"] == [f"GPU{i}" for i in range(8)]
    assert [n for n, h in zip(gpus["name"], gpus["highlighted"], strict=True) if h] == ["GPU0", "GPU3"]
    assert "50 GB/s per direction" in nv["bw"][nv["links"].index(2)]
    assert drawn(fig, "pcie") is None  # only on demand
    nics = data(fig, "nics")
    assert nics["device"] == ["mlx5_0", "mlx5_2", "mlx5_1", "mlx5_3"]
    links = data(fig, "nic_links")
    assert sorted(zip(links["nic"], links["gpu"], strict=True))[:2] == [
        ("mlx5_0", "GPU0"),
        ("mlx5_0", "GPU1"),
    ]


def test_pcie_relations_on_demand() -> None:
    t = topo("topo-dgx1-v100-8gpu-4mlx5-tabs.txt")
    pc = data(topology_figure(t, show_pcie=True), "pcie")
    assert len(pc["a"]) == 28 - 16 and set(pc["path"]) == {"SYS"}
    mp = topo("topo-mp-dgx1-pcie-only-matrix.txt")
    kinds = data(topology_figure(mp, show_pcie=True), "pcie")["path"]
    assert sorted(set(kinds)) == ["PHB", "PIX", "SYS"] and len(kinds) == 28


def test_gpus_are_grouped_by_numa_on_the_ring() -> None:
    t = topo("topo-dgx-a100-mlx5-header-numa-3175.txt")
    lay = layout_positions(t)
    angle = {name: a for name, (_x, _y, a) in lay["gpus"].items()}
    # GPUs of one NUMA node are neighbours; the groups are separated by a gap
    step = lay["step"]
    assert math.isclose(angle["GPU1"] - angle["GPU0"], step)
    groups = t.numa_groups()
    assert list(groups) == ["NUMA 3", "NUMA 1", "NUMA 7", "NUMA 5"]
    assert math.isclose(angle["GPU2"] - angle["GPU1"], 2 * step)
    fig = topology_figure(t)
    sectors = data(fig, "numa_groups")
    assert sectors["label"] == list(groups) and sectors["cpus"][0] == "48-63,176-191"
    assert len(set(data(fig, "gpus")["fill"])) == 4  # one colour per NUMA node


def test_task_cpu_sets_are_coloured_and_stray_cpus_called_out() -> None:
    t = topo("topo-8x-h100-sxm-nv18-no-nics-spaces.txt")
    fig = topology_figure(t, highlight_gpus=[4], task_cpus={"task 0": range(48, 52), "task 1": [200]})
    cpus = data(fig, "cpus")
    owned = {c for c, task in zip(cpus["cpu"], cpus["task"], strict=True) if task == "task 0"}
    assert owned == {48, 49, 50, 51}
    assert "task 1" not in cpus["task"]  # CPU 200 is not local to any GPU
    assert len(cpus["cpu"]) == 192
    texts = [
        t for r in fig.renderers if hasattr(r.glyph, "text") for t in (r.data_source.data.get("text") or [])
    ]
    assert any("200 outside the GPUs' CPU affinity" in str(x) for x in texts)


def test_partial_and_empty_affinity_captures_still_draw() -> None:
    with pytest.warns(SmiParseWarning):
        partial = topo("topo-16gpu-nvswitch-nv6-10mlx5-dgx2-class-PARTIAL.txt")
    fig = topology_figure(partial)
    assert "partial capture" in fig.title.text
    # every pair shows NV6 (15 x 6 = 90 links on a V100 that has 6): switched, so one spoke per GPU into the
    # NVSwitch node instead of the 4 * 15 - 6 pair chords the partial matrix shows
    spokes = data(fig, "nvlinks")
    assert (
        len(data(fig, "gpus")["name"]) == 16 and len(spokes["a"]) == 16 and set(spokes["b"]) == {"NVSwitch"}
    )
    pli = topo(
        "topo-8x-h100-princeton-pli-nv18-6nics-empty-cpu-affinity.txt", gpu_model="NVIDIA H100 80GB HBM3"
    )
    g = data(topology_figure(pli), "gpus")
    assert g["cpus"][:4] == ["not shown"] * 4 and g["nics"][0] == "mlx5_0, mlx5_1 (PIX)"
    gh = data(topology_figure(topo("topo-4x-gh200-cray-ex-nv6-gpu-numa-id.txt")), "gpus")
    assert gh["gpu_numa"] == ["4", "12", "20", "28"]
