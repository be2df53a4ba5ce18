"""Faults of a real sandbox: munged stopped or frozen, slurmctld frozen or killed, a slurmd killed.

Every call fails within seconds and names the daemon at fault; ``restart`` brings the daemons back and the
jobs survive. The sandbox is this module's own (SlurmdTimeout=15, so that a dead slurmd shows within
seconds), never the session's: breaking it breaks no other test.
"""

from __future__ import annotations

import asyncio
import getpass
import os
import shutil
import signal
import subprocess
import sys
import tempfile
import time
from collections.abc import Iterator
from pathlib import Path

import pytest

from slurmlab.errors import ControllerDownError, MungeError
from slurmlab.sandbox import Sandbox
from slurmlab.sandbox.processes import alive, frozen
from slurmlab.slurm.runner import Runner
from slurmlab.testing.sandbox_fixtures import slurm_missing_reason

REPO = Path(__file__).resolve().parents[3]
pytestmark = [pytest.mark.sandbox, pytest.mark.skipif(slurm_missing_reason() is not None,
                                                      reason=slurm_missing_reason() or "")]


@pytest.fixture(scope="module")
def sandbox() -> Iterator[Sandbox]:
    base = Path(tempfile.mkdtemp(prefix="slsb-flt-", dir="/tmp"))
    sb = Sandbox.up(profile="seed", nodes=2, directory=base / "sb", slurmd_timeout=15, accounting=False)
    try:
        yield sb
    finally:
        for pid in sb.pids.values():
            if alive(pid) and frozen(pid):
                os.kill(pid, signal.SIGCONT)
        sb.down()
        shutil.rmtree(base, ignore_errors=True)


@pytest.fixture
def sb(sandbox: Sandbox) -> Iterator[Sandbox]:
    """The module's sandbox, healthy and without jobs after each test (whatever the test left)."""
    yield sandbox
    for pid in sandbox.pids.values():
        if alive(pid) and frozen(pid):
            os.kill(pid, signal.SIGCONT)
    sandbox.restart()
    sandbox.runner(timeout=10).run(["scancel", "--user", getpass.getuser()], check=False)


def wait_until(check, timeout: float, what: str, step: float = 0.2):  # type: ignore[no-untyped-def]
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        value = check()
        if value:
            return value
        time.sleep(step)
    raise AssertionError(f"{what} did not happen within {timeout:g} s")


def wait_dead(pid: int) -> None:
    wait_until(lambda: not alive(pid), 10, f"pid {pid} ending", 0.05)


def running_job(sb: Sandbox, node: str) -> tuple[str, str]:
    """A batch job RUNNING on ``node``: (job id, its start time)."""
    r = sb.runner(timeout=10)
    job = r.run(["sbatch", "--parsable", "-w", node, "-t", "10", "--wrap", "sleep 600"]).stdout.strip()
    start = wait_until(lambda: _job(r, job) if _job(r, job).startswith("RUNNING") else None, 20, f"job {job} running")
    return job, start.split()[1]


def _job(r: Runner, job: str) -> str:
    return r.run(["squeue", "-h", "-j", job, "-o", "%T %S %N"], check=False).stdout.strip()


def timed(call):  # type: ignore[no-untyped-def]
    t0 = time.monotonic()
    try:
        call()
    except Exception as exc:  # the test looks at which one
        return exc, time.monotonic() - t0
    return None, time.monotonic() - t0


def test_a_frozen_munged_is_named_within_seconds_and_restart_resumes_it(sb: Sandbox) -> None:
    r = sb.runner(timeout=30)
    pid = sb.pids["munged"]
    os.kill(pid, signal.SIGSTOP)
    try:
        err, took = timed(lambda: r.run(["squeue"]))
        assert isinstance(err, MungeError), err
        assert took < 10, f"took {took:.1f} s (the timeout is 30 s)"
        assert "munge" in err.message and "frozen" in err.message and "controller" not in str(err)
        assert err.hint == f"bring munged back, keeping every job: slurmlab sandbox restart --dir {sb.directory}"
        st = sb.status()
        assert st.frozen == {"munged"} and not st.running and "FROZEN" in str(st)
    finally:
        done = sb.restart()
    assert done == [f"munged: was frozen (pid {pid}); resumed"]
    assert r.run(["squeue", "-h"]).ok and sb.status().running


@pytest.mark.parametrize("sig", [signal.SIGTERM, signal.SIGKILL], ids=["SIGTERM", "SIGKILL"])
def test_a_stopped_munged_is_named_at_once_sync_and_async_and_restart_brings_it_back(
    sb: Sandbox, sig: signal.Signals
) -> None:
    r = sb.runner(timeout=30)
    job, start = running_job(sb, "node1")
    pid = sb.pids["munged"]
    os.kill(pid, sig)
    wait_dead(pid)
    for call in (lambda: r.run(["squeue"]), lambda: asyncio.run(r.arun(["sinfo"]))):
        err, took = timed(call)
        assert isinstance(err, MungeError), err
        assert took < 8, f"took {took:.1f} s"
        assert "munged is not running" in err.message and "sandbox restart" in str(err.hint)
    assert "munged         pid" in str(sb.status()) and "NOT RUNNING" in str(sb.status())
    done = sb.restart()
    assert [d.split(":")[0] for d in done] == ["munged"] and "restarted as pid" in done[0]
    assert sb.pids["munged"] != pid and alive(sb.pids["munged"])
    assert _job(r, job).split()[:2] == ["RUNNING", start]


