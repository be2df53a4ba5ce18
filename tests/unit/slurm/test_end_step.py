"""How a step's srun is ended: SIGINT twice, then SIGTERM, SIGKILL last (it would orphan the step).

Real processes stand in for srun's signal behaviour; the sandbox tests run the real srun.
"""

from __future__ import annotations

import subprocess
import sys
import time

import pytest

from slurmlab.slurm import steps
from slurmlab.slurm.steps import end_step


@pytest.fixture(autouse=True)
def _short_graces(monkeypatch: pytest.MonkeyPatch) -> None:
    # the order of signals is what is tested; the real grace periods are seconds long
    monkeypatch.setattr(steps, "GRACE_AFTER_SIGINT", 0.6)
    monkeypatch.setattr(steps, "GRACE_AFTER_SIGTERM", 0.6)


# Prints each signal it gets; exits on the ones named in argv[1]. The handler writes with os.write: a signal that
# lands while print("ready") still flushes would make a print in the handler re-enter the same buffered writer
# (Python 3.13 raises RuntimeError for that, and the stand-in died of it instead of testing end_step).
FAKE_SRUN = r"""
import os, signal, sys, time
ends = set(sys.argv[1].split(","))
def on(sig, _):
    name = signal.Signals(sig).name
    os.write(1, (name + "\n").encode())
    if name in ends:
        os._exit(0)
for s in (signal.SIGINT, signal.SIGTERM):
    signal.signal(s, on)
print("ready", flush=True)
while True:
    time.sleep(0.05)
"""


def _start(ends: str) -> subprocess.Popen[str]:
    proc = subprocess.Popen(
        [sys.executable, "-c", FAKE_SRUN, ends], stdout=subprocess.PIPE, text=True, start_new_session=True
    )
    assert proc.stdout is not None
    assert proc.stdout.readline().strip() == "ready"
    return proc


def _signals(proc: subprocess.Popen[str]) -> list[str]:
    out, _ = proc.communicate(timeout=5)
    return out.split()


def test_two_sigints_are_enough_when_srun_takes_them() -> None:
    proc = _start("SIGINT")
    end_step(proc)
    assert proc.returncode == 0
    assert _signals(proc) == ["SIGINT"]  # the first one already ended it; the second found no process


def test_srun_that_only_reports_the_step_gets_sigterm() -> None:
    # srun answered "interrupt (one more within 1 sec to abort)" twice: seen on a loaded machine
    proc = _start("SIGTERM")
    t0 = time.monotonic()
    end_step(proc)
    assert proc.returncode == 0
    assert _signals(proc) == ["SIGINT", "SIGINT", "SIGTERM"]
    assert time.monotonic() - t0 < 5


def test_srun_deaf_to_everything_is_killed() -> None:
    proc = _start("")
    end_step(proc)
    assert proc.returncode == -9
