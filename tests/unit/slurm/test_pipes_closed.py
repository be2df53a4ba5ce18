"""The pipes of a process slurmlab starts in the background are closed once read: left to the garbage collector, each
raises a ResourceWarning in whatever runs next (it broke `slurmlab topo`'s warnings on Python 3.13)."""

from __future__ import annotations

import subprocess
import sys
import time
from collections.abc import Sequence
from typing import Any

from slurmlab.slurm.allocation.salloc import SallocProcess
from slurmlab.slurm.runner import Runner
from slurmlab.slurm.steps import stream_step


class _Keeping(Runner):
    """A runner that remembers the processes it started in the background."""

    def __init__(self) -> None:
        super().__init__(timeout=10)
        self.started: list[subprocess.Popen[str]] = []

    def popen(self, argv: Sequence[str], **kw: Any) -> subprocess.Popen[str]:
        proc = super().popen(argv, **kw)
        self.started.append(proc)
        return proc


def test_a_streamed_step_leaves_no_pipe_open() -> None:
    runner = _Keeping()
    seen: list[tuple[str, str]] = []
    script = "import sys; print('out'); print('err', file=sys.stderr)"
    result = stream_step(runner, [sys.executable, "-c", script], lambda s, line: seen.append((s, line)), 10)
    assert result.returncode == 0 and sorted(seen) == [("stderr", "err"), ("stdout", "out")]
    (proc,) = runner.started
    assert proc.stdout is not None and proc.stdout.closed
    assert proc.stderr is not None and proc.stderr.closed


def test_the_salloc_reader_closes_both_pipes_and_keeps_the_error() -> None:
    runner = _Keeping()
    script = "import sys; print('salloc: error: Invalid generic resource (gres) specification', file=sys.stderr); sys.exit(1)"
    proc = runner.popen([sys.executable, "-c", script])
    errors: list[str] = []
    exits: list[int] = []
    salloc = SallocProcess(
        runner,
        [sys.executable, "-c", script],
        on_job_id=lambda job_id, state: None,
        on_error=errors.append,
        on_exit=exits.append,
        on_stuck=lambda exc: None,
        answered=lambda: False,
    )
    salloc.read(proc)
    assert proc.stdout is not None and proc.stdout.closed
    assert proc.stderr is not None and proc.stderr.closed
    assert errors == ["Invalid generic resource (gres) specification"] and exits == [1]


def test_a_stopped_step_keeps_what_it_printed_and_closes_its_pipes(tmp_path: Any) -> None:
    from slurmlab.slurm.steps import RunningStep

    ready = tmp_path / "ready"
    script = f"import pathlib, time; print('started', flush=True); pathlib.Path({str(ready)!r}).touch(); time.sleep(60)"
    runner = _Keeping()
    step = RunningStep([sys.executable, "-c", script], runner.popen([sys.executable, "-c", script]))
    deadline = time.monotonic() + 10
    while not ready.exists() and time.monotonic() < deadline:
        time.sleep(0.02)
    step.stop()
    assert step.proc.poll() is not None
    assert step.proc.stdout is not None and step.proc.stdout.closed
    assert step.proc.stderr is not None and step.proc.stderr.closed
    result = step.wait()
    assert result.interrupted and result.stdout == ["started"] and not result.ok
    assert step.wait() is result


def test_a_timed_out_wait_ends_within_its_grace_even_when_a_leftover_process_holds_the_pipes(
    monkeypatch: Any, tmp_path: Any
) -> None:
    # the step starts a process in a session of its own that keeps stdout open: ending the step's group cannot
    # end it, and an unbounded read of the pipes after the timeout would wait as long as that process lives
    from slurmlab.slurm import steps

    monkeypatch.setattr(steps, "GRACE_AFTER_SIGKILL", 0.5)
    pid_file = tmp_path / "leftover"
    script = (
        "import pathlib, subprocess, time; "
        "p = subprocess.Popen(['sleep', '60'], start_new_session=True); "
        f"pathlib.Path({str(pid_file)!r}).write_text(str(p.pid)); print('started', flush=True); time.sleep(60)"
    )
    runner = _Keeping()
    step = steps.RunningStep([sys.executable, "-c", script], runner.popen([sys.executable, "-c", script]))
    try:
        started = time.monotonic()
        result = step.wait(timeout=1.0)
        took = time.monotonic() - started
        assert result.interrupted and not result.ok and step.proc.poll() is not None
        assert took < 1.0 + 10, f"wait() took {took:.1f} s after its timeout"
        assert step.proc.stdout is not None and step.proc.stdout.closed
        assert step.wait() is result
    finally:
        if pid_file.exists():
            import os
            import signal

            os.kill(int(pid_file.read_text()), signal.SIGKILL)
