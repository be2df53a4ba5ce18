"""The binding table and the isolation verdict agree with each other and with the checks, and say where the
sandbox differs from a real cluster (issue 13, point 6)."""

from __future__ import annotations

import re
from typing import Any

import slurmlab
from slurmlab.core.gpu.binding import HONOURED, TaskReport, explain, node_records
from slurmlab.core.gpu.node_models import NodeTopology
from slurmlab.core.gpu.sandbox_limits import HOST_NAME, MIG_NAMES, NO_DEVICE_CGROUP
from slurmlab.core.slurm.gres import GresItem
from slurmlab.core.slurm.models import GresAlloc, Job
from slurmlab.experiments.isolation import check_i2
from slurmlab.experiments.isolation_result import (
    FAIL,
    ISOLATED,
    MIG,
    NOT_ISOLATED,
    PASS,
    CheckResult,
    Grant,
    VerifyReport,
)
from slurmlab.experiments.slurm_view import grant_from_job, verdict_of
from slurmlab.experiments.verify import _judge, in_sandbox

DGX = slurmlab.topology(profile="dgx-h100")  # GPUs 0-3 on NUMA 0 (CPUs 0-55), 4-7 on NUMA 1
SANDBOX_TOPO = NodeTopology(
    DGX.topology, "sandbox", "hardware profile dgx-h100 of the sandbox in /x", "node1"
)


def _per_task_job() -> Job:
    # %salloc -n2 --gpus-per-task=1 --gpu-bind=closest: Slurm put both GPUs on socket 0, CPUs 0-1
    return Job(
        job_id=3,
        name="j",
        state="RUNNING",
        num_tasks=2,
        tres_per_task=(GresItem("gpu", count=1, prefix="gres:"),),
        tres_bind="gres/gpu:closest",
        gpu_allocs=(GresAlloc("node1", (GresItem("gpu", "h100", 2, (0, 1)),), "0-1"),),
    )


def _verify_report(rank: int, env: dict[str, str]) -> dict[str, Any]:
    return {
        "label": str(rank),
        "node": "node1",
        "identity": {"devices": []},
        "cpu_affinity": [rank],
        "slurm_env": {"SLURMD_NODENAME": "node1", "SLURM_PROCID": str(rank), **env},
        "gres_conf": {"path": "/x/gres.conf", "cores": {"0": "0-55", "1": "0-55"}},
    }


def test_per_task_gpus_read_the_same_in_the_binding_table_and_the_isolation_check() -> None:
    # what the one step both run (srun --ntasks=2 --gpus-per-task=1) printed on Slurm 22.05 in the sandbox
    seen = {0: "0", 1: "1"}
    tasks = [TaskReport(r, "node1", (int(g),), (g,), frozenset({r}), 2) for r, g in seen.items()]
    job = _per_task_job()
    table = explain(
        tasks,
        {"node1": SANDBOX_TOPO},
        node_records(job),
        tres_bind=job.tres_bind,
        job_id="3",
        step_args=["--ntasks=2", "--gpus-per-task=1"],
    )
    reports = [
        _verify_report(r, {"SLURM_STEP_GPUS": g, "CUDA_VISIBLE_DEVICES": g, "SLURMLAB_SANDBOX": "/x"})
        for r, g in seen.items()
    ]
    grant = grant_from_job(job, 2)
    checks, devs, source = _judge(job, reports, grant, None, sandbox=in_sandbox(reports))
    # one GPU each, the same one in both, and both say closest binding holds (I7 is the check of it)
    assert [r.gpus for r in table.rows] == [(0,), (1,)]
    assert [[d["index"] for d in ds] for ds in devs] == [[0], [1]]
    assert [r.closest for r in table.rows] == [HONOURED, HONOURED]
    assert checks.by_id("I7").status == PASS and checks.by_id("I1").status == PASS
    assert verdict_of(devs, checks.checks) == ISOLATED and source == "slurm"
    # the table names the step and why the job's --gpu-bind is not in it
    text = table.text()
    assert "srun --ntasks=2 --gpus-per-task=1" in text and "--gpu-bind=closest" in text


def test_closest_on_a_step_that_holds_both_gpus_is_honoured_and_each_task_sees_both() -> None:
    # the same job, probed with --gpu-bind=closest as explain_binding once did: each task gets every step GPU
    # near its CPUs (both sit on socket 0), which is Slurm's closest binding, honoured, but not one GPU each
    tasks = [TaskReport(r, "node1", (0, 1), ("0", "1"), frozenset({r}), 2) for r in (0, 1)]
    table = explain(
        tasks,
        {"node1": SANDBOX_TOPO},
        node_records(_per_task_job()),
        tres_bind="gres/gpu:closest",
        step_args=["--ntasks=2", "--gpus-per-task=1", "--gpu-bind=closest"],
    )
    assert [r.gpus for r in table.rows] == [(0, 1), (0, 1)] and table.closest == HONOURED
    assert "repeats the job's GPU request without it" not in table.text()


