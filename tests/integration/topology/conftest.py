from __future__ import annotations

import getpass
import time
from collections.abc import Iterator
from typing import Any

import pytest


def clear_queue(runner: Any, timeout: float = 20.0) -> None:
    runner.run(["scancel", "--user", getpass.getuser()], check=False)
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        out = runner.run(["squeue", "-h", "--me", "-t", "PENDING,RUNNING,COMPLETING", "-o", "%A"]).stdout
        if not out.strip():
            return
        time.sleep(0.2)


@pytest.fixture
def dgx(slurm_sandbox: Any) -> Iterator[Any]:
    """The session's dgx-h100 sandbox with an empty queue before and after the test."""
    clear_queue(slurm_sandbox.runner())
    yield slurm_sandbox
    clear_queue(slurm_sandbox.runner())


@pytest.fixture
def h200_mig(sandbox_factory: Any) -> Iterator[Any]:
    sb = sandbox_factory("h200-mig")
    clear_queue(sb.runner())
    yield sb
    clear_queue(sb.runner())
