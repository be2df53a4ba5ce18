"""Helpers of the server tests: submit, find and cancel real jobs in the sandbox."""

from __future__ import annotations

import re
import time
from collections.abc import Callable
from typing import Any

from slurmlab.testing import other_user

OTHER_USER = other_user.OTHER_USER


def submit(sandbox: Any, *args: str, name: str = "srvtest", user: str | None = None) -> str:
    """An allocation with no process in it (``salloc --no-shell``): it stays RUNNING until cancelled.

    Another ``user``'s is submitted by that user for real (``runuser``, admitted to the sandbox): salloc's
    ``--uid`` is gone since Slurm 24.11, so this is the one way that works on every version."""
    argv = ["salloc", "--no-shell", "-J", name, "-t", "10", *args]
    res = sandbox.runner().run(argv) if user is None else other_user.submit_as(sandbox, user, argv)
    found = re.search(r"Granted job allocation (\d+)", res.stderr)
    assert found, f"salloc{' as ' + user if user else ''} did not grant an allocation: {res.stderr!r}"
    return found.group(1)


def squeue_state(sandbox: Any, job_id: str) -> str | None:
    res = sandbox.runner().run(["squeue", "-h", "-j", job_id, "-o", "%T"], check=False)
    state = res.stdout.strip()
    return state or None


def scancel(sandbox: Any, job_id: str) -> None:
    sandbox.runner().run(["scancel", job_id], check=False)


def ensure_other_user() -> str:
    """A second Unix user whose jobs this server must refuse to cancel (root only creates it)."""
    return other_user.ensure_user(OTHER_USER)


async def wait_for(check: Callable[[], Any], timeout: float, what: str, step: float = 0.5) -> Any:
    import asyncio

    deadline = time.monotonic() + timeout
    last: Any = None
    while time.monotonic() < deadline:
        last = await check()
        if last:
            return last
        await asyncio.sleep(step)
    raise AssertionError(f"{what} did not happen within {timeout:g} s (last: {last!r})")
