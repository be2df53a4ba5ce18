"""Where topology and MIG come from: files, built-in profiles, sandbox detection, the NVML report, source order."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from shared_paths import require_shared

from slurmlab.errors import ParseError, RequestError
from slurmlab.sandbox import load_profile
from slurmlab.slurm.runner import Runner
from slurmlab.topology import from_file, from_profile, mig_from_file, mig_from_profile
from slurmlab.topology.sources import _order, profile_gres_devices, sandbox_of, topology_from_nvml_report


def test_builtin_profile_is_the_reported_source() -> None:
    got = from_profile("dgx-h100")
    assert got.source == "profile" and "dgx-h100" in got.detail
    topo = got.topology
    assert len(topo.gpus) == 8
    assert all(topo.nvlinks(a, b) == 18 for a in range(8) for b in range(8) if a != b)
    assert topo.numa_groups() == {"NUMA 0": (0, 1, 2, 3), "NUMA 1": (4, 5, 6, 7)}
    assert topo.gpu(5).cpu_affinity == frozenset(range(56, 112))
    assert "source: profile" in got.summary()


def test_unknown_profile_names_the_known_ones() -> None:
    with pytest.raises(Exception, match="dgx-h100"):
        from_profile("no-such-box")


def test_profile_json_file(tmp_path: Path) -> None:
    data = {"gpus": [{"index": 0, "numa": 0, "cores": "0-3"}, {"index": 1, "numa": 1, "cores": "4-7"}],
            "nvlink": {"0-1": 4}, "gpu_model": "RTX 3090"}
    path = tmp_path / "box.json"
    path.write_text(json.dumps(data))
    got = from_file(path)
    assert got.source == "file" and str(path) in got.detail
    assert got.topology.nvlinks(0, 1) == 4
    assert got.topology.gpu(1).cpu_affinity == frozenset(range(4, 8))


def test_saved_topo_capture() -> None:
    path = require_shared("nvidia-smi", "topo-8x-h100-sxm-nv18-no-nics-spaces.txt")
    got = from_file(path)
    assert got.source == "file" and "topo -m" in got.detail
    assert len(got.topology.gpus) == 8 and got.topology.nvlinks(0, 7) == 18


def test_a_capture_of_the_wrong_kind_is_refused_with_its_kind() -> None:
    path = require_shared("nvidia-smi", "smi-L-a100-40gb-2x3g.20gb-migguide.txt")
    with pytest.raises(ParseError, match="list"):
        from_file(path)
    layout = mig_from_file(path).layout
    assert [i.profile for i in layout.instances()] == ["3g.20gb", "3g.20gb"]


def test_broken_json_and_missing_file_are_parse_errors(tmp_path: Path) -> None:
    bad = tmp_path / "bad.json"
    bad.write_text("{not json")
    with pytest.raises(ParseError, match="not valid JSON"):
        from_file(bad)
    with pytest.raises(ParseError, match="cannot read"):
        from_file(tmp_path / "absent.txt")


def test_mig_from_profiles() -> None:
    got = mig_from_profile("h200-mig")
    assert got.source == "profile"
    assert [i.profile for i in got.layout.gpu(1).instances] == ["3g.71gb", "3g.71gb"]
    with pytest.raises(RequestError, match="no MIG instances"):
        mig_from_profile("dgx-h100")


def test_gres_idx_of_a_mig_sandbox_follows_slurms_type_grouping() -> None:
    # observed in the h200-mig sandbox: whole H200s are IDX 0-3, then 9 x 1g.18gb, then 3g.71gb at IDX 13
    prof = load_profile("h200-mig")
    devices = profile_gres_devices(prof)
    assert len(devices) == 4 + len(prof.mig)
    assert devices[:4] == [(4, None), (5, None), (6, None), (7, None)]
    gpu, pos = devices[13]
    assert pos is not None and prof.mig[pos].profile == "3g.71gb" and prof.mig[pos].start == 0 and gpu == 1
    assert [prof.mig[p].profile for _, p in devices[4:13] if p is not None] == ["1g.18gb"] * 9


def test_gres_idx_equals_index_on_a_plain_profile() -> None:
    assert profile_gres_devices(load_profile("dgx-h100")) == [(i, None) for i in range(8)]


def test_sandbox_is_found_next_to_slurm_conf(tmp_path: Path) -> None:
    conf = tmp_path / "slurm.conf"
    conf.write_text("ClusterName=x\n")
    assert sandbox_of(Runner(slurm_conf=str(conf))) is None
    (tmp_path / "state.json").write_text(json.dumps(
        {"profile": "dgx-h100", "nodes": 2, "pids": {}, "conf_path": str(conf), "node_names": ["node1", "node2"]}))
    sb = sandbox_of(Runner(slurm_conf=str(conf)))
    assert sb is not None and sb.profile_name == "dgx-h100"
    (tmp_path / "state.json").write_text("[]")  # not a sandbox state file: not a sandbox
    assert sandbox_of(Runner(slurm_conf=str(conf))) is None


def test_source_order_and_forcing() -> None:
    assert _order("auto") == ("sandbox", "nvidia-smi", "nvml")
    assert _order("nvml") == ("nvml",)
    with pytest.raises(RequestError, match="unknown topology source"):
        _order("guess")


def test_nvml_report_becomes_a_topology() -> None:
    report = {
        "gpus": [{"index": 0, "name": "NVIDIA A100-SXM4-80GB", "uuid": "GPU-a", "cpus": [0, 1, 2, 3]},
                 {"index": 1, "name": "NVIDIA A100-SXM4-80GB", "uuid": "GPU-b", "cpus": [0, 1, 2, 3]},
                 {"index": 2, "name": "NVIDIA A100-SXM4-80GB", "uuid": "GPU-c", "cpus": [4, 5, 6, 7]}],
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
