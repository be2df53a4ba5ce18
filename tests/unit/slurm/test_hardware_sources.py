"""Where topology and MIG come from: files, built-in profiles, the sandbox's hardware file, the NVML report, source
order."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from shared_paths import require_shared

import slurmlab
from slurmlab.core.gpu.captures import topology_from_nvml_report
from slurmlab.core.gpu.hardware_profile import HARDWARE_FILE, parse_hardware
from slurmlab.errors import ParseError, RequestError
from slurmlab.sandbox import load_profile
from slurmlab.sandbox.render import gres_index_map, render_hardware_file
from slurmlab.slurm.hardware_files import profile_data, profile_names, sandbox_hardware
from slurmlab.slurm.probes import _order
from slurmlab.slurm.runner import Runner


def test_builtin_profile_is_the_reported_source() -> None:
    got = slurmlab.topology(profile="dgx-h100")
    assert got.source == "profile" and "dgx-h100" in got.detail
    topo = got.topology
    assert len(topo.gpus) == 8
    assert all(topo.nvlinks(a, b) == 18 for a in range(8) for b in range(8) if a != b)
    assert topo.numa_groups() == {"NUMA 0": (0, 1, 2, 3), "NUMA 1": (4, 5, 6, 7)}
    assert topo.gpu(5).cpu_affinity == frozenset(range(56, 112))
    assert "source: profile" in got.summary()


def test_unknown_profile_names_the_known_ones() -> None:
    with pytest.raises(Exception, match="dgx-h100"):
        slurmlab.topology(profile="no-such-box")


def test_profile_json_file(tmp_path: Path) -> None:
    data = {
        "gpus": [{"index": 0, "numa": 0, "cores": "0-3"}, {"index": 1, "numa": 1, "cores": "4-7"}],
        "nvlink": {"0-1": 4},
        "gpu_model": "RTX 3090",
    }
    path = tmp_path / "box.json"
    path.write_text(json.dumps(data))
    got = slurmlab.topology(path)
    assert got.source == "file" and str(path) in got.detail
    assert got.topology.nvlinks(0, 1) == 4
    assert got.topology.gpu(1).cpu_affinity == frozenset(range(4, 8))


def test_saved_topo_capture() -> None:
    path = require_shared("nvidia-smi", "topo-8x-h100-sxm-nv18-no-nics-spaces.txt")
    got = slurmlab.topology(path)
    assert got.source == "file" and "topo -m" in got.detail
    assert len(got.topology.gpus) == 8 and got.topology.nvlinks(0, 7) == 18


def test_a_capture_of_the_wrong_kind_is_refused_with_its_kind() -> None:
    path = require_shared("nvidia-smi", "smi-L-a100-40gb-2x3g.20gb-migguide.txt")
    with pytest.raises(ParseError, match="list"):
        slurmlab.topology(path)
    layout = slurmlab.mig(path).layout
    assert [i.profile for i in layout.instances()] == ["3g.20gb", "3g.20gb"]


def test_broken_json_and_missing_file_are_parse_errors(tmp_path: Path) -> None:
    bad = tmp_path / "bad.json"
    bad.write_text("{not json")
    with pytest.raises(ParseError, match="not valid JSON"):
        slurmlab.topology(bad)
    with pytest.raises(ParseError, match="cannot read"):
        slurmlab.topology(tmp_path / "absent.txt")


def test_mig_of_profiles() -> None:
    got = slurmlab.mig(profile="h200-mig")
    assert got.source == "profile"
    assert [i.profile for i in got.layout.gpu(1).instances] == ["3g.71gb", "3g.71gb"]
    with pytest.raises(RequestError, match="no MIG instances"):
        slurmlab.mig(profile="dgx-h100")


def test_one_function_per_view_reads_a_file_a_profile_or_text() -> None:
    """Issue 26 point 4: one way to build a topology or MIG view without an allocation, the source an argument."""
    path = require_shared("nvidia-smi", "topo-8x-h100-sxm-nv18-no-nics-spaces.txt")
    by_file = slurmlab.topology(path)
    by_text = slurmlab.topology(text=path.read_text())
    assert by_text.topology == by_file.topology and by_text.source == "file"
    assert "the text given" in by_text.detail and str(path) in by_file.detail
    named = slurmlab.topology(profile="seed")
    assert slurmlab.topology(profile=profile_data("seed")).topology == named.topology
    renamed = slurmlab.topology(profile="dgx-h100", model="H100-SXM5-80GB").topology
    assert renamed.gpu_model == "H100-SXM5-80GB"
    listing = require_shared("nvidia-smi", "smi-L-a100-40gb-2x3g.20gb-migguide.txt")
    assert slurmlab.mig(text=listing.read_text()).layout == slurmlab.mig(listing).layout
    assert slurmlab.mig(profile=profile_data("h200-mig")).layout == slurmlab.mig(profile="h200-mig").layout


def test_a_view_reads_exactly_one_source() -> None:
    with pytest.raises(RequestError, match=r"reads one source.*\(got none\)") as err:
        slurmlab.topology()
    assert "alloc.topology(node)" in str(err.value.hint)
    listing = require_shared("nvidia-smi", "smi-L-a100-40gb-2x3g.20gb-migguide.txt")
    with pytest.raises(RequestError, match=r"got file and profile"):
        slurmlab.mig(listing, profile="h200-mig")
    with pytest.raises(RequestError, match=r"got profile and text"):
        slurmlab.topology(profile="seed", text="")


def test_the_front_door_offers_one_way_per_view() -> None:
    from slurmlab.slurm import hardware_files

    assert slurmlab.topology is hardware_files.topology and slurmlab.mig is hardware_files.mig
    assert {"topology", "mig"} <= set(slurmlab.__all__)
    for old in (
        "topology_from_file",
        "topology_from_profile",
        "mig_from_file",
        "mig_from_profile",
        "node_topology",
        "node_mig",
    ):
        assert old not in slurmlab.__all__ and not hasattr(slurmlab, old), old


def test_gres_idx_of_a_mig_sandbox_follows_slurms_type_grouping() -> None:
    # observed in the h200-mig sandbox: whole H200s are IDX 0-3, then 9 x 1g.18gb, then 3g.71gb at IDX 13
    prof = load_profile("h200-mig")
    devices = gres_index_map(prof)
    assert len(devices) == 4 + len(prof.mig)
    assert devices[:4] == [(4, None), (5, None), (6, None), (7, None)]
    gpu, pos = devices[13]
    assert pos is not None and prof.mig[pos].profile == "3g.71gb" and prof.mig[pos].start == 0 and gpu == 1
    assert [prof.mig[p].profile for _, p in devices[4:13] if p is not None] == ["1g.18gb"] * 9


def test_gres_idx_equals_index_on_a_plain_profile() -> None:
    assert gres_index_map(load_profile("dgx-h100")) == [(i, None) for i in range(8)]


def test_the_builtin_profiles_are_the_sandboxs() -> None:
    from slurmlab.sandbox import list_profiles

    assert profile_names() == list_profiles()


def test_sandbox_is_found_by_its_hardware_file_next_to_slurm_conf(tmp_path: Path) -> None:
    conf = tmp_path / "slurm.conf"
    conf.write_text("ClusterName=x\n")
    assert sandbox_hardware(Runner(slurm_conf=str(conf))) is None
    (tmp_path / HARDWARE_FILE).write_text(render_hardware_file(load_profile("h200-mig")))
    hw = sandbox_hardware(Runner(slurm_conf=str(conf)))
    assert (
        hw is not None and hw.name == "h200-mig" and hw.nodes == ("node1",) and hw.directory == str(tmp_path)
    )
    # Slurm's IDX 13 is a 3g.71gb slice of GPU 1: the topology marks GPU 1 and says which slice it is
    topo = hw.node_topology("node1", (13,))
    assert topo.source == "sandbox" and str(tmp_path) in topo.detail and topo.gpus == (1,)
    assert topo.gpu_of_idx(0) == 4 and any("3g.71gb" in n for n in topo.notes) and topo.gpu_type == "h200"
    ((gpu, placement),) = hw.node_mig("node1", (13,)).highlight
    assert (gpu, placement) == (1, "0:4")
    with pytest.raises(RequestError, match="not in the sandbox"):
        hw.node_topology("node9")
    (tmp_path / HARDWARE_FILE).write_text(
        "[]"
    )  # there, but not what the sandbox writes: said so, not guessed
    with pytest.raises(ParseError, match="hardware file"):
        sandbox_hardware(Runner(slurm_conf=str(conf)))


def test_hardware_file_roundtrip_and_refusals() -> None:
    prof = load_profile("dgx-h100")
    hw = parse_hardware(render_hardware_file(prof), directory="/sb")
    assert hw.nodes == prof.node_names and hw.gres_idx == tuple(gres_index_map(prof))
    assert hw.node_topology("node2").topology == slurmlab.topology(profile=prof).topology
    with pytest.raises(RequestError, match="no MIG instances"):
        hw.node_mig("node1")
    for bad in (
        "{not json",
        '{"format": 99}',
        '{"format": 1, "profile": {}, "nodes": ["n1"], "gres_idx": [{"gpu": "0"}]}',
    ):
        with pytest.raises(ParseError):
            parse_hardware(bad, directory="/sb")


def test_source_order_and_forcing() -> None:
    assert _order("auto") == ("sandbox", "nvidia-smi", "nvml")
    assert _order("nvml") == ("nvml",)
    with pytest.raises(RequestError, match="unknown topology source"):
        _order("guess")


def test_nvml_report_becomes_a_topology() -> None:
    report = {
        "gpus": [
            {"index": 0, "name": "NVIDIA A100-SXM4-80GB", "uuid": "GPU-a", "cpus": [0, 1, 2, 3]},
            {"index": 1, "name": "NVIDIA A100-SXM4-80GB", "uuid": "GPU-b", "cpus": [0, 1, 2, 3]},
            {"index": 2, "name": "NVIDIA A100-SXM4-80GB", "uuid": "GPU-c", "cpus": [4, 5, 6, 7]},
        ],
        # each NVLink is seen from both ends
        "nvlink_ends": {"0-1": 24, "1-2": 24},
        "pcie": {"0-1": "PXB", "0-2": "SYS", "1-2": "SYS"},
    }
    topo = topology_from_nvml_report(report)
    assert topo.nvlinks(0, 1) == 12 and topo.nvlinks(1, 2) == 12 and topo.nvlinks(0, 2) == 0
    link = topo.link(0, 2)
    assert link is not None and link.kind.value == "SYS"
    assert topo.gpu(2).cpu_affinity == frozenset(range(4, 8)) and topo.gpu(0).uuid == "GPU-a"
    assert topo.nvlink_generation is not None and topo.nvlink_generation.name == "NVLink 3"
    with pytest.raises(ParseError, match="no GPUs"):
        topology_from_nvml_report({"gpus": []})
    with pytest.raises(ParseError, match="count"):
        topology_from_nvml_report({"gpus": report["gpus"], "nvlink_ends": {"0-1": "many"}})


class _Alloc:
    """As much of an Allocation as the sandbox source needs: no step is run."""

    def __init__(self, runner: Runner, idx: tuple[int, ...]) -> None:
        from types import SimpleNamespace

        self.runner, self.job_id, self.state, self.running, self.nodes = (
            runner,
            "7",
            "RUNNING",
            True,
            ["node1"],
        )
        self.job = SimpleNamespace(gpu_allocs=[SimpleNamespace(node="node1", gpu_indices=list(idx))])


def test_the_sandbox_source_of_an_allocation_reads_the_file_beside_slurm_conf(tmp_path: Path) -> None:
    from slurmlab.errors import SourceUnavailable
    from slurmlab.slurm.probes import node_mig, node_topology

    conf = tmp_path / "slurm.conf"
    conf.write_text("ClusterName=x\n")
    alloc = _Alloc(Runner(slurm_conf=str(conf)), (4, 13))
    with pytest.raises(SourceUnavailable, match="not a slurmlab sandbox"):
        node_topology(alloc, source="sandbox")  # type: ignore[arg-type]
    (tmp_path / HARDWARE_FILE).write_text(render_hardware_file(load_profile("h200-mig")))
    topo = node_topology(alloc, source="sandbox")  # type: ignore[arg-type]
    assert (
        topo.source == "sandbox"
        and topo.node == "node1"
        and topo.gpus == (0, 1)
        and topo.slurm_gpus == (4, 13)
    )
    assert node_mig(alloc).highlight == ((0, "0:1"), (1, "0:4"))  # type: ignore[arg-type]
    (tmp_path / HARDWARE_FILE).write_text("{broken")
    with pytest.raises(SourceUnavailable, match="sandbox: .*hardware file"):
        node_topology(alloc, source="sandbox")  # type: ignore[arg-type]
