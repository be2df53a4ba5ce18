from __future__ import annotations

from collections.abc import Iterator
from typing import Any

import pytest


@pytest.fixture
def sandbox(slurm_sandbox: Any) -> Iterator[Any]:
    """The session's sandbox, with an empty queue before and after the test."""
    runner = slurm_sandbox.runner()
    runner.run(["scancel", "--user", _me()], check=False)
    _wait_empty(runner)
    yield slurm_sandbox
    runner.run(["scancel", "--user", _me()], check=False)
    _wait_empty(runner)


def _me() -> str:
    from slurmlab.slurm.identity import current_user

    return current_user()  # whom the runner's commands run as (over SSH, the login's user: --over-ssh)


def _wait_empty(runner: Any, timeout: float = 20.0) -> None:
    import time

    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        out = runner.run(["squeue", "-h", "--me", "-t", "PENDING,RUNNING,COMPLETING", "-o", "%A"]).stdout
        if not out.strip():
            return
        time.sleep(0.2)


@pytest.fixture(scope="session")
def server_jobs() -> Any:
    """tests/integration/server/server_jobs.py (submit as another user, squeue states), loaded by path:
    that folder is not a package and its name must not shadow anything here."""
    import importlib.util
    from pathlib import Path

    spec = importlib.util.spec_from_file_location(
        "server_jobs", Path(__file__).resolve().parents[1] / "server" / "server_jobs.py"
    )
    assert spec and spec.loader
    mod = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(mod)
    return mod
