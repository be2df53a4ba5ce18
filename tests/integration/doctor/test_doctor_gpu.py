"""The doctor's GPU-node checks against a real Slurm: on a sandbox job they run their probe step and SKIP, saying
the sandbox has no GPU (its nvidia-smi is slurmlab's stand-in); a job that is not running or holds no GPU gets one
SKIP saying what to pass."""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

import pytest

from slurmlab.core.diagnosis.findings import Verdict
from slurmlab.core.diagnosis.gpu_checks import GPU_CHECKS
from slurmlab.core.gpu.standin_names import STANDIN_MARK
from slurmlab.slurm.allocation import Allocation
from slurmlab.slurm.doctor_gpu import gpu_checks
from tests.integration.sandbox_jobs import clear_queue

pytestmark = pytest.mark.sandbox


@pytest.fixture
def gpu_sandbox(slurm_sandbox: Any) -> Iterator[Any]:
    clear_queue(slurm_sandbox.runner())
    yield slurm_sandbox
    clear_queue(slurm_sandbox.runner())


def test_every_gpu_check_skips_on_a_sandbox_job_and_says_why(gpu_sandbox: Any) -> None:
    runner = gpu_sandbox.runner()
    alloc = Allocation.submit(["--gpus=2", "-t", "5"], runner=runner)
    try:
        alloc.wait(timeout=30)
        node = alloc.nodes[0]
        found = gpu_checks(runner, alloc.job_id or "", timeout=30)
        assert [f.check for f in found] == list(GPU_CHECKS)
        assert {f.verdict for f in found} == {Verdict.SKIP}
        for f in found:
            assert "the sandbox has no GPU" in f.evidence and STANDIN_MARK in f.evidence, f
            assert f.subject == f"job {alloc.job_id} on {node}"
        # the step really ran on the node the job holds: naming it gives the same answer, another node does not
        again = gpu_checks(runner, alloc.job_id or "", node, timeout=30)
        assert [f.evidence for f in again] == [f.evidence for f in found]
        other = gpu_checks(runner, alloc.job_id or "", "no-such-node")
        assert len(other) == 1 and other[0].verdict is Verdict.SKIP and node in other[0].fix
    finally:
        alloc.cancel()


def test_a_job_that_does_not_run_or_holds_no_gpu_gets_one_skip_saying_what_to_pass(gpu_sandbox: Any) -> None:
    runner = gpu_sandbox.runner()
    held = runner.run(["sbatch", "--parsable", "--hold", "--gpus=1", "-t", "5", "--wrap", "sleep 300"]).stdout
    held_id = held.strip().split(";")[0]
    [pending] = gpu_checks(runner, held_id)
    assert pending.verdict is Verdict.SKIP and "PENDING" in pending.evidence and "--job" in pending.fix
    cpu_only = Allocation.submit(["-n1", "-t", "5"], runner=runner)
    try:
        cpu_only.wait(timeout=30)
        [none] = gpu_checks(runner, cpu_only.job_id or "")
        assert none.verdict is Verdict.SKIP and "holds no GPUs" in none.evidence
    finally:
        cpu_only.cancel()
    [unknown] = gpu_checks(runner, "999999")
    assert unknown.verdict is Verdict.SKIP and "999999" in unknown.evidence
