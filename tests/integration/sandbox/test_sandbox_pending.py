"""Issue 13, point 8, on the real sandbox: a request larger than the partition is refused before submit with
the partition's numbers; a pending one shows Slurm's expected start within seconds, not after a backfill
cycle of 30 s."""

from __future__ import annotations

import time

import pytest

from slurmlab.core.request.request import RequestProblems
from slurmlab.slurm.allocation import Allocation
from slurmlab.widgets.panel import panel_html

pytestmark = pytest.mark.sandbox


def _queued(runner, name: str) -> str:
    return runner.run(["squeue", "-h", "-n", name, "-o", "%i"], check=False).stdout.strip()


def test_more_tasks_than_the_partition_has_cpus_is_refused_before_submit(slurm_sandbox) -> None:
    runner = slurm_sandbox.runner()
    cpus = [int(c) for c in runner.run(["sinfo", "-h", "-N", "-o", "%c"]).stdout.split()]
    total = sum(cpus)
    with pytest.raises(RequestProblems) as info:
        Allocation.submit(
            ["-n", str(total * 4), "--gpus=1", "-t", "5", "-J", "too-many-tasks"],
            runner=runner,
            release_at_exit=False,
        )
    text = f"{info.value} {info.value.hint}"
    assert f"{total * 4} tasks" in text and f"{total} CPUs in {len(cpus)} nodes" in text, text
    assert f"at most -n {total}" in text and "-O" in text and "PartitionConfig" not in text
    assert _queued(runner, "too-many-tasks") == ""  # nothing reached Slurm


def test_a_pending_allocation_shows_slurms_expected_start_within_seconds(slurm_sandbox) -> None:
    runner = slurm_sandbox.runner()
    nodes = len(slurm_sandbox.nodes)
    blocker = Allocation.submit(
        [f"-N{nodes}", "--gpus-per-node=8", "-t", "5"], runner=runner, release_at_exit=True
    )
    waiting = None
    try:
        blocker.wait("RUNNING", timeout=60)
        waiting = Allocation.submit(["--gpus=1", "-t", "5"], runner=runner, release_at_exit=True)
        t0 = time.monotonic()
        html = ""
        while time.monotonic() - t0 < 15:
            html = panel_html(waiting)
            if "Expected start" in html:
                break
            time.sleep(0.2)
        assert "Expected start" in html, html  # with bf_interval=1: about a second, not ~28 s
        assert time.monotonic() - t0 < 10
        assert "Pending for" in html and "slurmlab-reason" in html and "Waiting:" in html
    finally:
        for alloc in (waiting, blocker):
            if alloc is not None:
                alloc.cancel()
