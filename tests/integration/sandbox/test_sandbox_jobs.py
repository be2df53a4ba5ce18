"""Jobs on the real sandbox: GPU allocations, binding, shards, MIG types, PMI2 ranks, pending requests."""

from __future__ import annotations

import re
import time
import uuid

import pytest

from slurmlab.slurm.runner import Runner, get_runner

pytestmark = pytest.mark.sandbox

STEP_REPORT = (
    "import os; print(os.environ.get('SLURMD_NODENAME'), os.environ.get('PMI_RANK'), "
    "os.environ.get('CUDA_VISIBLE_DEVICES'), os.environ.get('SLURM_STEP_GPUS'), "
    "sorted(os.sched_getaffinity(0)))"
)


def _salloc(runner: Runner, *args: str) -> str:
    name = f"t-{uuid.uuid4().hex[:8]}"
    res = runner.run(["salloc", "--no-shell", "-J", name, "-t", "10", *args], timeout=30)
    m = re.search(r"Granted job allocation (\d+)", res.stderr)
    assert m, res.stderr
    return m.group(1)


def _scancel(runner: Runner, job: str) -> None:
    runner.run(["scancel", job], check=False)


def _show_job(runner: Runner, job: str) -> str:
    return runner.run(["scontrol", "show", "job", "-d", job]).stdout


def test_fixture_points_the_process_runner_at_the_sandbox(slurm_sandbox) -> None:
    assert get_runner().slurm_conf == str(slurm_sandbox.conf_path)
    assert slurm_sandbox.env() == {"SLURM_CONF": str(slurm_sandbox.conf_path)}
    out = get_runner().run(["sinfo", "-h", "-N", "-o", "%N %T %G"]).stdout
    assert "node1" in out and "node2" in out and "gpu:h100:8" in out


def test_two_node_gpu_allocation_with_closest_binding(slurm_sandbox) -> None:
    r = slurm_sandbox.runner()
    job = _salloc(r, "-N2", "-n4", "--gpus=4", "--gpu-bind=closest", "--gres-flags=enforce-binding")
    try:
        detail = _show_job(r, job)
        per_node = re.findall(r"Nodes=(node\d) CPU_IDs=(\S+) .*GRES=gpu:h100:(\d+)\(IDX:([^)]+)\)", detail)
        assert {n for n, *_ in per_node} == {"node1", "node2"}, detail
        assert sum(int(c) for *_, c, _ in per_node) == 4
        step = r.run(
            ["srun", f"--jobid={job}", "--overlap", "-n4", "--gpus-per-task=1", "python3", "-c", STEP_REPORT],
            timeout=60,
        ).stdout
        rows = [line.split(" ", 4) for line in step.strip().splitlines()]
        assert len(rows) == 4, step
        seen = {(node, gpus) for node, _, _, gpus, _ in rows}
        assert len(seen) == 4, f"tasks share GPUs: {step}"
        assert all(cvd == gpus for _, _, cvd, gpus, _ in rows)
    finally:
        _scancel(r, job)


def test_shard_job(slurm_sandbox) -> None:
    r = slurm_sandbox.runner()
    job = _salloc(r, "--gres=shard:2")
    try:
        assert re.search(r"GRES=shard:h100:2\(", _show_job(r, job))
    finally:
        _scancel(r, job)


def test_pmi2_ranks(slurm_sandbox) -> None:
    r = slurm_sandbox.runner()
    job = _salloc(r, "-n4")
    try:
        out = r.run(
            ["srun", f"--jobid={job}", "--overlap", "--mpi=pmi2", "-n4", "python3", "-c", STEP_REPORT],
            timeout=60,
        ).stdout
        ranks = sorted(int(line.split()[1]) for line in out.strip().splitlines())
        assert ranks == [0, 1, 2, 3], out
    finally:
        _scancel(r, job)


def _sbatch(runner: Runner, *args: str) -> str:
    name = f"t-{uuid.uuid4().hex[:8]}"
    res = runner.run(
        ["sbatch", "--parsable", "-J", name, "-t", "10", "-o", "/dev/null", *args, "--wrap", "sleep 300"]
    )
    return res.stdout.strip().split(";")[0]


def _wait_state(runner: Runner, job: str, want: str) -> str:
    state = ""
    for _ in range(100):
        state = runner.run(["squeue", "-h", "-j", job, "-o", "%T %r"], check=False).stdout.strip()
        if state.startswith(want):
            return state
        time.sleep(0.1)
    return state


def _wait_gone(runner: Runner, job: str) -> bool:
    for _ in range(100):
        state = runner.run(["squeue", "-h", "-j", job, "-o", "%T"], check=False).stdout.strip()
        if state in ("", "CANCELLED", "COMPLETED"):
            return True
        time.sleep(0.1)
    return False


