"""Helpers of the server tests: submit, find and cancel real jobs in the sandbox."""

from __future__ import annotations

import os
import pwd
import re
import select
import shutil
import subprocess
import time
from collections.abc import Callable
from typing import Any

OTHER_USER = "slurmlabother"


def submit(sandbox: Any, *args: str, name: str = "srvtest", user: str | None = None) -> str:
    """An allocation with no process in it (``salloc --no-shell``): it stays RUNNING until cancelled.

    For another ``user`` root submits with ``--uid``; salloc then talks to the controller as that user,
    who cannot reach the sandbox's private munge socket, so it is stopped once the grant is printed
    (the allocation outlives it)."""
    argv = ["salloc", "--no-shell", "-J", name, "-t", "10", *args]
    if user is None:
        res = sandbox.runner().run(argv)
        found = re.search(r"Granted job allocation (\d+)", res.stderr)
        assert found, f"salloc did not grant an allocation: {res.stderr!r}"
        return found.group(1)
    argv.insert(1, f"--uid={user}")
    proc = sandbox.runner().popen(argv)
    assert proc.stderr is not None
    seen = []
    deadline = time.monotonic() + 30
    try:
        while time.monotonic() < deadline:
            ready, _, _ = select.select([proc.stderr], [], [], 1.0)
            if not ready:
                continue
            line = proc.stderr.readline()
            if not line:
                break
            seen.append(line)
            found = re.search(r"Granted job allocation (\d+)", line)
            if found:
                return found.group(1)
    finally:
        proc.kill()
        proc.communicate()
    raise AssertionError(f"salloc --uid={user} was not granted: {''.join(seen)!r}")


def squeue_state(sandbox: Any, job_id: str) -> str | None:
    res = sandbox.runner().run(["squeue", "-h", "-j", job_id, "-o", "%T"], check=False)
    state = res.stdout.strip()
    return state or None


def scancel(sandbox: Any, job_id: str) -> None:
    sandbox.runner().run(["scancel", job_id], check=False)


def ensure_other_user() -> str:
    """A second Unix user whose jobs this server must refuse to cancel (root only creates it)."""
    try:
        pwd.getpwnam(OTHER_USER)
    except KeyError:
        if os.geteuid() != 0 or shutil.which("useradd") is None:
            import pytest

            pytest.skip(f"needs root (useradd) to create the second user {OTHER_USER}")
        subprocess.run(["useradd", "-M", "-s", "/usr/sbin/nologin", OTHER_USER], check=True)
    return OTHER_USER


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
