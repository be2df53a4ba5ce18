"""Processes of a sandbox, found and stopped by pid through /proc (never by name)."""

from __future__ import annotations

import os
import signal
import subprocess
import time
import warnings
from collections.abc import Iterable, Mapping
from pathlib import Path

__all__ = ["alive", "children_of", "cmdline", "find_related", "frozen", "reap", "spawn_daemon", "stop"]


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
        return [
            a for a in Path(f"/proc/{pid}/cmdline").read_bytes().decode(errors="replace").split("\0") if a
        ]
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


# Slurm's commands that stay attached to a job or step of the cluster they talk to (unlike squeue, sinfo ...)
_JOB_CLIENTS = frozenset({"srun", "salloc", "sattach", "sbcast"})
_DAEMONS = frozenset({"slurmctld", "slurmd", "munged"})


def _links(pid: int) -> list[str]:
    """Where the open files and the working folder of ``pid`` point."""
    base = f"/proc/{pid}"
    out = []
    try:
        fds = os.listdir(f"{base}/fd")
    except OSError:
        fds = []
    for name in ["cwd", *(f"fd/{fd}" for fd in fds)]:
        try:
            out.append(os.readlink(f"{base}/{name}"))
        except OSError:
            continue
    return out


def _inside(path: str, folders: tuple[str, ...]) -> bool:
    return any(path == f or path.startswith(f + "/") for f in folders)


def _belongs(pid: int, folder: tuple[str, ...], conf_entry: bytes) -> bool:
    """True when ``pid`` is, by what it is, a process of the sandbox in ``folder`` (its descendants aside)."""
    argv = cmdline(pid)
    if not argv:
        return False
    name = os.path.basename(argv[0].split(":", 1)[0])
    if name == "slurmstepd":
        # a step daemon double-forks away from slurmd and, from 24.11 on, keeps no SLURM_CONF: it holds the
        # sandbox's slurmd log (and its spool) open, which no other sandbox's does
        return any(_inside(link, folder) for link in _links(pid)) or conf_entry in _environ(pid)
    if name in _DAEMONS:
        # one of this sandbox's daemons that state.json lost (e.g. a restart interrupted after it started)
        return any(_inside(arg, folder) or _inside(arg.split("=", 1)[-1], folder) for arg in argv[1:])
    if any(_inside(arg, tuple(f + "/spool" for f in folder)) for arg in argv[1:]):
        return True  # a job script run from the spool, orphaned from its step daemon
    env = _environ(pid)
    if conf_entry not in env:
        return False
    # a job client of this sandbox would wait for it forever; a task carries SLURMD_NODENAME (set only by
    # slurmd/slurmstepd), so a shell that merely exported SLURM_CONF is never taken
    return name in _JOB_CLIENTS or any(e.startswith(b"SLURMD_NODENAME=") for e in env)


def find_related(
    roots: Iterable[int], slurm_conf: str, directory: str | os.PathLike[str] | None = None
) -> set[int]:
    """Processes a sandbox left: its step daemons, job tasks, job clients, and everything below them.

    Found by what they are, not by their environment alone (24.11+ step daemons carry no SLURM_CONF): the
    descendants and sessions of ``roots`` (its daemons), step daemons holding files of the sandbox's folder
    (``directory``, by default the one of ``slurm_conf``), job scripts of its spool, srun/salloc/sattach/sbcast
    pointed at its ``slurm_conf``, tasks of its jobs, then every descendant of those. The sandbox runs
    proctrack/linuxproc, so its jobs make no cgroup to look in. This process and its ancestors are never included.
    """
    spared = _ancestors(os.getpid())
    where = os.fspath(directory) if directory is not None else os.path.dirname(slurm_conf)
    # the daemons name the folder as given, /proc shows open files by their real path: either may be seen
    folder = tuple({os.path.abspath(where), os.path.realpath(where)})
    entry = f"SLURM_CONF={slurm_conf}".encode()
    roots = set(roots)
    seeds = set(roots)
    for pid in _all_pids():
        if pid not in seeds and pid not in spared and alive(pid) and _belongs(pid, folder, entry):
            seeds.add(pid)
    found = (seeds - roots) | children_of(seeds)
    return found - spared - roots


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


def spawn_daemon(
    exe: str, argv: list[str], log: str | os.PathLike[str], env: Mapping[str, str], *, settle: float = 0.05
) -> tuple[int, int | None]:
    """Start a daemon that outlives this call: in a session of its own, stdin from /dev/null, stdout and stderr
    appended to ``log``, none of our other descriptors. Its pid, and its exit code if it ended within ``settle``
    seconds (None: it runs).

    The ``Popen`` is let go on purpose while the daemon runs: ``subprocess`` keeps it and collects the daemon
    once it ends (at its next start of any process), so a stopped daemon leaves no zombie. Letting go of a running
    Popen also raises "subprocess N is still running" (a ResourceWarning) — which says what is meant here, so it
    is silenced for this one object (CPython frees it at the ``del``)."""
    with open(log, "ab") as out:
        proc = subprocess.Popen(
            argv,
            executable=exe,
            stdin=subprocess.DEVNULL,
            stdout=out,
            stderr=subprocess.STDOUT,
            env=dict(env),
            start_new_session=True,
            close_fds=True,
        )
    deadline = time.monotonic() + settle
    while (code := proc.poll()) is None and time.monotonic() < deadline:
        time.sleep(0.01)
    pid = proc.pid
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", ResourceWarning)
        del proc
    return pid, code
