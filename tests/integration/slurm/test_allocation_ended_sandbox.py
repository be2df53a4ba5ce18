"""How an allocation ended, on real sandbox states with Slurm accounting (the session sandbox starts with it where
slurmdbd and MariaDB are installed): a time limit really reached (TIMEOUT, with a longer -t), a real --mem overrun
by a small Python allocation (OUT_OF_MEMORY, with a larger --mem), a cancel by you, and exit codes per step.

Run on another Slurm with ``bash scripts/in-slurm-root.sh 24.11 python -m pytest -q -p no:cacheprovider
tests/integration/slurm/test_allocation_ended_sandbox.py``."""

from __future__ import annotations

import shlex
import sys
from typing import Any

import pytest

from slurmlab.slurm.allocation import Allocation
from slurmlab.slurm.poller import JobPoller

pytestmark = pytest.mark.sandbox
# touches 600 MiB (bytes are written, so they count in RSS) and holds them past two samples of the gatherer
EAT = "import time; x = b'x' * (600 << 20); time.sleep(20)"


@pytest.fixture
def accounted(sandbox: Any) -> Any:
    if not sandbox.state.get("accounting"):
        pytest.skip(f"the session sandbox runs without accounting: {sandbox.state.get('accounting_off')}")
    return sandbox


def submit(runner: Any, poller: JobPoller, *request: str) -> Allocation:
    alloc = Allocation.submit(
        list(request), runner=runner, poller=poller, validate=False, release_at_exit=False
    )
    alloc.wait("RUNNING", timeout=60)
    return alloc


def test_timeout_oom_cancel_and_step_exit_codes(accounted: Any) -> None:
    r = accounted.runner()
    poller = JobPoller(r, interval=0.5)
    try:
        # the time limit first: it ends about a minute and a half later, while the others run
        late = submit(r, poller, "-N1", "-n1", "-t", "1")
        oom = submit(r, poller, "-N1", "-n1", "--mem=200M", "-t", "5")
        step = oom.srun([sys.executable, "-c", EAT], on_output=lambda stream, line: None, timeout=60)
        assert step.returncode != 0  # killed by Slurm, long before its 20 s sleep ended
        oom.cancel()
        mine = submit(r, poller, "-N1", "-n1", "-t", "5")
        assert mine.srun(["true"], on_output=lambda s, line: None).returncode == 0
        assert mine.srun(["sh", "-c", "exit 4"], on_output=lambda s, line: None).returncode == 4
        mine.cancel()

        ate = oom.outcome()
        assert ate.state == "OUT_OF_MEMORY", ate.text()
        eaten = max(s.max_rss_mb or 0 for s in ate.steps)
        assert eaten > 200 and "of 200 MiB requested" in ate.headline
        mem = [a for a in shlex.split(ate.advice[0].split(": ", 1)[1]) if a.startswith("--mem")]
        assert len(mem) == 1 and mem[0] != "--mem=200M"
        assert ate.efficiency.startswith(f"Efficiency of job {oom.job_id}: CPU ")

        cancelled = mine.outcome()
        assert cancelled.state == "CANCELLED" and cancelled.cancelled_by == "you", cancelled.text()
        codes = sorted((s.name, s.code) for s in cancelled.steps if s.name in ("true", "sh"))
        assert codes == [("sh", 4), ("true", 0)], cancelled.text()

        late.wait("ENDED", timeout=180)
        ran_out = late.outcome()
        assert ran_out.state == "TIMEOUT" and late.state == "TIMEOUT", ran_out.text()
        assert "limit 00:01:00" in ran_out.headline
        assert shlex.split(ran_out.advice[0].split(": ", 1)[1])[-2:] == ["-t", "2"]
    finally:
        poller.stop()
