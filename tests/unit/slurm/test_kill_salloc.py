"""A salloc that has to go (no job id came in time) goes with everything it started, even one deaf to SIGINT:
started with SIGINT ignored (a shell without job control does that to its background children) or hung."""

from __future__ import annotations

import os
import sys
import time
from pathlib import Path

from slurmlab.sandbox.processes import alive
from slurmlab.slurm.allocation.salloc import SallocProcess, kill_salloc
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


def test_a_held_salloc_that_lost_its_command_is_ended_by_sighup_not_killed(tmp_path: Path) -> None:
    """salloc's handler of its job's end can reap the held command just before salloc's main loop does; salloc
    then busy-waits (measured on 22.05: 100 % of a core until SIGKILL, 10 s per cancel), deaf to SIGINT once
    granted. Closing the pipe does not end it; SIGHUP does, and salloc finishes as it would have."""
    tools, marker = tmp_path / "bin", tmp_path / "hup"
    tools.mkdir()
    (tools / "salloc").write_text(
        "#!/bin/bash\necho 'salloc: Granted job allocation 7' >&2\ntrap '' INT\n"
        f"trap 'echo hup > {marker}; exit 0' HUP\nwhile :; do sleep 0.05; done\n"
    )
    (tools / "salloc").chmod(0o755)
    runner = Runner(timeout=10, env={"PATH": f"{tools}{os.pathsep}{os.environ['PATH']}"}, munge_probe_after=0)
    ended: list[int] = []
    salloc = SallocProcess(
        runner,
        ["salloc", "--no-shell", "-t", "5"],
        on_job_id=lambda job, state: None,
        on_error=lambda message: None,
        on_exit=ended.append,
        on_stuck=lambda exc: None,
        answered=lambda: True,
        hold=True,
    ).start()
    deadline = time.monotonic() + 10
    while not salloc.granted and time.monotonic() < deadline:
        time.sleep(0.05)
    assert salloc.granted
    salloc.kill()
    assert salloc.returncode == 0, "ended by something other than its own exit after SIGHUP"
    assert marker.read_text().strip() == "hup"
