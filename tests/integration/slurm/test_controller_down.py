"""A stopped controller: calls fail within their timeout and say so; after SIGCONT all carries on."""

from __future__ import annotations

import os
import signal
import time
from typing import Any

import pytest

from slurmlab.errors import ControllerDownError
from slurmlab.slurm import queries
from slurmlab.slurm.allocation import Allocation
from slurmlab.slurm.poller import JobPoller, JobUpdate
from slurmlab.slurm.runner import Runner

pytestmark = pytest.mark.sandbox


def test_stopped_controller_fails_fast_with_a_plain_message_then_recovers(sandbox: Any) -> None:
    runner = sandbox.runner()
    alloc = Allocation.submit(["--gpus=1", "-t", "5"], runner=runner)
    alloc.wait(timeout=20)
    queries.slurm_version(runner)  # detected before the outage, as in a live session

    fast = Runner(slurm_conf=str(sandbox.conf_path), timeout=3)
    poller = JobPoller(fast, interval=0.3)
    updates: list[JobUpdate] = []
    poller.watch(alloc.job_id or "", updates.append)
    time.sleep(1)
    pid = sandbox.pids["slurmctld"]
    os.kill(pid, signal.SIGSTOP)
    try:
        t0 = time.monotonic()
        with pytest.raises(ControllerDownError) as info:
            queries.list_jobs(fast)
        assert time.monotonic() - t0 < 3 + 2
        assert "not responding" in str(info.value)
        # the shared poller tells its watchers instead of dying
        deadline = time.monotonic() + 10
        while not any(u.error for u in updates) and time.monotonic() < deadline:
            time.sleep(0.2)
        assert any(isinstance(u.error, ControllerDownError) for u in updates)
        assert poller.running
    finally:
        os.kill(pid, signal.SIGCONT)
    # everything carries on
    jobs = queries.list_jobs(fast)
    assert str(alloc.job_id) in {str(j.job_id) for j in jobs}
    deadline = time.monotonic() + 15
    while (updates[-1].error is not None) and time.monotonic() < deadline:
        time.sleep(0.2)
    assert updates[-1].error is None and updates[-1].brief is not None
    poller.stop()
    alloc.cancel()
