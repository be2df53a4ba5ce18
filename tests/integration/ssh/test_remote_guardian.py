"""The lease over SSH for real (:mod:`slurmlab.slurm.ssh.lease`): a held allocation outlives a link that drops and
comes back within its lease, and is released by the cluster once the lease runs out with the kernel gone.

The loopback sshd and its sandbox are the session fixtures of tests/integration/ssh/conftest.py; the login node
"reboots" (sshd stopped) as the laptop's master is killed, so nothing can renew the lease meanwhile.
"""

from __future__ import annotations

import json
import os
import re
import signal
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

import pytest

from slurmlab.slurm.allocation import Allocation
from slurmlab.slurm.poller import JobPoller
from slurmlab.slurm.runner import Runner
from slurmlab.testing.loopback_sshd import cut_link, job_state, leased_link, wait_until

pytestmark = pytest.mark.sandbox

LEASE = 12.0  # seconds: renewed every 3 s while the link is up


def test_a_link_down_and_back_within_the_lease_releases_nothing(loopback_sshd: Any, ssh_sandbox: Any) -> None:
    link = leased_link(loopback_sshd, "lease-alive", LEASE)
    runner = Runner(slurm_conf=str(ssh_sandbox.conf_path), ssh=link)
    poller = JobPoller(runner, interval=0.5)
    local = ssh_sandbox.runner()
    # held by its salloc, as every allocation that lives with its kernel
    alloc = Allocation.submit(["-N1", "-t", "5"], runner=runner, poller=poller, release_at_exit=True)
    try:
        alloc.wait("RUNNING", timeout=60)
        job = str(alloc.job_id)
        wait_until(lambda: link.lease_words() is not None, 15)  # a renewal saw the holder's lease of the job
        with cut_link(loopback_sshd, link) as cut:
            wait_until(lambda: alloc.error and "is down since" in alloc.error, 15)
            said = str(alloc.error)
            # the panel says when the cluster would release the job if the link stayed down
            assert re.search(rf"if it stays down past \d\d:\d\d the cluster releases job {job}\b", said), said
            time.sleep(LEASE / 2)
            assert job_state(local, job) == "RUNNING"  # a link that drops does not end the hold
        wait_until(lambda: link.connected() and alloc.error is None, 60)
        # back within the lease: renewed, so well past the lease the cut would have run out, nothing is released
        time.sleep(max(0.0, cut + 2 * LEASE - time.monotonic()))
        assert job_state(local, job) == "RUNNING" and alloc.state == "RUNNING"
    finally:
        try:
            alloc.cancel()
        finally:
            poller.stop()
            link.disconnect()
    # a release over a working link is at once
    wait_until(lambda: job_state(local, job) in ("CANCELLED", "COMPLETED", ""), 30)


# The kernel: a process of its own that allocates over the link (sharing the test's master) and is then killed.
KERNEL = """
import json, sys, time
from slurmlab.slurm.allocation import Allocation
from slurmlab.slurm.guardian import get_guardian
from slurmlab.slurm.runner import Runner
from slurmlab.slurm.ssh import SshLink
spec = json.loads(sys.argv[1])
link = SshLink.from_settings(spec["link"])
link.connect()
alloc = Allocation.submit(["-N1", "-t", "5"], runner=Runner(slurm_conf=spec["conf"], ssh=link))
alloc.wait("RUNNING", timeout=60)
while link.lease_words() is None:
    time.sleep(0.2)
print(json.dumps({"job": alloc.job_id, "guardian": get_guardian().pid}), flush=True)
time.sleep(600)
"""


def test_a_kernel_gone_while_the_link_is_down_is_released_after_the_lease_not_before(
    loopback_sshd: Any, ssh_sandbox: Any, tmp_path: Path
) -> None:
    link = leased_link(loopback_sshd, "lease-dead", LEASE)
    local = ssh_sandbox.runner()
    spec = {"link": link.settings(), "conf": str(ssh_sandbox.conf_path)}
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
        assert job_state(local, job) == "RUNNING"
        with cut_link(loopback_sshd, link) as cut:  # down for good: nothing renews the lease from here
            os.killpg(kernel.pid, signal.SIGKILL)  # the laptop's kernel dies while the link is down
            kernel.wait(timeout=10)
            if guardian:  # its local guardian cannot reach the cluster either: it goes with the laptop
                os.kill(guardian, signal.SIGKILL)
            # the lease was renewed at most LEASE / 4 before the cut: until then, the job is held
            time.sleep(max(0.0, cut + LEASE / 2 - time.monotonic()))
            assert job_state(local, job) == "RUNNING", "released before its lease ran out"
            wait_until(lambda: job_state(local, job) not in ("RUNNING", "COMPLETING"), 3 * LEASE)
            released = time.monotonic() - cut
            assert released >= LEASE * 3 / 4 - 1, released
            assert job_state(local, job) == "CANCELLED"
    finally:
        if kernel.poll() is None:
            os.killpg(kernel.pid, signal.SIGKILL)
        link.disconnect()
        if job:
            local.run(["scancel", job], check=False)


def test_a_detached_allocation_outlives_the_link_and_the_lease(loopback_sshd: Any, ssh_sandbox: Any) -> None:
    link = leased_link(loopback_sshd, "lease-detach", LEASE)
    runner = Runner(slurm_conf=str(ssh_sandbox.conf_path), ssh=link)
    poller = JobPoller(runner, interval=0.5)
    local = ssh_sandbox.runner()
    alloc = Allocation.submit(["-N1", "-t", "5"], runner=runner, poller=poller, release_at_exit=True)
    job = ""
    try:
        alloc.wait("RUNNING", timeout=60)
        job = str(alloc.job_id)
        wait_until(lambda: link.lease_words() is not None, 15)
        alloc.detach()  # kept for a later kernel: neither salloc's end nor the lease may release it
        assert link.lease_words() is None  # no longer held: nothing for the panel to warn of
        with cut_link(loopback_sshd, link, login_node_down=False):
            time.sleep(LEASE * 1.5 + 2)
            assert job_state(local, job) == "RUNNING"
    finally:
        poller.stop()
        link.disconnect()
        if job:
            local.run(["scancel", job], check=False)
