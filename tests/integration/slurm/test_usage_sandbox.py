"""``alloc.usage()`` on the real sandbox: its GPUs are files, so the sampler reads the CPU of the job's tasks
from ``sstat`` (the sandbox gathers task accounting), labelled as such; it stops when the allocation ends."""

from __future__ import annotations

import time
from collections.abc import Callable
from typing import Any

import pytest

from slurmlab.slurm.allocation import Allocation
from slurmlab.slurm.allocation.sampler import sampler_for
from slurmlab.slurm.poller import JobPoller

pytestmark = pytest.mark.sandbox

BUSY = "import time\nt = time.time()\nwhile time.time() - t < 120: pass"


def _until(check: Callable[[], object], seconds: float, what: str) -> None:
    deadline = time.monotonic() + seconds
    while not check():
        assert time.monotonic() < deadline, f"{what} not seen within {seconds:g} s"
        time.sleep(0.2)


def test_usage_shows_the_cpu_of_a_busy_task_from_sstat(sandbox: Any) -> None:
    runner = sandbox.runner()
    poller = JobPoller(runner, interval=0.5)
    alloc = Allocation.submit(
        ["-n1", "--gpus=1", "-t", "5"], runner=runner, poller=poller, release_at_exit=True
    )
    try:
        alloc.wait(timeout=30)
        busy = alloc.launch(["python3", "-c", BUSY])
        first = alloc.usage()  # starts the sampler, answers with what there is
        assert first.samples == () and first.error is None

        def busy_seen() -> bool:
            table = alloc.usage()
            assert table.error is None, table.error
            return any(r.peak_util > 0 for r in table.rows)

        _until(busy_seen, 60, "CPU utilisation above 0 from sstat")
        table = alloc.usage()
        assert table.source == "sstat" and "CPU of the job's tasks (sstat) — this machine has no GPU" in str(
            table
        )
        [row] = [r for r in table.rows if r.peak_util > 0]
        assert row.series.startswith(f"step {alloc.job_id}.") and row.peak_mem_mb and row.peak_mem_mb > 0
        assert "slurmlab-usage-table" in table._repr_html_() and table.to_dict()["rows"]
        busy.stop()
    finally:
        alloc.cancel()
    try:
        sampler = sampler_for(alloc)
        _until(lambda: not sampler.alive, 30, "the sampler's end with the allocation")
        assert sampler.table().error is None
    finally:
        poller.stop()
