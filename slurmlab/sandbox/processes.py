"""Processes of a sandbox, found and stopped by pid through /proc (never by name)."""

from __future__ import annotations

import os
import signal
import time
from collections.abc import Iterable
from pathlib import Path

__all__ = ["alive", "children_of", "cmdline", "find_related", "frozen", "reap", "stop"]


def _stat(pid: int) -> list[str] | None:
    try:
        raw = Path(f"/proc/{pid}/stat").read_text()
    except OSError:
        return None
    # the command name may hold spaces and parentheses: the fields after it follow the last ')'
    return raw[raw.rindex(")") + 2 :].split()


def alive(pid: int) -> bool:
    """True when ``pid`` runs (a zombie waiting to be reaped counts as gone)."""
    fields = _stat(pid)
    return fields is not None and fields[0] not in ("Z", "X")


def frozen(pid: int) -> bool:
    """True when ``pid`` is stopped by a signal (SIGSTOP/SIGTSTP) or a tracer: alive, but it answers nothing."""
    fields = _stat(pid)
    return fields is not None and fields[0] in ("T", "t")


def cmdline(pid: int) -> list[str]:
    try:
        return [a for a in Path(f"/proc/{pid}/cmdline").read_bytes().decode(errors="replace").split("\0") if a]
    except OSError:
        return []


def _all_pids() -> list[int]:
    return [int(p) for p in os.listdir("/proc") if p.isdigit()]


def children_of(roots: Iterable[int]) -> set[int]:
    """Every descendant of ``roots`` and every process in their sessions (slurmstepd, tasks)."""
    roots = set(roots)
    parent: dict[int, int] = {}
    session: dict[int, int] = {}
    for pid in _all_pids():
        fields = _stat(pid)
        if fields is None or fields[0] in ("Z", "X"):
            continue
        parent[pid] = int(fields[1])
        session[pid] = int(fields[3])
    found = {p for p, sid in session.items() if sid in roots}
    changed = True
    known = roots | found
    while changed:
        changed = False
        for pid, ppid in parent.items():
            if ppid in known and pid not in known:
                known.add(pid)
                found.add(pid)
                changed = True
    return found - roots


def _environ(pid: int) -> list[bytes]:
    try:
        return Path(f"/proc/{pid}/environ").read_bytes().split(b"\0")
    except OSError:
        return []


def _ancestors(pid: int) -> set[int]:
    out: set[int] = set()
    while pid > 1 and pid not in out:
        out.add(pid)
        fields = _stat(pid)
        if fields is None:
            break
        pid = int(fields[1])
    return out


def find_related(roots: Iterable[int], slurm_conf: str) -> set[int]:
    """Processes a sandbox left: descendants of its daemons, and the tasks of its jobs.

    slurmstepd detaches from slurmd; job tasks carry ``SLURM_CONF`` (this sandbox's) and ``SLURMD_NODENAME``
    (set only by slurmd/slurmstepd, so a user's shell that merely exported SLURM_CONF is never taken).
    This process and its ancestors are never included.
    """
    spared = _ancestors(os.getpid())
    found = children_of(roots)
    entry = f"SLURM_CONF={slurm_conf}".encode()
    for pid in _all_pids():
        if pid in found or pid in spared or not alive(pid):
            continue
        env = _environ(pid)
        if entry not in env:
            continue
        # a task carries SLURMD_NODENAME; a slurmstepd (double-forked away from slurmd, with an
        # environment of little more than SLURM_CONF) is known by its name
        if any(e.startswith(b"SLURMD_NODENAME=") for e in env) or _is_stepd(pid):
            found.add(pid)
    return found - spared


def _is_stepd(pid: int) -> bool:
    argv = cmdline(pid)
    return bool(argv) and argv[0].startswith("slurmstepd")


def stop(pids: Iterable[int], *, grace: float = 5.0) -> list[int]:
    """SIGTERM, wait up to ``grace`` seconds, then SIGKILL. Returns the pids still alive (should be none)."""
    pids = [p for p in set(pids) if p > 1 and alive(p)]
    for pid in pids:
        try:
            os.kill(pid, signal.SIGTERM)
            # a frozen process keeps SIGTERM pending until it runs again: wake it so that it can stop cleanly
            os.kill(pid, signal.SIGCONT)
        except ProcessLookupError:
            pass
    deadline = time.monotonic() + grace
    while time.monotonic() < deadline and any(alive(p) for p in pids):
        reap(pids)
        time.sleep(0.05)
    for pid in pids:
        if alive(pid):
            try:
                os.kill(pid, signal.SIGKILL)
            except ProcessLookupError:
                pass
    deadline = time.monotonic() + 2.0
    while time.monotonic() < deadline and any(alive(p) for p in pids):
        reap(pids)
        time.sleep(0.05)
    reap(pids)
    return [p for p in pids if alive(p)]


def reap(pids: Iterable[int]) -> None:
    """Collect those of ``pids`` that are our own exited children (only those: never other code's children)."""
    for pid in pids:
        try:
            os.waitpid(pid, os.WNOHANG)
        except ChildProcessError:
            pass
