"""A stopped controller: calls fail within their timeout and say so; after SIGCONT all carries on. A dead one
(24.11+ answer `scontrol --json show job` with no jobs and exit 0 then) is not an empty queue nor an ended job."""

from __future__ import annotations

import os
import signal
import time
from collections.abc import Callable
from concurrent.futures import ThreadPoolExecutor
from typing import Any

import pytest

from slurmlab.errors import ControllerDownError, JobNotFoundError
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


def _wait_exited(pid: int, timeout: float = 15.0) -> None:
    from slurmlab.sandbox.processes import alive

    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if not alive(pid):  # a zombie (exited, not yet collected by its parent) counts as gone
            return
        time.sleep(0.1)
    raise AssertionError(f"slurmctld (pid {pid}) did not exit within {timeout:g} s of SIGTERM")


def _failure_of(ask: Callable[[], object]) -> BaseException | None:
    try:
        ask()
    except BaseException as exc:  # handed to the test, which says what it expected
        return exc
    return None


def test_a_dead_controller_is_neither_an_empty_queue_nor_an_ended_job(sandbox: Any) -> None:
    runner = sandbox.runner()
    alloc = Allocation.submit(["--gpus=1", "-t", "5"], runner=runner)
    alloc.wait(timeout=20)
    queries.slurm_version(runner)  # detected before the outage, as in a live session
    jid = alloc.job_id or ""
    # with slurmctld dead, 24.11 `scontrol --json show job -d` retries for 9 s (18 s with a job id) before it
    # prints its empty answer, and every version's squeue retries 18 s: the runner's ping after 2 s tells first
    # (a limit below that would stop at the timeout instead)
    patient = Runner(slurm_conf=str(sandbox.conf_path), timeout=30)
    pid = sandbox.pids["slurmctld"]
    os.kill(pid, signal.SIGTERM)  # saves its state; restart() recovers every job from it
    try:
        _wait_exited(pid)
        # the three asks side by side
        asks: dict[str, Callable[[], object]] = {
            "queue": lambda: queries.list_jobs(patient, all_users=True),
            "detail": lambda: queries.job_detail(jid, patient),
            "refresh": alloc.refresh,
        }
        with ThreadPoolExecutor(max_workers=len(asks)) as pool:
            failed = dict(zip(asks, pool.map(_failure_of, asks.values()), strict=True))
        for what in ("queue", "detail"):
            error = failed[what]
            assert isinstance(error, ControllerDownError) and not isinstance(error, JobNotFoundError), (
                what,
                error,
            )
            # the ping tells a dead controller from an empty answer (24.11+ exit 0 with no jobs), whichever comes
            # first: the runner's after 2 s without an answer, or the one after an empty answer
            assert (
                "not responding" in str(error)
                and "`scontrol ping` says" in str(error)
                and "is DOWN" in str(error)
            )
        assert isinstance(failed["refresh"], ControllerDownError), failed["refresh"]
        assert alloc.state == "RUNNING" and not alloc.ended
    finally:
        sandbox.restart()
    # the empty answer of a live controller stands: the job is there again, an unknown one is unknown
    assert jid in {str(j.job_id) for j in queries.list_jobs(patient)}
    with pytest.raises(JobNotFoundError):
        queries.job_detail("999999", patient)
    alloc.refresh()
    assert alloc.state == "RUNNING"
    alloc.cancel()
