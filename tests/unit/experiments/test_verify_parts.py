"""verify's pure parts: gres.conf Cores, the grant read from a job, step options, Slurm's GPU identity."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

from slurmlab.core.framing import BEGIN, END, read_reports
from slurmlab.core.request.step_request import step_args_for
from slurmlab.core.slurm.gres import GresItem
from slurmlab.core.slurm.models import GresAlloc, Job
from slurmlab.errors import ExperimentError
from slurmlab.experiments.gres_conf import gpu_cores_from_gres_conf, with_gres_cores
from slurmlab.experiments.isolation_result import EXCLUSIVE, FAIL, MIG, PASS, SHARED, SKIP, CheckResult
from slurmlab.experiments.node.verify_task import gres_conf_gpu_lines
from slurmlab.experiments.slurm_view import grant_from_job, shard_gpus_of, slurm_i7, slurm_view_devices
from slurmlab.experiments.steps import step_gpu_args
from slurmlab.experiments.verify import TASK_MODULE, _ntasks_in, read_task_reports

GRES_CONF = """\
# two kinds of lines, a File range, and a node that is not ours
AutoDetect=off
NodeName=node[1-2] Name=gpu Type=h100 File=/dev/nvidia[0-3] Cores=0-55
NodeName=node[1-2] Name=gpu Type=h100 File=/dev/nvidia[4-7] Cores=56-111  # second socket
NodeName=node9 Name=gpu File=/dev/nvidia0 Cores=0-3
NodeName=node[1-2] Name=shard Count=32
"""


def test_gres_conf_cores_follow_gpu_order_per_node() -> None:
    cores = gpu_cores_from_gres_conf(GRES_CONF, "node2")
    assert cores == {**{i: "0-55" for i in range(4)}, **{i: "56-111" for i in range(4, 8)}}
    assert gpu_cores_from_gres_conf(GRES_CONF, "node9") == {0: "0-3"}
    assert gpu_cores_from_gres_conf("Name=gpu Count=2\n", "any") == {0: None, 1: None}


def test_a_gres_conf_line_that_does_not_expand_is_quoted() -> None:
    with pytest.raises(ValueError, match="NodeName=node\\[1-"):
        gpu_cores_from_gres_conf("NodeName=node[1- Name=gpu File=/dev/nvidia0\n", "node1")


def _job(**kw: object) -> Job:
    return Job(job_id=3, name="j", state="RUNNING", num_tasks=2, **kw)


def _held(*idx: int, typ: str = "h100", cpus: str | None = "0-1") -> tuple[GresAlloc, ...]:
    return (GresAlloc("node1", (GresItem("gpu", typ, len(idx), tuple(idx)),), cpus),)


def test_grant_per_task_is_exclusive_with_the_binding() -> None:
    job = _job(
        tres_per_task=(GresItem("gpu", count=1, prefix="gres:"),),
        gpu_allocs=_held(0, 1),
        tres_bind="gpu:closest",
        gres_binding_enforced=True,
    )
    g = grant_from_job(job)
    assert (g.gpus_per_task, g.sharing, g.gpu_bind) == (1, EXCLUSIVE, "closest,enforce-binding")
    assert step_args_for(job, 2) == ["--ntasks=2", "--gpus-per-task=1"]


def test_grant_of_fewer_gpus_than_tasks_is_shared() -> None:
    job = _job(tres_per_job=(GresItem("gpu", count=1, prefix="gres:"),), gpu_allocs=_held(0))
    g = grant_from_job(job)
    assert (g.gpus_per_task, g.sharing) == (1, SHARED)
    assert step_args_for(job, 2) == ["--ntasks=2", "--gpus=1"]
    # enough GPUs for every task: each gets its share, exclusively
    four = _job(tres_per_node=(GresItem("gpu", count=4, prefix="gres:"),), gpu_allocs=_held(0, 1, 2, 3))
    assert (grant_from_job(four).gpus_per_task, grant_from_job(four).sharing) == (2, EXCLUSIVE)


def test_grant_of_shards_and_mig_types() -> None:
    shards = _job(tres_per_node=(GresItem("shard", count=4, prefix="gres:"),))
    assert grant_from_job(shards).sharing == SHARED
    assert "--gres=shard:4" in step_args_for(shards, 2)
    mig = _job(
        tres_per_task=(GresItem("gpu", "1g.18gb", 1, prefix="gres:"),), gpu_allocs=_held(0, 1, typ="1g.18gb")
    )
    assert (grant_from_job(mig).sharing, grant_from_job(mig).mig_profile) == (MIG, "1g.18gb")


def test_task_counts_in_step_options() -> None:
    assert _ntasks_in(["-n2"]) == 2 and _ntasks_in(["-n", "3"]) == 3
    assert _ntasks_in(["--ntasks=4", "-N1"]) == 4 and _ntasks_in(["--gpus=1"]) is None
    with pytest.raises(ExperimentError, match="bad task count"):
        _ntasks_in(["-nx"])


def _report(env: dict[str, str]) -> dict[str, object]:
    return {"node": "node1", "slurm_env": env, "gres_conf": {"cores": {"0": "0-55", "5": "56-111"}}}


def test_slurm_identity_of_a_task() -> None:
    devs = slurm_view_devices(_report({"SLURM_STEP_GPUS": "5", "CUDA_VISIBLE_DEVICES": "0"}))
    assert [(d["uuid"], d["gres_cores"]) for d in devs] == [("slurm:node1:gpu5", "56-111")]
    # a --gpu-bind narrowed the task: CUDA_VISIBLE_DEVICES by global index, or by position
    assert [
        d["index"]
        for d in slurm_view_devices(_report({"SLURM_STEP_GPUS": "4,5", "CUDA_VISIBLE_DEVICES": "5"}))
    ] == [5]
    assert [
        d["index"]
        for d in slurm_view_devices(_report({"SLURM_STEP_GPUS": "4,5", "CUDA_VISIBLE_DEVICES": "1"}))
    ] == [5]
    assert slurm_view_devices(_report({})) == []
    with pytest.raises(ValueError, match="SLURM_STEP_GPUS"):
        slurm_view_devices(_report({"SLURM_STEP_GPUS": "gpu0"}))


def test_task_side_prints_one_report_with_the_gres_conf_cores(tmp_path: Path) -> None:
    (tmp_path / "slurm.conf").write_text("ClusterName=x\n")
    (tmp_path / "gres.conf").write_text(GRES_CONF)
    env = {
        **os.environ,
        "SLURM_CONF": str(tmp_path / "slurm.conf"),
        "SLURMD_NODENAME": "node1",
        "SLURM_STEP_GPUS": "4",
        "CUDA_VISIBLE_DEVICES": "4",
        "SLURM_PROCID": "0",
    }
    out = subprocess.run(
        [sys.executable, "-m", TASK_MODULE, "--backend", "cpu"],
        env=env,
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert out.returncode == 0, out.stderr
    # one framed line, read back the way the orchestrator reads task 0 of a labelled step
    (line,) = out.stdout.strip().splitlines()
    assert line.startswith(BEGIN) and line.endswith(END)
    (sent,) = read_reports([f"0: {line}"], 1)
    # the task sends its node's GPU lines as they are; the Cores are numbered on this side
    assert (
        sent["gres_conf"]["gpu_lines"] == gres_conf_gpu_lines(GRES_CONF) and "cores" not in sent["gres_conf"]
    )
    (report,) = read_task_reports([f"0: {line}"], [], 1, "3")
    assert report["node"] == "node1" and report["label"] == "0"
    assert report["gres_conf"]["cores"]["4"] == "56-111"
    assert slurm_view_devices(report)[0]["gres_cores"] == "56-111"


def test_a_shard_task_is_named_by_the_gpu_the_controller_put_its_shards_on() -> None:
    job = _job(
        tres_per_node=(GresItem("shard", count=2, prefix="gres:"),),
        gpu_allocs=(GresAlloc("node1", (GresItem("shard", "h100", 2, (3,)),), "0-1"),),
    )
    assert shard_gpus_of(job) == {"node1": [3]}
    report = {"slurm_env": {"SLURM_SHARDS_ON_NODE": "2", "SLURM_STEP_NODELIST": "node1"}}
    devs = slurm_view_devices(report, shard_gpus_of(job))
    assert [(d["uuid"], d["source"]) for d in devs] == [("slurm:node1:gpu3", "slurm-shard")]
    # without shards in the task's environment nothing is claimed
    assert slurm_view_devices({"slurm_env": {"SLURM_STEP_NODELIST": "node1"}}, shard_gpus_of(job)) == []
    assert step_gpu_args(job, "node1") == ["--gres=shard:2"]


def test_a_task_side_failure_arrives_as_that_tasks_error_not_a_missing_report() -> None:
    # no GPU here, so the cupy backend fails inside the task: the reader names the task and the cause
    env = {**os.environ, "SLURM_PROCID": "1"}
    out = subprocess.run(
        [sys.executable, "-m", TASK_MODULE, "--backend", "cupy"],
        env=env,
        capture_output=True,
        text=True,
        timeout=60,
    )
    if out.returncode == 0:
        pytest.skip("CuPy sees a GPU here")
    ok = {"label": "0"}
    lines = [f"0: {BEGIN}{json.dumps(ok)}{END}", *(f"1: {ln}" for ln in out.stdout.splitlines())]
    with pytest.raises(ExperimentError, match=r"1 of 2 task report\(s\).*\n  task 1 failed: \w+Error: "):
        read_reports(lines, 2)


@pytest.mark.parametrize(
    "detail",
    ["shard:h100:2(IDX:3)", "shard:h100:2(0/4,0/4,0/4,2/4)", "shard:h100:2(-/4,0/4,-/4,2/4)"],
    ids=["22.05", "24.11", "24.11-next-to-whole-gpus"],
)
def test_shards_in_either_slurm_form_give_the_same_gpu_and_grant(detail: str) -> None:
    from slurmlab.core.slurm.gres import parse_gres

    # no tres_per_* here: the per-node record alone must say the job shares a GPU
    job = _job(gpu_allocs=(GresAlloc("node1", parse_gres(detail), "26"),))
    assert shard_gpus_of(job) == {"node1": [3]}
    assert grant_from_job(job).sharing == SHARED
    report = {"node": "node1", "slurm_env": {"SLURM_SHARDS_ON_NODE": "2"}}
    assert [d["uuid"] for d in slurm_view_devices(report, shard_gpus_of(job))] == ["slurm:node1:gpu3"]


def test_a_whole_gpu_job_beside_idle_shards_is_not_shared() -> None:
    from slurmlab.core.slurm.gres import parse_gres

    job = _job(
        gpu_allocs=(GresAlloc("node1", parse_gres("gpu:h100:2(IDX:0-1),shard:h100:0(-/4,-/4,0/4,0/4)")),)
    )
    assert shard_gpus_of(job) == {}
    assert grant_from_job(job).sharing == EXCLUSIVE


def _i7(job: Job, cores: dict[str, str | None]) -> CheckResult:
    reports = [
        {
            "label": "0",
            "node": "node1",
            "cpu_affinity": [0],
            "gres_conf": {"path": "/x/gres.conf", "cores": cores},
        }
    ]
    return slurm_i7(job, reports, grant_from_job(job))


def test_i7_says_which_slurm_fact_is_missing_and_judges_when_both_are_there() -> None:
    bound: dict[str, object] = {
        "tres_per_task": (GresItem("gpu", count=1, prefix="gres/"),),
        "tres_bind": "gres/gpu:closest",
    }
    no_ids = _i7(_job(gpu_allocs=_held(2, cpus=None), **bound), {"2": "24-47"})
    assert no_ids.status == SKIP and "no CPU_IDs for the job on node1" in no_ids.reason
    no_cores = _i7(_job(gpu_allocs=_held(2, cpus="26"), **bound), {"2": None})
    assert no_cores.status == SKIP
    assert "no Cores= for GPU 2 on node1 (/x/gres.conf" in no_cores.reason
    near = _i7(_job(gpu_allocs=_held(2, cpus="26"), **bound), {"2": "24-47"})
    far = _i7(_job(gpu_allocs=_held(2, cpus="3"), **bound), {"2": "24-47"})
    assert (near.status, far.status) == (PASS, FAIL)


def test_gres_conf_cores_are_numbered_by_type_as_slurmd_numbers_them() -> None:
    # types interleaved in the file: slurmd groups them (type order of first mention), so the
    # 3g.71gb slice is IDX 3 here, not 2 as line order would give
    conf = """\
