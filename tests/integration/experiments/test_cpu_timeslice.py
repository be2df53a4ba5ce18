"""The CPU backend for real: processes pinned to one core are time-sliced by the OS."""

from __future__ import annotations

import os
from collections.abc import Callable
from typing import Any

import pytest

from slurmlab.experiments.timeslice import run
from slurmlab.experiments.timeslice_result import CONCURRENT, TIME_SLICED, TimesliceResult

pytestmark = [
    pytest.mark.slow,
    pytest.mark.serial,  # a second pytest worker on the other core would be measured as load
    pytest.mark.skipif(not hasattr(os, "sched_setaffinity"), reason="needs Linux CPU affinity"),
]


# This machine is shared: the workers ask for a higher priority (granted to root, recorded
# otherwise) and a run that other load visibly disturbed is measured again. "Disturbed" is
# judged from what the run itself measured (time no worker ran), never from the asserted result.
ATTEMPTS = 3


def _cores() -> list[int]:
    return sorted(os.sched_getaffinity(0))


def _undisturbed(valid: Callable[[TimesliceResult], bool], **kwargs: Any) -> TimesliceResult:
    result = None
    for _ in range(ATTEMPTS):
        result = run(None, nice=-10, **kwargs)
        if valid(result):
            break
    assert result is not None
    return result


def test_three_workers_on_one_core_are_time_sliced_fairly() -> None:
    core = _cores()[-1]
    r = _undisturbed(lambda r: r.busy_share >= 0.9, procs=3, duration=2.0, backend="cpu", cores=[core])
    assert r.classification == TIME_SLICED, r.summary()
    for p in r.processes:
        assert p.share == pytest.approx(1 / 3, abs=0.07), r.summary()
        assert p.slices.count > 10, r.summary()  # many whole slices were measured
        assert not p.truncated
    assert r.jain >= 0.9, r.summary()
    # the workers really ran where they were pinned
    assert r.meta["cpu_affinity"] == [[core]] * 3


def test_two_workers_on_two_cores_are_concurrent() -> None:
    cores = _cores()
    if len(cores) < 2:
        pytest.skip("needs two CPU cores")
    r = _undisturbed(lambda r: min(r.shares) >= 0.8, procs=2, duration=1.0, backend="cpu", cores=cores[:2])
    assert r.classification == CONCURRENT, r.summary()
    assert r.overlap[0, 1] >= 0.5


def test_fixed_work_shows_slowdown_against_a_solo_run() -> None:
    core = _cores()[-1]
    # two processes sharing a core cannot do more than one alone: an efficiency above 1.3 means the
    # solo run itself was slowed by other load, so that run is measured again
    r = _undisturbed(
        lambda r: r.aggregate_efficiency is not None and r.aggregate_efficiency < 1.3,
        procs=2,
        duration=0.5,
        backend="cpu",
        cores=[core],
        fma_iters=3000,
        solo=True,
    )
    assert r.solo_work_s is not None and r.solo_work_s > 0
    for p in r.processes:
        assert p.work_s is not None and p.slowdown is not None
        # two sharing one core each take clearly longer than one alone
        assert p.slowdown > 1.3, r.summary()
    assert r.aggregate_efficiency is not None and 0.5 < r.aggregate_efficiency < 1.3, r.summary()