def test_a_frozen_controller_fails_within_its_timeout_without_blocking_the_loop(sb: Sandbox) -> None:
    job, start = running_job(sb, "node1")
    fast = Runner(slurm_conf=str(sb.conf_path), timeout=3)
    pid = sb.pids["slurmctld"]
    os.kill(pid, signal.SIGSTOP)
    try:
        err, took = timed(lambda: fast.run(["squeue"]))
        assert isinstance(err, ControllerDownError) and not isinstance(err, MungeError), err
        assert took < 3 + 2 and "not responding" in str(err)

        async def while_waiting() -> tuple[BaseException | None, int]:
            ticks = 0

            async def tick() -> None:
                nonlocal ticks
                while True:
                    await asyncio.sleep(0.1)
                    ticks += 1

            ticker = asyncio.create_task(tick())
            try:
                await fast.arun(["squeue"])
            except ControllerDownError as exc:
                return exc, ticks
            finally:
                ticker.cancel()
            return None, ticks

        aerr, ticks = asyncio.run(while_waiting())
        assert isinstance(aerr, ControllerDownError)
        assert ticks >= 15, f"the event loop ran only {ticks} ticks while waiting for the controller"
        st_took = timed(lambda: sb.status())[1]
        st = sb.status()
        assert st.frozen == {"slurmctld"} and st_took < 2  # status does not wait on a frozen controller
    finally:
        done = sb.restart()
    assert done == [f"slurmctld: was frozen (pid {pid}); resumed"]
    assert _job(fast, job).split()[:2] == ["RUNNING", start]


def test_a_killed_controller_comes_back_with_restart_and_its_running_job_survives(sb: Sandbox) -> None:
    job, start = running_job(sb, "node1")
    seen_running = time.time()
    # slurmctld saves its state a moment after a change: kill it once the running job is on disk
    state = sb.directory / "state" / "job_state"
    wait_until(lambda: state.exists() and state.stat().st_mtime > seen_running, 20, "the job state saved", 0.3)
    pid = sb.pids["slurmctld"]
    os.kill(pid, signal.SIGKILL)
    wait_dead(pid)
    err, took = timed(lambda: Runner(slurm_conf=str(sb.conf_path), timeout=3).run(["squeue"]))
    assert isinstance(err, ControllerDownError) and not isinstance(err, MungeError) and took < 3 + 2
    status = subprocess.run([sys.executable, "-m", "slurmlab", "sandbox", "status", "--dir", str(sb.directory)],
                            capture_output=True, text=True, timeout=60, cwd=REPO)
    assert status.returncode == 1 and "slurmctld" in status.stdout and "NOT RUNNING" in status.stdout
    assert "slurmlab sandbox restart" in status.stdout
    restart = subprocess.run([sys.executable, "-m", "slurmlab", "sandbox", "restart", "--dir", str(sb.directory)],
                             capture_output=True, text=True, timeout=120, cwd=REPO)
    assert restart.returncode == 0, restart.stdout + restart.stderr
    assert "slurmctld: was not running" in restart.stdout and ": running" in restart.stdout
    sb = Sandbox.find(sb.directory)
    assert sb.pids["slurmctld"] != pid
    assert "-c" not in Path(f"/proc/{sb.pids['slurmctld']}/cmdline").read_bytes().split(b"\0")  # keeps state
    r = sb.runner(timeout=10)
    assert _job(r, job).split()[:2] == ["RUNNING", start], "the job did not survive the restart"


def test_a_killed_slurmd_is_told_by_sinfo_status_and_a_watched_allocation_and_restart_brings_it_back(
    sb: Sandbox,
) -> None:
    """Slurm keeps a job RUNNING while its node's slurmd is dead: the node is flagged, ``status`` says so, and a
    watched allocation on that node says so in its panel; restart brings the slurmd back, the alert clears, and
    a job on the other node never noticed. (One kill for all three: each waits ~15-20 s for Slurm's ping.)"""
    from slurmlab.slurm.allocation import Allocation
    from slurmlab.slurm.poller import JobPoller
    from slurmlab.widgets.panel import panel_html

    job, start = running_job(sb, "node1")
    watched, _start = running_job(sb, "node2")
    r = sb.runner(timeout=10)
    poller = JobPoller(sb.runner(timeout=10), interval=0.5, node_check_interval=1.0)
    alloc = Allocation.attach(watched, runner=sb.runner(timeout=10), poller=poller)
    try:
        wait_until(lambda: alloc.state == "RUNNING", 20, "the allocation seen RUNNING")
        assert alloc.node_alerts == ()
        pid = sb.pids["slurmd:node2"]
        os.kill(pid, signal.SIGKILL)
        wait_dead(pid)

        def flagged() -> dict[str, str] | None:
            states = sb.node_states()
            return states if states.get("node2", "").endswith("*") else None

        # SlurmdTimeout=15: slurmctld pings every 5 s and flags the node after a failed ping (14-21 s seen)
        states = wait_until(flagged, 45, "node2 flagged NOT_RESPONDING")
        assert not states["node1"].endswith("*")
        st = str(sb.status())
        assert "slurmd:node2   pid" in st and "NOT RUNNING" in st and "not responding" in st
        wait_until(lambda: alloc.node_alerts, 60, "node2's trouble reaching the allocation")
        assert alloc.state == "RUNNING" and alloc.node_alerts[0][0] == "node2"
        assert "node2: not responding" in panel_html(alloc)
        done = sb.restart()
        assert [d.split(":")[0] + ":" + d.split(":")[1] for d in done] == ["slurmd:node2"]
        after = sb.node_states()
        assert not after["node2"].endswith("*") and not after["node2"].startswith("down")
        assert _job(r, job).split()[:2] == ["RUNNING", start]
        wait_until(lambda: not alloc.node_alerts, 30, "the alert clearing after restart")
    finally:
        poller.stop()
