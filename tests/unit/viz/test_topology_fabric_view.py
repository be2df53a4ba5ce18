"""The topology figure draws a switched fabric as GPUs joined to one NVSwitch node, keeps direct meshes as pair
chords, and marks a GPU whose links `nvidia-smi nvlink -s` shows inactive or slow."""

from __future__ import annotations

import re

import pytest
from figure_data import renderer_data as data
from shared_paths import smi_capture as read

from slurmlab.viz.glyphs import drawn

pytest.importorskip("bokeh", reason="the viz extra (bokeh) is not installed")

from slurmlab.core.gpu.smi import parse_nvlink_status, parse_topo_matrix
from slurmlab.core.gpu.topology import Topology
from slurmlab.viz.topology_view import topology_figure


def h100(inactive: tuple[int, ...] = ()) -> Topology:
    text = read("nvlink-status-i0-h100-80gb-hbm3.txt")
    for n in inactive:
        text = re.sub(rf"(Link {n}: )[\d.]+ GB/s", r"\1<inactive>", text)
    return parse_topo_matrix(read("topo-8x-h100-sxm-nv18-no-nics-spaces.txt")).with_nvlink_status(
        parse_nvlink_status(text)
    )


def test_switched_fabric_is_one_switch_with_a_spoke_per_gpu() -> None:
    fig = topology_figure(h100())
    spokes = data(fig, "nvlinks")
    assert spokes["a"] == [f"GPU{i}" for i in range(8)] and set(spokes["b"]) == {"NVSwitch"}
    assert set(spokes["links"]) == {18} and all("450 GB/s per direction" in b for b in spokes["bw"])
    assert data(fig, "nvswitch")["name"] == ["NVSwitch"]
    # each GPU's hover says 18 links, not the 126 the pair cells add up to
    assert data(fig, "gpus")["nvlinks"] == [18] * 8
    assert "via NVSwitch" in fig.title.text
    assert drawn(fig, "link_faults") is None


def test_direct_mesh_keeps_its_pair_chords() -> None:
    fig = topology_figure(parse_topo_matrix(read("topo-4x-gh200-cray-ex-nv6-gpu-numa-id.txt")))
    chords = data(fig, "nvlinks")
    assert len(chords["a"]) == 6 and "NVSwitch" not in chords["b"]
    assert all(b.startswith("150 GB/s per direction") for b in chords["bw"])
    assert drawn(fig, "nvswitch") is None and data(fig, "gpus")["nvlinks"] == [18] * 4


def test_a_degraded_gpu_is_marked_and_labelled() -> None:
    fig = topology_figure(h100(inactive=(3, 11)))
    faults = data(fig, "link_faults")
    assert faults["gpu"] == ["GPU0"] and faults["label"] == ["2 of 18 links inactive"]
    assert faults["inactive"] == [[3, 11]] and faults["slow"] == [[]]
    spokes = data(fig, "nvlinks")
    assert spokes["dash"][0] == "dashed" and set(spokes["dash"][1:]) == {"solid"}
    assert spokes["links"][0] == 16 and "400 GB/s" in spokes["bw"][0]
    gpus = data(fig, "gpus")
    assert gpus["link_state"][0] == "2 of 18 links inactive" and gpus["link_state"][1] == "not read"
    texts = [
        t for r in fig.renderers if hasattr(r.glyph, "text") for t in (r.data_source.data.get("text") or [])
    ]
    assert any("red dashed ring = NVLinks inactive or slow" in str(t) for t in texts)
