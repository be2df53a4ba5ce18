"""The child processes behind a FakeRunner's ``popen``: each plays one recorded reply as salloc or srun would.

A process writes the recorded text and exits with the recorded code; a *held* one stays running after
its first part (a pending ``salloc``) until it is released (a line on its stdin), or until a SIGINT /
SIGTERM, which it answers with the recorded text of an interrupted command.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
from collections.abc import Iterable
from typing import Any

from slurmlab.testing.recordings import Reply

__all__ = ["end", "release", "start"]

# The process behind a popen reply: writes the recorded text, waits when held, answers signals.
# SIGINT and SIGTERM stay blocked for the process's whole life and are taken with sigtimedwait, never by a
# handler: a handler runs only at the interpreter's next check, which a read of stdin blocked in the kernel may
# not reach (a replay child on Python 3.13 under load once slept through its SIGINT until the test's timeout).
# The writes are unbuffered, so a signal never meets a half-written buffered stream.
_REPLAY = r"""
import json, os, select, signal, sys
spec = json.load(open(sys.argv[1]))
def emit(part):
    for fd, key in ((1, "stdout"), (2, "stderr")):
        data = part[key].encode()
        while data:
            data = data[os.write(fd, data):]
def interrupted(signum):
    part = spec.get("interrupted")
    if part:
        emit(part)
        os._exit(part["returncode"] & 255)
    os._exit(128 + signum)
signals = {signal.SIGINT, signal.SIGTERM}
signal.pthread_sigmask(signal.SIG_BLOCK, signals)
emit(spec["first"])
while spec["hold"]:
    caught = signal.sigtimedwait(signals, 0.05)
    if caught is not None:
        interrupted(caught.si_signo)
    if select.select([0], [], [], 0)[0]:
        os.read(0, 1)  # the release line (or the end of stdin, as the old readline)
        if spec.get("after"):
            emit(spec["after"])
            os._exit(spec["after"]["returncode"] & 255)
        break
caught = signal.sigtimedwait(signals, 0)  # a signal that came while the first part was written
if caught is not None:
    interrupted(caught.si_signo)
os._exit(spec["first"]["returncode"] & 255)
"""


def _part(reply: Reply | None) -> dict[str, Any] | None:
    if reply is None:
        return None
    return {"stdout": reply.stdout, "stderr": reply.stderr, "returncode": reply.returncode}


def start(reply: Reply, spec_path: str, *, stdin: int | None, merge_stderr: bool) -> subprocess.Popen[str]:
    """A process playing ``reply``, its spec written to ``spec_path``; piped as ``Runner.popen`` pipes."""
    spec = {
        "first": _part(reply),
        "hold": reply.hold,
        "after": _part(reply.after),
        "interrupted": _part(reply.interrupted),
    }
    with open(spec_path, "w") as fh:
        json.dump(spec, fh)
    return subprocess.Popen(
        [sys.executable, "-I", "-S", "-c", _REPLAY, spec_path],
        stdin=subprocess.PIPE if reply.hold else stdin,
        stdout=subprocess.PIPE,
        stderr=subprocess.STDOUT if merge_stderr else subprocess.PIPE,
        text=True,
        bufsize=1,
        env={"PATH": os.environ.get("PATH", "/usr/bin:/bin")},
        start_new_session=True,  # as Runner.popen: the caller signals its process group
    )


def release(held: Iterable[subprocess.Popen[str]]) -> int:
    """Let each held process that still runs go on. Returns how many were released."""
    count = 0
    for proc in held:
        if proc.poll() is not None or proc.stdin is None:
            continue
        try:
            proc.stdin.write("\n")
            proc.stdin.flush()
            count += 1
        except (BrokenPipeError, ValueError):
            continue
    return count


def end(procs: Iterable[subprocess.Popen[str]]) -> None:
    """Kill each process that still runs and wait for it."""
    for proc in procs:
        if proc.poll() is None:
            proc.kill()
        try:
            proc.wait(timeout=5)
        except subprocess.TimeoutExpired:
            pass
        if proc.stdin is not None:  # stdout/stderr belong to their readers (threads may still read)
            try:
                proc.stdin.close()
            except OSError:
                pass