# Slurm's words where it refuses at submit a request no node configuration can hold (24.11); 22.05 and
# 26.05 accept it and leave it pending with PartitionConfig.
REFUSED_AT_SUBMIT = "Requested node configuration is not available"


@pytest.mark.parametrize(
    ("blocker", "request_args", "reason"),
    [
        # the whole cluster is busy: a request that fits the cluster waits for Resources
        (["-N2", "--exclusive"], ["-N2", "--gpus-per-node=8"], "Resources"),
        # more CPUs than the partition has at all: it waits for a partition that could hold it
        (None, ["-N2", "-n", "300"], "PartitionConfig"),
    ],
    ids=["busy-cluster", "larger-than-partition"],
)
def test_request_that_does_not_fit_pends_and_can_be_cancelled(
    slurm_sandbox, blocker, request_args, reason
) -> None:
    r = slurm_sandbox.runner()
    held = _sbatch(r, *blocker) if blocker else None
    job = None
    try:
        if held:
            assert _wait_state(r, held, "RUNNING").startswith("RUNNING")
        if reason == "PartitionConfig":
            res = r.run(
                [
                    "sbatch",
                    "--parsable",
                    "-J",
                    f"t-{uuid.uuid4().hex[:8]}",
                    "-t",
                    "10",
                    *request_args,
                    "--wrap",
                    "sleep 300",
                ],
                check=False,
            )
            if not res.ok:  # refused at submit: the other answer a Slurm may give, and nothing was queued
                assert REFUSED_AT_SUBMIT in res.stderr, res.stderr
                return
            job = res.stdout.strip().split(";")[0]
        else:
            job = _sbatch(r, *request_args)
        state = _wait_state(r, job, f"PENDING {reason}")
        assert state == f"PENDING {reason}", state
        r.run(["scancel", job])
        assert _wait_gone(r, job), "the cancelled job is still queued"
    finally:
        for j in (job, held):
            if j:
                r.run(["scancel", j], check=False)


def test_allocation_larger_than_the_partition_pends_or_is_refused_in_slurms_words(slurm_sandbox) -> None:
    """Unchecked by slurmlab (validate=False), Slurm decides: a pending allocation, or its refusal with one hint."""
    from slurmlab.errors import AllocationError
    from slurmlab.slurm.allocation import Allocation

    try:
        alloc = Allocation.submit(
            ["-N2", "-n", "300", "-t", "5"],
            runner=slurm_sandbox.runner(),
            validate=False,
            release_at_exit=False,
        )
    except AllocationError as exc:
        assert REFUSED_AT_SUBMIT in exc.message, exc.message
        assert exc.hint and "sinfo" in exc.hint and "\n" not in exc.hint, exc.hint
        return
    try:
        assert alloc.job_id is not None and alloc.state == "PENDING", (alloc.state, alloc.salloc_messages)
    finally:
        alloc.cancel()


def test_mig_type_request(sandbox_factory) -> None:
    sb = sandbox_factory("h200-mig")
    r = sb.runner()
    job = _salloc(r, "-p", "mig", "--gres=gpu:1g.18gb:1")
    try:
        assert re.search(r"GRES=gpu:1g\.18gb:1\(IDX:\d+\)", _show_job(r, job))
    finally:
        _scancel(r, job)


def test_validation_agrees_with_this_slurm_on_what_differs_between_versions(slurm_sandbox) -> None:
    """slurmlab reads the sandbox's version and predicts Slurm's answer: refused with Slurm's words, or granted."""
    from slurmlab.core.request.request import RequestProblems, version_text
    from slurmlab.magics.allocate import prepare_request
    from slurmlab.slurm import queries

    r = slurm_sandbox.runner()
    version = queries.slurm_version(r)
    args = ["--gres=gpu:1", "--gpus-per-node=1"]
    try:
        _, note = prepare_request(list(args), r)
        predicted = None
        assert f"Slurm {version_text(version)}" in note, note
    except RequestProblems as exc:
        predicted = exc.problems[0].message
    res = r.run(
        ["salloc", "--no-shell", "--immediate=10", "-J", f"t-{uuid.uuid4().hex[:8]}", "-t", "5", *args],
        check=False,
        timeout=30,
    )
    granted = re.search(r"Granted job allocation (\d+)", res.stderr)
    if granted:
        _scancel(r, granted.group(1))
    if predicted is None:
        assert granted, f"slurmlab let it through but Slurm {version} said: {res.stderr}"
    else:
        said = res.stderr.strip().splitlines()[-1].split(": ", 2)[-1].rstrip(".")
        assert not granted and said in predicted, (said, predicted)
    # more task CPUs than the partition holds: refused by slurmlab on every version, before Slurm
    with pytest.raises(RequestProblems, match="300 CPUs; partition .gpu. has 224 CPUs"):
        prepare_request(["-N2", "-n", "300"], r)
