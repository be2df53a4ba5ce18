"""The sandbox's daemons seen from outside: their command lines, their logs (and what a failed start says
in them), and waiting for a socket they open."""

from __future__ import annotations

import contextlib
import socket
import time
from collections.abc import Callable
from pathlib import Path

from slurmlab.errors import SandboxError
from slurmlab.sandbox import machine

__all__ = ["accepts", "daemon_argv", "expected_program", "log_tail", "start_failure", "wait_for"]


def expected_program(name: str) -> str:
    """The program a daemon of that name runs (``slurmd:node1`` runs slurmd)."""
    return "munged" if name == "munged" else name.split(":")[0]


def daemon_argv(
    name: str,
    exe: str,
    conf: Path,
    munge_socket: Path,
    log_dir: Path,
    *,
    fresh: bool = False,
    recover: bool = False,
) -> list[str]:
    """The command line of daemon ``name``; ``fresh`` starts slurmctld with ``-c`` (clear its saved jobs);
    ``recover`` (a restart of one that died) with ``-i``: a slurmctld killed before it ever saved its state leaves
    some state files and not others, and 26.05 with accounting then stops at "fatal: No Assoc usage file to
    recover" (the associations come from slurmdbd anyway); the jobs it did save are still read."""
    if name == "munged":
        sock = munge_socket
        return [
            exe,
            "-F",
            "-f",
            f"--key-file={sock.parent / 'munge.key'}",
            f"--socket={sock}",
            f"--pid-file={sock.parent / 'munged.pid'}",
            f"--log-file={log_dir / 'munged.log'}",
            f"--seed-file={sock.parent / 'munged.seed'}",
        ]
    if name == "slurmctld":
        return [
            exe,
            "-D",
            *(["-c"] if fresh else []),
            *(["-i"] if recover and not fresh else []),
            "-f",
            str(conf),
        ]
    return [exe, "-D", "-N", name.split(":", 1)[1], "-f", str(conf)]


def log_tail(log_dir: Path, name: str, lines: int = 15) -> str:
    """The last ``lines`` of what daemon ``name`` wrote: its captured output and its own log files."""
    stem = name.replace(":", "-")
    node = name.split(":")[1] if ":" in name else None
    candidates = [log_dir / f"{stem}.out", log_dir / f"{name}.log"]
    if node:
        candidates.append(log_dir / f"slurmd-{node}.log")
    text = []
    for path in candidates:
        with contextlib.suppress(OSError):
            tail = path.read_text(errors="replace").splitlines()[-lines:]
            if tail:
                text.append(f"--- {path} ---\n" + "\n".join(tail))
    return "\n".join(text) or "(no log written)"


def start_failure(log_dir: Path, what: str, name: str) -> SandboxError:
    """The error for a sandbox that did not start, with the log of daemon ``name``, and the next step when
    its log shows a cause this machine is known for."""
    tail = log_tail(log_dir, name)
    known = machine.explain_failure(log_tail(log_dir, name, lines=60))
    if known is None:
        return SandboxError(f"the sandbox did not start: {what}\n{tail}", hint=f"read the logs in {log_dir}")
    cause, step = known
    return SandboxError(
        f"the sandbox did not start: {what} ({cause})\n{tail}", hint=f"{step}; the logs are in {log_dir}"
    )


def accepts(path: Path) -> bool:
    """True when something listens on the unix socket ``path``."""
    with socket.socket(socket.AF_UNIX, socket.SOCK_STREAM) as s:
        s.settimeout(1.0)
        try:
            s.connect(str(path))
        except OSError:
            return False
    return True


def wait_for(check: Callable[[], bool], seconds: float, failure: Callable[[], Exception]) -> None:
    """Poll ``check`` until it holds; after ``seconds``, raise what ``failure`` makes."""
    deadline = time.monotonic() + seconds
    while time.monotonic() < deadline:
        if check():
            return
        time.sleep(0.05)
    raise failure()
