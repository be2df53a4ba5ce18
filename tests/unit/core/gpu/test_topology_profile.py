"""Topology and MIG layouts built from plain hardware-profile data (the sandbox profile schema)."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from slurmlab.core.gpu.links import LinkKind
from slurmlab.core.gpu.mig import MigLayout
from slurmlab.core.gpu.topology import Topology
from slurmlab.errors import ParseError, RequestError

PROFILES = Path(__file__).resolve().parents[4] / "slurmlab" / "sandbox" / "profiles"


def profile(name: str) -> dict[str, object]:
    path = PROFILES / f"{name}.json"
    if not path.exists():
        pytest.skip(f"sandbox profile {path} is not there (yet)")
    data: dict[str, object] = json.loads(path.read_text())
    return data


def test_dgx_h100_profile() -> None:
    data = profile("dgx-h100")
    t = Topology.from_profile(data)
    assert len(t.gpus) == 8 and all(lk.short == "NV18" for lk in t.gpu_links())
    assert t.numa_groups() == {"NUMA 0": (0, 1, 2, 3), "NUMA 1": (4, 5, 6, 7)}
    gpus = data["gpus"]
    assert isinstance(gpus, list)
    assert t.gpu_model == gpus[0]["name"] and t.nvlink_generation is not None
    assert t.nvlink_generation.name == "NVLink 4"


def test_h200_mig_profile_layout() -> None:
    data = profile("h200-mig")
    lay = MigLayout.from_profile(data)
    assert lay.table is not None and lay.table.model == "H200-141GB"
    raw = data["mig"]
    assert isinstance(raw, list)
    assert sorted((i.gpu, i.profile, i.start, i.size) for i in lay.instances()) == sorted(
        (m["gpu"], m["profile"], m["start"], m["size"]) for m in raw
    )


def test_profile_defaults_and_errors() -> None:
    t = Topology.from_profile(
        {
            "gpus": [{"index": 0, "numa": 0}, {"index": 1, "numa": 0}, {"index": 2, "numa": 1}],
            "pcie": {"0-1": "PIX"},
            "nics": [{"name": "mlx5_0", "near": [2]}],
        }
    )
    assert t.link(0, 1).kind is LinkKind.PIX and t.link(0, 2).kind is LinkKind.SYS
    assert t.link("GPU2", "mlx5_0").kind is LinkKind.PIX and t.nvlink_generation is None
    all18 = Topology.from_profile({"gpus": 4, "nvlink": "all:18"})
    assert {lk.nvlinks for lk in all18.gpu_links()} == {18}
    with pytest.raises(ParseError, match="not symmetric"):
        Topology.from_profile({"gpus": 2, "nvlink": [[0, 4], [2, 0]]})
    with pytest.raises(ParseError, match="gpus"):
        Topology.from_profile({"gpus": []})
    with pytest.raises(ParseError, match="CPU affinity"):
        Topology.from_profile({"gpus": [{"index": 0, "cores": "a-b"}]})
    with pytest.raises(RequestError, match="no MIG instances"):
        MigLayout.from_profile({"gpus": [], "mig": []})
