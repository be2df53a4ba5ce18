"""A salloc that has to go (no job id came in time) goes with everything it started, even one deaf to SIGINT:
started with SIGINT ignored (a shell without job control does that to its background children) or hung."""

from __future__ import annotations

import sys
import time
from pathlib import Path

from slurmlab.sandbox.processes import alive
from slurmlab.slurm.allocation.salloc import kill_salloc
from slurmlab.slurm.runner import Runner


def _gone(pid: int, timeout: float = 5.0) -> bool:
    deadline = time.monotonic() + timeout
    while alive(pid) and time.monotonic() < deadline:
        time.sleep(0.05)
    return not alive(pid)


def _wait_for(path: Path, timeout: float = 10.0) -> str:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if path.exists() and path.read_text().strip():
            return path.read_text().strip()
        time.sleep(0.05)
    raise AssertionError(f"{path} was never written")


def test_a_salloc_deaf_to_sigint_is_killed_with_what_it_started(tmp_path: Path) -> None:
    child = tmp_path / "child.pid"
    # the stand-in ignores SIGINT and so does its child, as both would if started with SIGINT ignored
    proc = Runner(timeout=10).popen(["sh", "-c", f"trap '' INT; sleep 60 & echo $! > {child}; wait"])
    pid = int(_wait_for(child))
    kill_salloc(proc)
    assert proc.poll() is not None, "the salloc stand-in still runs"
    assert _gone(pid), f"the salloc's child (pid {pid}) outlived it"


def test_a_salloc_that_takes_sigint_ends_by_it(tmp_path: Path) -> None:
    ready = tmp_path / "ready"
    # SIGINT at its default whatever this test inherited (a real salloc sets its own handler)
    script = (
        "import pathlib, signal, sys, time\nsignal.signal(signal.SIGINT, signal.SIG_DFL)\n"
        f"pathlib.Path({str(ready)!r}).write_text('yes')\ntime.sleep(60)"
    )
    proc = Runner(timeout=10).popen([sys.executable, "-c", script])
    _wait_for(ready)
    kill_salloc(proc)
    assert proc.returncode == -2, "ended by something other than SIGINT"
