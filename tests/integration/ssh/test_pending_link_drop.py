"""A held allocation still PENDING when the SSH link drops, for real (:mod:`slurmlab.slurm.ssh.lease`): it is
granted while the link is down, and is then neither lost (a link back within the lease finds it running and held)
nor left behind (with the kernel gone, the cluster releases it once the lease, counted from the last renewal
before the drop, has run out; not a whole lease after the grant).

Measured on the loopback sshd (tests/integration/ssh/conftest.py): salloc on the login node outlives the session
that ends under it while it waits (sshd signals nothing of a session without a terminal) and is granted; its
holder starts at the grant with the session gone. The job pends behind a local job holding the one node
exclusively; the blocker is cancelled while the link is down, and the controller grants the held request then.
"""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from slurmlab.slurm.allocation import Allocation
from slurmlab.slurm.poller import JobPoller
from slurmlab.slurm.runner import Runner
from slurmlab.testing.loopback_sshd import cut_link, job_state, leased_link, wait_until

pytestmark = pytest.mark.sandbox

LEASE = 12.0  # seconds: renewed every 3 s while the link is up
REQUEST = ["-N1", "--exclusive", "-t", "5"]  # waits while the blocker holds the sandbox's node


def _leases(runner: Runner) -> list[str]:
    """The lease files on the login node (the ssh user's)."""
    said = runner.run(["sh", "-c", 'ls -A "$HOME/.cache/slurmlab/leases" 2>/dev/null; exit 0']).stdout
    return said.split()


@pytest.fixture
def blocker(ssh_sandbox: Any) -> Iterator[str]:
    """A local job holding the sandbox's one node alone, so that a request for it pends."""
    local = ssh_sandbox.runner()
    submitted = local.run(["sbatch", "--parsable", "-o", "/dev/null", *REQUEST, "--wrap", "sleep 300"])
    job = submitted.stdout.strip().split(";")[0]
    wait_until(lambda: job_state(local, job) == "RUNNING", 30)
    try:
        yield job
    finally:
        local.run(["scancel", job], check=False)


def test_a_job_granted_while_the_link_is_down_is_found_running_and_held_when_it_is_back(
    loopback_sshd: Any, ssh_sandbox: Any, blocker: str
) -> None:
    link = leased_link(loopback_sshd, "pending-alive", LEASE)
    runner = Runner(slurm_conf=str(ssh_sandbox.conf_path), ssh=link)
    poller = JobPoller(runner, interval=0.5)
    local = ssh_sandbox.runner()
    alloc = Allocation.submit(REQUEST, runner=runner, poller=poller, release_at_exit=True)
    job = ""
    try:
        alloc.wait("PENDING", timeout=30)
        job = str(alloc.job_id)
        assert len(_leases(runner)) == 1  # its lease is there before the grant
        time.sleep(LEASE / 4 + 1)  # renewed at least once while it pends
        with cut_link(loopback_sshd, link) as cut:
            local.run(["scancel", blocker])
            wait_until(lambda: job_state(local, job) == "RUNNING", 15)  # granted while the link is down
            time.sleep(max(0.0, cut + LEASE / 2 - time.monotonic()))
            assert job_state(local, job) == "RUNNING"
        wait_until(lambda: link.connected() and alloc.error is None and alloc.state == "RUNNING", 60)
        # back within the lease: renewed, so well past when the cut would have run it out, nothing is released
        time.sleep(max(0.0, cut + 2 * LEASE - time.monotonic()))
        assert job_state(local, job) == "RUNNING" and alloc.state == "RUNNING"
        # still held: its holder named the job in its lease, which the kernel renews
        wait_until(lambda: link.lease_words() is not None, 10)
        assert f"releases job {job}" in str(link.lease_words())
    finally:
        try:
            alloc.cancel()
        finally:
            poller.stop()
    # the kernel's release over the working link ends it
    wait_until(lambda: job_state(local, job) in ("CANCELLED", "COMPLETED", ""), 30)
    link.disconnect()


# The kernel: a process of its own that asks over the link (sharing the test's master), pends, and is then killed.
KERNEL = """
import json, sys, time
from slurmlab.slurm.allocation import Allocation
from slurmlab.slurm.guardian import get_guardian
from slurmlab.slurm.runner import Runner
from slurmlab.slurm.ssh import SshLink
spec = json.loads(sys.argv[1])
link = SshLink.from_settings(spec["link"])
link.connect()
alloc = Allocation.submit(spec["request"], runner=Runner(slurm_conf=spec["conf"], ssh=link))
alloc.wait("PENDING", timeout=60)
print(json.dumps({"job": alloc.job_id, "guardian": get_guardian().pid}), flush=True)
time.sleep(600)
"""


def test_a_pending_job_of_a_kernel_gone_is_released_once_the_lease_ran_out_not_a_lease_after_its_grant(
    loopback_sshd: Any, ssh_sandbox: Any, blocker: str
) -> None:
    link = leased_link(loopback_sshd, "pending-dead", LEASE)
    local = ssh_sandbox.runner()
    spec = {"link": link.settings(), "conf": str(ssh_sandbox.conf_path), "request": REQUEST}
    root = str(Path(__file__).resolve().parents[3])
    kernel = subprocess.Popen(
        [sys.executable, "-c", KERNEL, json.dumps(spec)],
        stdout=subprocess.PIPE,
        text=True,
        start_new_session=True,
        env={**os.environ, "PYTHONPATH": root},
    )
    job = ""
    try:
        assert kernel.stdout is not None
        said = json.loads(kernel.stdout.readline())
        job, guardian = str(said["job"]), said["guardian"]
        assert job_state(local, job) == "PENDING"
        with cut_link(loopback_sshd, link) as cut:  # down for good: nothing renews the lease from here
            os.killpg(kernel.pid, signal.SIGKILL)  # the laptop's kernel dies while its job pends
            kernel.wait(timeout=10)
            if guardian:  # its local guardian cannot reach the cluster either: it goes with the laptop
                os.kill(guardian, signal.SIGKILL)
            time.sleep(max(0.0, cut + LEASE + 1 - time.monotonic()))  # the lease has run out
            assert job_state(local, job) == "PENDING"
            local.run(["scancel", blocker])  # the node frees: the controller grants the request
            # released as soon as its holder starts, never held a lease's length past the grant
            wait_until(lambda: job_state(local, job) == "CANCELLED", LEASE / 2)
    finally:
        if kernel.poll() is None:
            os.killpg(kernel.pid, signal.SIGKILL)
        if job:
            local.run(["scancel", job], check=False)
    # and nothing is left on the login node: the holder took its lease file along
    link.connect()  # nothing of this process used the link since the cut: it connects again by hand
    wait_until(lambda: not _leases(Runner(slurm_conf=str(ssh_sandbox.conf_path), ssh=link)), 15)
    link.disconnect()


def test_a_pending_request_withdrawn_over_a_working_link_leaves_no_lease_behind(
    loopback_sshd: Any, ssh_sandbox: Any, blocker: str
) -> None:
    link = leased_link(loopback_sshd, "pending-withdrawn", LEASE)
    runner = Runner(slurm_conf=str(ssh_sandbox.conf_path), ssh=link)
    poller = JobPoller(runner, interval=0.5)
    alloc = Allocation.submit(REQUEST, runner=runner, poller=poller, release_at_exit=True)
    try:
        alloc.wait("PENDING", timeout=30)
        assert len(_leases(runner)) == 1
        alloc.cancel()
        wait_until(
            lambda: not _leases(runner), 15
        )  # made before salloc, gone with it: no holder ever started
    finally:
        poller.stop()
        link.disconnect()
