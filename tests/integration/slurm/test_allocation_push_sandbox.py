"""Issue 27, point 1, on the real sandbox: an allocation held by its salloc learns of a ``scancel`` from outside
and of its grant from Slurm's push, not from a poll, and an idle one costs the controller (almost) nothing.

The poller here polls every 30 s, so a state seen within the 1.5 s bound can only have come from salloc; the
bound itself only detects a hang (the push takes milliseconds). The RPC count reads Slurm's own ``sdiag``.
"""

from __future__ import annotations

import re
import threading
import time
from typing import Any

import pytest

from slurmlab.slurm.allocation import Allocation
from slurmlab.slurm.poller import JobPoller

pytestmark = pytest.mark.sandbox

PUSH_BOUND = 1.5  # the target; a hang guard, not a speed measurement
SLOW_POLL = 30.0  # no poll round falls inside the bound


def _first(alloc: Allocation, state: str) -> threading.Event:
    seen = threading.Event()
    alloc.subscribe(lambda a: seen.set() if a.state == state else None)
    if alloc.state == state:
        seen.set()
    return seen


def test_a_scancel_from_outside_reaches_the_allocation_by_push(sandbox: Any) -> None:
    runner = sandbox.runner()
    poller = JobPoller(runner, interval=SLOW_POLL)
    alloc = Allocation.submit(["--gpus=1", "-t", "5"], runner=runner, poller=poller)
    try:
        alloc.wait(timeout=30)
        time.sleep(2)  # past the poll rounds that follow a grant: from here on only a push can tell
        cancelled = _first(alloc, "CANCELLED")
        polls = poller.polls
        runner.run(["scancel", str(alloc.job_id)])  # from outside: another terminal, an administrator
        assert cancelled.wait(PUSH_BOUND), f"no CANCELLED within {PUSH_BOUND} s: {alloc.state}"
        assert poller.polls <= polls + 1  # the poke that follows the push may have run; no polling did it
        assert any("has been revoked" in line for line in alloc.salloc_messages), alloc.salloc_messages
    finally:
        alloc.cancel()


def test_the_grant_of_a_pending_allocation_is_pushed(sandbox: Any) -> None:
    """Kept from before: a ``salloc --no-shell`` said the grant too (it exited then); the held one says it and
    stays, and the nodes and GPUs come with the first ``wait()``."""
    runner = sandbox.runner()
    poller = JobPoller(runner, interval=SLOW_POLL)
    blocker = Allocation.submit(["-N2", "--gpus-per-node=8", "-t", "5"], runner=runner, poller=poller)
    waiting: Allocation | None = None
    try:
        blocker.wait(timeout=30)
        waiting = Allocation.submit(["--gpus=2", "-t", "5"], runner=runner, poller=poller)
        assert waiting.state == "PENDING"
        running = _first(waiting, "RUNNING")
        blocker.cancel()
        assert running.wait(PUSH_BOUND + 5), f"grant not known: {waiting.state}"  # + the blocker's epilog
        assert any("Granted job allocation" in line for line in waiting.salloc_messages)
        waiting.wait(timeout=10)  # the nodes and GPUs, fetched once granted
        assert waiting.nodes and sum(len(g) for g in waiting.gpus.values()) == 2
    finally:
        blocker.cancel()
        if waiting is not None:
            waiting.cancel()


# the RPCs a job watcher sends (squeue, scontrol show job, sinfo, sstat, the inventory), by sdiag's names
_QUERY_RPCS = re.compile(
    r"^REQUEST_(JOB_INFO|JOB_INFO_SINGLE|FED_INFO|PARTITION_INFO|NODE_INFO|NODE_INFO_SINGLE|"
    r"JOB_STEP_INFO|STEP_LAYOUT|JOB_USER_INFO)$"
)


def _query_rpcs(runner: Any) -> dict[str, int]:
    out = runner.run(["sdiag"]).stdout
    by_type = out.split("Remote Procedure Call statistics by message type", 1)[1]
    by_type = by_type.split("Remote Procedure Call statistics by user", 1)[0]
    counts = {}
    for m in re.finditer(r"^\s*(\S+)\s+\(\s*\d+\)\s+count:(\d+)", by_type, re.M):
        if _QUERY_RPCS.match(m.group(1)):
            counts[m.group(1)] = int(m.group(2))
    return counts


# serial: sdiag counts every RPC the sandbox's controller took, and a test that ran before this one in the same
# worker (a poller still backing off on its ended jobs, a JupyterLab's sidebar) would add its own to the window.
# `make test` runs the serial tests in a pytest of their own, after the others, one at a time.
@pytest.mark.serial
def test_an_idle_allocation_with_its_usage_sampler_sends_the_controller_almost_nothing(sandbox: Any) -> None:
    """sdiag's counts over a short window (a count, not a time): the shared poller's defaults (a round a second)
    and the panel's usage sampler (sstat every 2 s when steps run). Before issue 27 this window held a query every
    second or so (squeue + sinfo + sstat: ~30 in 10 s)."""
    runner = sandbox.runner()
    poller = JobPoller(runner)  # get_poller's cadences
    alloc = Allocation.submit(["--gpus=1", "-t", "5"], runner=runner, poller=poller)
    try:
        alloc.wait(timeout=30)
        alloc.usage()  # what the panel starts for a running allocation
        time.sleep(8)  # the submission's own queries and the sampler's first looks (6 s) are over
        runner.run(["sdiag", "-r"])
        time.sleep(10)
        counts = _query_rpcs(runner)
        assert sum(counts.values()) <= 2, f"RPCs of an idle allocation in 10 s: {counts}"
        assert alloc.running
    finally:
        alloc.cancel()
