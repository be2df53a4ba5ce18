"""Small helpers for tests that set up real job states on a sandbox: an empty queue, wait for a state, submit a
sleeping batch job, read one squeue field (shared by the doctor's, alloc.why()'s and the topology sandbox tests)."""

from __future__ import annotations

import getpass
import time
from collections.abc import Callable
from typing import Any, TypeVar

T = TypeVar("T")


def clear_queue(runner: Any, timeout: float = 30.0) -> None:
    """No job of this user left that holds or waits for anything (the sandboxes are shared by a session's tests)."""
    runner.run(["scancel", "--user", getpass.getuser()], check=False)
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if not runner.run(
            ["squeue", "-h", "--me", "-t", "PENDING,RUNNING,COMPLETING", "-o", "%A"]
        ).stdout.strip():
            return
        time.sleep(0.2)
    raise AssertionError(f"this user's jobs were still in the queue {timeout:g} s after scancel")


def wait_for(check: Callable[[], T | None], timeout: float, what: str) -> T:
    """``check()``'s first true answer, asked every 0.3 s; AssertionError naming ``what`` after ``timeout``."""
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        value = check()
        if value:
            return value
        time.sleep(0.3)
    raise AssertionError(f"{what} did not happen within {timeout:g} s")


def submit(runner: Any, *options: str) -> str:
    """Submit ``sleep 600`` with ``options``; its job id."""
    argv = ["sbatch", "--parsable", "-o", "/dev/null", "--chdir=/tmp", *options, "--wrap", "sleep 600"]
    return str(runner.run(argv).stdout.strip().split(";")[0])


def squeue(runner: Any, job: str, fmt: str) -> str:
    """One ``squeue -o FMT`` of ``job`` in any state (ended ones while the controller remembers them)."""
    return str(runner.run(["squeue", "-h", "-t", "all", "-j", job, "-o", fmt]).stdout.strip())
