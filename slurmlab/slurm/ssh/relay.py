"""A background command over SSH whose signals reach the remote side.

ssh without a terminal does not pass signals on: a Ctrl-C that stops the local ssh would leave srun running on
the login node (measured: a session on a master, ``ssh -S``, exits 255 on SIGINT whatever its inherited
disposition, and the remote srun runs on). The runner starts (as the leader of its own session, as for local
commands) this file, run on its own (stdlib only), which runs ssh in a session of its own, out of reach of the
caller's group signals, and turns each signal it gets into ``kill -s SIG <pid>`` of the remote process, over
the same master connection. A SIGKILL of the group ends the relay; ssh follows it (Linux: the parent-death
signal; elsewhere when its output is no longer read), and the remote command is left as it is, as a local
SIGKILL leaves a job.
"""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
from collections.abc import Iterator
from contextlib import contextmanager
from types import FrameType

__all__ = ["FORWARDED", "relay_argv", "signals_held"]

FORWARDED = (signal.SIGINT, signal.SIGTERM, signal.SIGHUP)
_KILL_TIMEOUT = 15.0


def relay_argv(ssh_argv: list[str], kill_argv: list[str]) -> list[str]:
    """The local argv that runs ``ssh_argv`` and answers a signal with ``kill_argv + [pid name, SIGNAL]``."""
    spec = json.dumps({"ssh": ssh_argv, "kill": kill_argv}, ensure_ascii=False)
    return [sys.executable, "-I", "-S", os.path.abspath(__file__), spec]


@contextmanager
def signals_held() -> Iterator[None]:
    """The signals a relay forwards, blocked in the calling thread while it starts a relay: the relay inherits the
    mask, so a Ctrl-C that lands while its Python starts waits, pending, until the relay's handlers are in place
    (it unblocks them there) instead of killing it or being ignored; the caller's mask is restored after, and a
    signal that came meanwhile reaches the caller then."""
    old = signal.pthread_sigmask(signal.SIG_BLOCK, FORWARDED)
    try:
        yield
    finally:
        signal.pthread_sigmask(signal.SIG_SETMASK, old)


def _die_with_parent() -> None:
    """In ssh's process, before exec: the signals' default actions back and unblocked, and (Linux) an end when
    the relay ends, even by SIGKILL."""
    for sig in FORWARDED:
        # ignoring discards one pending from before this process left the relay's group (it was the group's, and
        # the relay forwards it); a Ctrl-C sent as ssh forked would otherwise kill ssh before it ran
        signal.signal(sig, signal.SIG_IGN)
        signal.signal(sig, signal.SIG_DFL)
    signal.pthread_sigmask(signal.SIG_UNBLOCK, FORWARDED)
    if sys.platform.startswith("linux"):
        import ctypes

        pr_set_pdeathsig = 1
        ctypes.CDLL(None, use_errno=True).prctl(pr_set_pdeathsig, signal.SIGKILL)


def _main(spec_text: str) -> int:
    spec = json.loads(spec_text)
    # blocked until ssh runs and the handlers below are in place (already so when started under signals_held, as
    # the runner starts it): a signal now waits and is forwarded then; ignored, as before, it was lost, and a
    # Ctrl-C that came while a step started left the remote step running to its end
    signal.pthread_sigmask(signal.SIG_BLOCK, FORWARDED)

    def forward(signum: int, frame: FrameType | None) -> None:
        name = signal.Signals(signum).name.removeprefix("SIG")
        kill = spec["kill"]
        # the kill_argv ends with the pid file's name: the signal goes first in the remote script's arguments
        argv = [*kill[:-1], name, kill[-1]]
        try:
            subprocess.run(
                argv,
                stdin=subprocess.DEVNULL,
                stdout=subprocess.DEVNULL,
                stderr=subprocess.DEVNULL,
                timeout=_KILL_TIMEOUT,
            )
        except (OSError, subprocess.TimeoutExpired):
            pass

    for sig in FORWARDED:
        signal.signal(sig, forward)
    child = subprocess.Popen(spec["ssh"], start_new_session=True, preexec_fn=_die_with_parent)
    signal.pthread_sigmask(signal.SIG_UNBLOCK, FORWARDED)
    rc = child.wait()
    return rc if rc >= 0 else 128 - rc


if __name__ == "__main__":
    sys.exit(_main(sys.argv[1]))
