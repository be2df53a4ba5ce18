"""The commands this process is waiting for, killed when it exits.

A background thread's command (a poll round that asked a dead controller, which Slurm's client retries for 18 s;
the controller's ping or the munge probe of a command that stalled) must not outlive the process that asked: at
exit, the interpreter stops waiting for daemon threads, and what they started is killed here. A daemon thread runs
on while the atexit handlers do: one that starts a command after this has it killed at once (``_exiting`` is set
before the set is read, and read after a command is added to it). :class:`slurmlab.slurm.runner.Runner` tracks
every command it waits for; :func:`run` is ``subprocess.run`` with the same care, for the probes outside it.
"""

from __future__ import annotations

import atexit
import subprocess
import weakref
from collections.abc import Sequence
from typing import IO

__all__ = ["run", "track", "untrack"]

_running: weakref.WeakSet[subprocess.Popen[str]] = weakref.WeakSet()
_exiting = False


@atexit.register
def _kill_running() -> None:
    global _exiting
    _exiting = True
    for proc in list(_running):
        if proc.poll() is None:
            proc.kill()


def track(proc: subprocess.Popen[str]) -> None:
    """Kill ``proc`` when this process exits (at once if it is exiting already), until :func:`untrack`."""
    _running.add(proc)
    if _exiting:
        proc.kill()


def untrack(proc: subprocess.Popen[str]) -> None:
    _running.discard(proc)


def run(
    argv: Sequence[str],
    *,
    timeout: float,
    stdout: int | IO[str] | None = None,
    stderr: int | IO[str] | None = None,
) -> subprocess.CompletedProcess[str]:
    """``subprocess.run(argv, timeout=timeout, text=True)`` with no input, whose command is killed when this
    process exits: :class:`subprocess.TimeoutExpired` after ``timeout``, the command killed."""
    with subprocess.Popen(
        list(argv), stdin=subprocess.DEVNULL, stdout=stdout, stderr=stderr, text=True
    ) as proc:
        track(proc)
        try:
            out, err = proc.communicate(timeout=timeout)
        except BaseException:
            proc.kill()
            proc.communicate()
            raise
        finally:
            untrack(proc)
    return subprocess.CompletedProcess(proc.args, proc.returncode, out, err)
