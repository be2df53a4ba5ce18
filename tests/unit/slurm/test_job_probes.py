"""``alloc.topology()`` / ``alloc.mig()`` cover every node of the job; a node without an answer is named."""

from __future__ import annotations

from pathlib import Path
from types import SimpleNamespace

import pytest

from slurmlab.core.gpu.hardware_profile import HARDWARE_FILE
from slurmlab.core.gpu.job_hardware import JobMig, JobTopology
from slurmlab.errors import RequestError, SourceUnavailable
from slurmlab.sandbox import load_profile
from slurmlab.sandbox.render import render_hardware_file
from slurmlab.slurm.probes import job_mig, job_topology
from slurmlab.slurm.runner import Runner


class _Alloc:
    """As much of an Allocation as the sandbox source needs: its nodes and GPU IDX per node; no step is run."""

    def __init__(self, runner: Runner, idx: dict[str, tuple[int, ...]]) -> None:
        self.runner, self.job_id, self.state, self.running, self.nodes = (
            runner,
            "7",
            "RUNNING",
            True,
            list(idx),
        )
        self.job = SimpleNamespace(
            gpu_allocs=[SimpleNamespace(node=n, gpu_indices=list(i)) for n, i in idx.items()]
        )


def _sandbox(tmp_path: Path, profile: str, nodes: int | None = None) -> Runner:
    conf = tmp_path / "slurm.conf"
    conf.write_text("ClusterName=x\n")
    prof = load_profile(profile)
    if nodes is not None:
        from dataclasses import replace

        prof = replace(prof, nodes=nodes)
    (tmp_path / HARDWARE_FILE).write_text(render_hardware_file(prof))
    return Runner(slurm_conf=str(conf))


def test_every_node_of_the_job_gets_its_topology(tmp_path: Path) -> None:
    alloc = _Alloc(_sandbox(tmp_path, "dgx-h100"), {"node1": (0, 1), "node2": (5,)})
    job = job_topology(alloc)  # type: ignore[arg-type]
    assert isinstance(job, JobTopology) and list(job) == ["node1", "node2"] and not job.missing
    assert job["node1"].gpus == (0, 1) and job["node2"].gpus == (5,) and job["node2"].node == "node2"
    assert job.figure_args("node2")["highlight_gpus"] == (5,)


def test_a_node_without_an_answer_is_named_and_the_rest_shown(tmp_path: Path) -> None:
    alloc = _Alloc(_sandbox(tmp_path, "dgx-h100"), {"node1": (0,), "node9": (1,)})
    # node9 is not in the sandbox; the live sources cannot run without Slurm either
    job = job_topology(alloc, source="sandbox")  # type: ignore[arg-type]
    assert list(job) == ["node1"]
    assert job.missing["node9"].startswith("no topology source answered for node9 of allocation 7:")
    assert "sandbox: node9 is not one of its nodes (node1, node2)" in job.missing["node9"]
    assert "node9: no topology (no topology source answered for node9" in job.summary()
    with pytest.raises(KeyError, match="no topology of 'node9' in job 7: no topology source answered"):
        job["node9"]


def test_when_no_node_answers_the_first_nodes_error_is_raised(tmp_path: Path) -> None:
    conf = tmp_path / "slurm.conf"
    conf.write_text("ClusterName=x\n")
    alloc = _Alloc(Runner(slurm_conf=str(conf)), {"node1": (0,), "node2": (0,)})
    with pytest.raises(
        SourceUnavailable, match=r"no topology source answered for node1 (?s:.)*not a slurmlab sandbox"
    ):
        job_topology(alloc, source="sandbox")  # type: ignore[arg-type]
    with pytest.raises(RequestError, match="unknown topology source 'guess'"):
        job_topology(alloc, source="guess")  # type: ignore[arg-type]


def test_every_node_of_a_mig_job_gets_its_layout_with_its_slice(tmp_path: Path) -> None:
    runner = _sandbox(tmp_path, "h200-mig", nodes=2)
    # Slurm IDX 13 is the first 3g.71gb slice on each node (whole H200s are 0-3, then 9 x 1g.18gb)
    alloc = _Alloc(runner, {"node1": (13,), "node2": (13,)})
    job = job_mig(alloc)  # type: ignore[arg-type]
    assert isinstance(job, JobMig) and list(job) == ["node1", "node2"]
    for node in job:
        (inst,) = job[node].slices()
        assert inst.label == "GPU 1 · 3g.71gb @ 0:4"
        assert "this allocation's slices: GPU 1 · 3g.71gb @ 0:4" in job[node].summary()


def test_a_job_on_a_cluster_without_mig_says_so_with_the_fix(tmp_path: Path) -> None:
    alloc = _Alloc(_sandbox(tmp_path, "dgx-h100"), {"node1": (0,), "node2": (0,)})
    with pytest.raises(RequestError, match="the sandbox's profile dgx-h100 has no MIG instances") as info:
        job_mig(alloc)  # type: ignore[arg-type]
    assert "slurmlab sandbox up --profile h200-mig" in str(info.value)
