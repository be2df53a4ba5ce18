"""The CPU time-slice run through real sandbox steps (srun --overlap) gives the local verdict."""

from __future__ import annotations

import os
from collections.abc import Callable, Iterator
from typing import Any

import pytest

from slurmlab.experiments.timeslice import run
from slurmlab.experiments.timeslice_result import CONCURRENT, TIME_SLICED, TimesliceResult

pytestmark = [
    pytest.mark.sandbox,
    pytest.mark.slow,
    pytest.mark.skipif(not hasattr(os, "sched_setaffinity"), reason="needs Linux CPU affinity"),
]

# The same guard as the local tests (tests/integration/experiments/test_cpu_timeslice.py): this
# machine is shared, so workers ask for a higher priority and a run that other load visibly
# disturbed (judged from what the run measured, never from the asserted result) runs again.
ATTEMPTS = 3


@pytest.fixture(scope="module")
def alloc(slurm_sandbox: Any) -> Iterator[Any]:
    from slurmlab.slurm.allocation import Allocation

    # --gpus=1 per job: the case where Slurm 22.05 refuses an --overlap step without a GPU request
    a = Allocation.submit(["-n2", "--gpus=1", "-t", "15"], name="test-steps-timeslice")
    try:
        a.wait(timeout=60)
        yield a
    finally:
        a.cancel()


def _undisturbed(valid: Callable[[TimesliceResult], bool], alloc: Any, **kwargs: Any) -> TimesliceResult:
    result = None
    for _ in range(ATTEMPTS):
        result = run(alloc, nice=-10, **kwargs)
        if valid(result):
            break
    assert result is not None
    return result


def test_three_step_workers_on_one_core_are_time_sliced_fairly(alloc: Any) -> None:
    r = _undisturbed(lambda r: r.busy_share >= 0.9, alloc, procs=3, duration=2.0, backend="cpu")
    assert r.meta["launcher"] == "steps"
    # every worker really was a step of this job, on one core
    for argv in r.meta["step_argv"]:
        assert argv[:3] == ["srun", f"--jobid={alloc.job_id}", "--overlap"]
    jobs = {rep["slurm_env"].get("SLURM_JOB_ID") for rep in r.meta["reports"]}
    steps = {rep["slurm_env"].get("SLURM_STEP_ID") for rep in r.meta["reports"]}
    assert jobs == {str(alloc.job_id)} and len(steps) == 3
    assert len({tuple(a) for a in r.meta["cpu_affinity"]}) == 1 and len(r.meta["cpu_affinity"][0]) == 1
    if os.path.exists("/proc/self/autogroup"):
        # each worker leads its own session on the node, so its niceness counts (as locally)
        groups = [str(g).split()[0] for g in r.meta["autogroup"]]
        assert len(set(groups)) == 3 and all(g.startswith("/autogroup-") for g in groups), groups
    assert r.classification == TIME_SLICED, r.summary()
    for p in r.processes:
        assert p.share == pytest.approx(1 / 3, abs=0.07), r.summary()
        assert p.slices.count > 10, r.summary()
        assert not p.truncated
    assert r.jain >= 0.9, r.summary()


def test_two_step_workers_on_two_cores_are_concurrent(alloc: Any) -> None:
    if len(os.sched_getaffinity(0)) < 2:
        pytest.skip("needs two CPU cores")
    r = _undisturbed(lambda r: min(r.shares) >= 0.8, alloc, procs=2, duration=1.0, backend="cpu", cores=2)
    assert sorted(a[0] for a in r.meta["cpu_affinity"]) == r.meta["probe"]["cpus"][:2]
    assert r.classification == CONCURRENT, r.summary()
    assert r.overlap[0, 1] >= 0.5


def test_asking_for_more_cores_than_the_step_has_says_so(alloc: Any) -> None:
    from slurmlab.errors import ExperimentError

    with pytest.raises(ExperimentError, match="may use only"):
        run(alloc, procs=2, duration=0.2, backend="cpu", cores=64)
