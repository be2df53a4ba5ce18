"""NVLink link state in real sandbox steps: the stand-in ``nvidia-smi nvlink -s`` answers for the step's GPUs in
nvidia-smi's format, slurmlab reads it back, and the live nvidia-smi probe applies it to the topology."""

from __future__ import annotations

from typing import Any

import pytest

from slurmlab.core.gpu.nvlink import nvlink_model_for
from slurmlab.core.gpu.smi.nvlink import parse_nvlink_status
from slurmlab.core.gpu.standin_names import STANDIN_MARK
from slurmlab.slurm.allocation import Allocation
from slurmlab.slurm.probes import node_topology

pytestmark = pytest.mark.sandbox


def test_nvlink_s_in_a_step_answers_for_its_gpus_and_parses(dgx: Any) -> None:
    alloc = Allocation.submit(["-n1", "--gpus=2", "-t", "5"], runner=dgx.runner())
    try:
        alloc.wait(timeout=30)
        res = alloc.srun(["nvidia-smi", "nvlink", "-s"], args=["-n1"], on_output=lambda *_: None, timeout=60)
        assert res.ok, res.stderr
        text = "\n".join(res.stdout)
        assert text.startswith(STANDIN_MARK), text
        statuses = parse_nvlink_status(text)
        assert [s.gpu for s in statuses] == [0, 1]  # the step's two GPUs, numbered from 0
        for s in statuses:
            row = nvlink_model_for(s.model)
            assert row is not None and s.links == tuple(
                (k, row.reported_gbps) for k in range(row.links_per_gpu)
            )
        node, held = next(iter(alloc.gpus.items()))
        assert all(f"the node's GPU {i} (Slurm IDX {i})" in text for i in held), text
        assert f"on {node}" in text
    finally:
        alloc.cancel()


def test_the_nvidia_smi_source_carries_link_state_and_the_sandbox_source_stays_first(dgx: Any) -> None:
    alloc = Allocation.submit(["-n1", "--gpus=2", "-t", "5"], runner=dgx.runner())
    try:
        alloc.wait(timeout=30)
        live = node_topology(alloc, source="nvidia-smi")
        assert live.source == "nvidia-smi" and live.detail.endswith(
            f"; link state from nvidia-smi nvlink -s on {live.node}"
        )
        assert [s.gpu for s in live.topology.link_states] == [0, 1]
        assert all(s.healthy for s in live.topology.link_states)
        assert "NVLink link state (nvidia-smi nvlink -s):" in live.summary()
        # the stand-in answers from the profile, which the sandbox source reads itself: it stays first
        assert alloc.topology()[live.node or ""].source == "sandbox"
    finally:
        alloc.cancel()