def test_the_binding_table_on_a_sandbox_says_gpus_are_not_renumbered() -> None:
    tasks = [TaskReport(0, "node1", (0, 3), ("0", "3"), frozenset({0}), 2)]
    table = explain(tasks, {"node1": SANDBOX_TOPO}, [], job_id="9")
    assert f"note: {NO_DEVICE_CGROUP}" in table.text() and f"note: {HOST_NAME}" in table.text()
    assert "renumbered" in table.text()
    assert table._repr_html_().count("class='slurmlab-sandbox-note'") == 2
    real = explain(tasks, {"node1": DGX}, [], job_id="9")  # a topology not from a sandbox: no such note
    assert NO_DEVICE_CGROUP not in real.text()


def test_a_fail_never_sits_next_to_isolated() -> None:
    devs = [[{"uuid": "MIG-a"}], [{"uuid": "MIG-b"}]]
    i2 = CheckResult("I2", "CUDA_VISIBLE_DEVICES consistent", FAIL, {}, "0: 2 entries for 1 GPU(s)")
    ok = CheckResult("I1", "count", PASS)
    assert verdict_of(devs, [ok]) == ISOLATED
    assert verdict_of(devs, [ok, i2]) == NOT_ISOLATED
    report = VerifyReport([ok, i2], Grant(1, MIG, "1g.18gb"), verdict=verdict_of(devs, [ok, i2]))
    text = report.summary()
    assert "verdict: not isolated" in text and "failed: I2" in text
    assert not re.search(r"verdict[^\n]*\bisolated\b", text.replace("not isolated", ""))
    assert "not isolated" in report._repr_html_()


def test_mig_on_the_sandbox_is_not_failed_for_lacking_mig_uuids_but_said_so() -> None:
    grant = Grant(1, MIG, "3g.71gb")
    reports = [_verify_report(0, {"SLURM_STEP_GPUS": "13", "CUDA_VISIBLE_DEVICES": "13"})]
    reports[0]["identity"] = {"devices": [{"uuid": "slurm:node1:gpu13"}]}
    real = check_i2(reports, grant)
    assert real.status == FAIL and "does not name MIG- devices" in real.reason
    sandbox = check_i2(reports, grant, sandbox=True)
    assert sandbox.status == PASS and MIG_NAMES in sandbox.reason and "'13'" in sandbox.reason
    # a real count mismatch still fails on the sandbox
    two = [_verify_report(0, {"SLURM_STEP_GPUS": "13", "CUDA_VISIBLE_DEVICES": "13,14"})]
    two[0]["identity"] = {"devices": [{"uuid": "x"}]}
    assert check_i2(two, grant, sandbox=True).status == FAIL


def test_a_mig_job_on_the_sandbox_is_isolated_with_every_check_agreeing_and_the_notes() -> None:
    job = Job(
        job_id=4,
        name="m",
        state="RUNNING",
        num_tasks=1,
        tres_per_node=(GresItem("gpu", "3g.71gb", 1, prefix="gres:"),),
        gpu_allocs=(GresAlloc("node1", (GresItem("gpu", "3g.71gb", 1, (13,)),), "0"),),
    )
    reports = [
        _verify_report(0, {"SLURM_STEP_GPUS": "13", "CUDA_VISIBLE_DEVICES": "13", "SLURMLAB_SANDBOX": "/x"})
    ]
    grant = grant_from_job(job, 1)
    assert grant.sharing == MIG
    checks, devs, _ = _judge(job, reports, grant, None, sandbox=True)
    verdict = verdict_of(devs, checks.checks)
    assert verdict == ISOLATED and not checks.failed, checks.summary()
    report = VerifyReport(checks.checks, grant, verdict=verdict, notes=[NO_DEVICE_CGROUP, MIG_NAMES])
    assert "note: sandbox: no MIG hardware" in report.summary()
    assert "slurmlab-sandbox-note" in report._repr_html_()


def test_reports_tell_whether_the_step_ran_in_a_sandbox() -> None:
    assert in_sandbox([_verify_report(0, {"SLURMLAB_SANDBOX": "/tmp/sb"})])
    assert not in_sandbox([_verify_report(0, {})])
