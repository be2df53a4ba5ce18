"""Measured bandwidth against the NVLink and device-copy figures per GPU model."""

from __future__ import annotations

import pytest

from slurmlab.errors import SlurmlabError
from slurmlab.experiments.bandwidth import (
    check_device_copy,
    check_link_speeds,
    check_p2p,
    expected_nvlink_gbps,
    gpu_model,
)


def test_models_from_device_names() -> None:
    assert gpu_model("NVIDIA H200") == "H200"
    assert gpu_model("NVIDIA A100-SXM4-80GB") == "A100"
    assert gpu_model("Tesla V100-SXM2-32GB") == "V100"
    assert gpu_model("NVIDIA GeForce RTX 3090") == "RTX 3090"
    assert gpu_model("NVIDIA T4") is None


def test_expected_nvlink_bandwidth() -> None:
    assert expected_nvlink_gbps("NVIDIA H100 80GB HBM3") == pytest.approx(26.562 * 18)
    assert expected_nvlink_gbps("NVIDIA A100-SXM4-40GB", links=2) == pytest.approx(50.0)
    assert expected_nvlink_gbps("Tesla V100-SXM2-16GB", links=1) == pytest.approx(25.781)
    with pytest.raises(SlurmlabError, match="12 NVLinks"):
        expected_nvlink_gbps("A100", links=13)
    with pytest.raises(SlurmlabError, match="known models"):
        expected_nvlink_gbps("NVIDIA T4")


def test_a_slow_or_missing_link_is_degraded() -> None:
    speeds = {i: 26.562 for i in range(18)}
    speeds[5] = 13.281  # trained at half width
    del speeds[17]  # down
    verdicts = check_link_speeds("NVIDIA H200", speeds)
    bad = [v.what for v in verdicts if v.degraded]
    assert bad == ["H200 link 5", "H200 link 17"]
    assert "DEGRADED" in str(verdicts[5]) and "ok" in str(verdicts[0])


def test_peer_and_device_copy_verdicts() -> None:
    good = check_p2p("NVIDIA A100-SXM4-80GB", 230.0, links=12)  # 77 % of 300 GB/s
    assert not good.degraded and good.ratio == pytest.approx(230 / 300)
    assert check_p2p("NVIDIA A100-SXM4-80GB", 120.0, links=12).degraded
    assert not check_device_copy("NVIDIA H200", 4100.0).degraded  # type: ignore[union-attr]
    assert check_device_copy("NVIDIA H200", 1500.0).degraded  # type: ignore[union-attr]
    assert check_device_copy("NVIDIA A100", 1500.0) is None  # no anchor: no verdict
