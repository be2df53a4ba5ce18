"""The shared poller against a real Slurm (the sandbox): a watched pending job keeps the base interval through
a quiet spell many times longer than ``quiet_after``, and its start reaches the watcher (issue 14, point 2).

Assertions are on the intervals the poller chose and the rounds it made, never on wall time; the waits
below are only upper bounds for a slow machine.
"""

from __future__ import annotations

import time
from collections.abc import Callable
from typing import Any

import pytest

from slurmlab.core.slurm.states import HOLDING
from slurmlab.slurm.poller import JobPoller, JobUpdate

pytestmark = pytest.mark.sandbox


def _until(pred: Callable[[], bool], timeout: float) -> bool:
    end = time.monotonic() + timeout
    while time.monotonic() < end:
        if pred():
            return True
        time.sleep(0.05)
    return pred()


def test_a_held_then_released_job_is_never_polled_less_often_than_the_base_interval(
    slurm_sandbox: Any,
) -> None:
    runner = slurm_sandbox.runner()
    out = runner.run(["sbatch", "--parsable", "-H", "-t", "2", "-o", "/dev/null", "--wrap", "sleep 30"])
    jid = out.stdout.strip().split(";")[0]
    # quiet_after far below the quiet spell: the former policy would have backed off to max_interval here
    p = JobPoller(runner, interval=0.2, max_interval=2.0, quiet_after=0.3, node_check_interval=60.0)
    seen: list[JobUpdate] = []
    try:
        p.watch(jid, seen.append)
        assert _until(lambda: p.polls >= 15, timeout=60), "the poller made too few rounds"
        assert seen and seen[-1].brief is not None and seen[-1].brief.state == "PENDING"
        quiet = list(p.intervals)
        assert len(quiet) >= 14 and max(quiet) == 0.2  # held for 3 s: never backed off
        runner.run(["scontrol", "release", jid])
        assert _until(
            lambda: bool(seen) and seen[-1].brief is not None and seen[-1].brief.state in HOLDING, timeout=60
        ), f"job {jid} never started: {seen[-1] if seen else None}"
        assert seen[-1].detail is not None  # the change brought the detail with it
        assert max(p.intervals) == 0.2
    finally:
        p.stop()
        runner.run(["scancel", jid], check=False)