Name=gpu Type=1g.18gb File=/dev/mig0 Cores=0-3
Name=gpu Type=3g.71gb File=/dev/mig1 Cores=8-11
Name=gpu Type=1g.18gb File=/dev/mig[2-3] Cores=4-7
"""
    assert gpu_cores_from_gres_conf(conf, "n1") == {0: "0-3", 1: "4-7", 2: "4-7", 3: "8-11"}


def test_the_task_sends_only_gpu_lines_and_a_line_that_cannot_be_read_is_quoted() -> None:
    assert gres_conf_gpu_lines(GRES_CONF) == [
        "NodeName=node[1-2] Name=gpu Type=h100 File=/dev/nvidia[0-3] Cores=0-55",
        "NodeName=node[1-2] Name=gpu Type=h100 File=/dev/nvidia[4-7] Cores=56-111",
        "NodeName=node9 Name=gpu File=/dev/nvidia0 Cores=0-3",
    ]
    bad = with_gres_cores(
        {"node": "node1", "gres_conf": {"path": "/x", "gpu_lines": ["NodeName=node[1- Name=gpu"]}}
    )
    assert "cores" not in bad["gres_conf"] and "NodeName=node[1-" in bad["gres_conf"]["error"]
    # no gres.conf found on the node: nothing to number, nothing claimed
    assert with_gres_cores({"node": "n", "gres_conf": {"path": None}})["gres_conf"] == {"path": None}
