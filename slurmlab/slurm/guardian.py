"""A watcher process that cancels a kernel's allocations once the kernel is gone, however it died.

``atexit`` and signal handlers cannot run on SIGKILL, an OOM kill or a forced kernel restart that
kills the kernel's process group. So the first allocation of a process starts one small guardian
(``python -m slurmlab.slurm.guardian``) in its own session: killing the kernel or its group does
not kill it. The kernel writes JSON lines to a pipe whose write end only the kernel holds (not
inherited by its subprocesses, closed in forked children): ``guard`` an allocation (its job id once
known, its unique name and tag before), ``drop`` one that was released or detached. When the pipe
reaches end of file the kernel is gone: the guardian cancels what is still registered, through the
Runner (``scancel`` argv, the kernel runner's SLURM_CONF/cluster), and exits. It never cancels a
job it was not given: every ``scancel`` names the job id and is filtered by this user; a job whose
id was not known yet is looked up by its unique name and exact tag (``--comment``).

Kernel side::

    guardian = get_guardian()
    guardian.guard(key, runner, job_id=None, name=..., tag=..., salloc_pid=...)   # upsert
    guardian.drop(key)

``SLURMLAB_GUARDIAN_LOG=<path>`` makes the guardian log what it does there (default: nowhere).
"""

from __future__ import annotations

import json
import logging
import os
import signal
import subprocess
import sys
import threading
import time
import weakref
from collections.abc import Callable, Iterable, Mapping, Sequence
from pathlib import Path
from typing import BinaryIO

from slurmlab.core.jsontypes import JSONObject
from slurmlab.errors import ControllerDownError, MungeError, SlurmError
from slurmlab.slurm.identity import current_user
from slurmlab.slurm.runner import Runner

__all__ = ["Guardian", "cancel_entries", "get_guardian", "main"]

log = logging.getLogger(__name__)

LOG_ENV = "SLURMLAB_GUARDIAN_LOG"
# How long the guardian keeps retrying while the controller or munge does not answer: a kernel
# killed during a controller restart must still not leave its GPUs held.
GIVE_UP_AFTER = 600.0


# ---- kernel side ---------------------------------------------------------------------------------
class Guardian:
    """The kernel's end: starts the watcher on first use and tells it what to guard."""

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._entries: dict[str, JSONObject] = {}
        self._proc: subprocess.Popen[bytes] | None = None
        self._wfd: int | None = None
        _instances.add(self)

    @property
    def pid(self) -> int | None:
        """The watcher's process id (None before the first guarded allocation)."""
        return self._proc.pid if self._proc is not None else None

    def guarded(self) -> dict[str, JSONObject]:
        with self._lock:
            return {k: dict(v) for k, v in self._entries.items()}

    def guard(
        self,
        key: str,
        runner: Runner,
        *,
        job_id: str | None = None,
        name: str | None = None,
        tag: str | None = None,
        salloc_pid: int | None = None,
    ) -> None:
        """Register (or update) one allocation to cancel when this process dies."""
        entry: JSONObject = {
            "op": "guard",
            "key": key,
            "job": job_id,
            "name": name,
            "tag": tag,
            "salloc_pid": salloc_pid,
            **runner.settings(),  # conf, cluster, env, timeout: the watcher runs the same Slurm from "/"
        }
        with self._lock:
            old = self._entries.get(key, {})
            for field in ("job", "name", "tag", "salloc_pid"):
                if entry[field] is None and old.get(field) is not None:
                    entry[field] = old[field]
            self._entries[key] = entry
            self._send(entry)

    def drop(self, key: str) -> None:
        """The allocation was released or detached: the watcher must leave it alone."""
        with self._lock:
            if self._entries.pop(key, None) is not None:
                self._send({"op": "drop", "key": key})

    def _send(self, message: Mapping[str, object]) -> None:
        data = (json.dumps(message, separators=(",", ":")) + "\n").encode()
        for attempt in range(2):
            if self._wfd is None or (self._proc is not None and self._proc.poll() is not None):
                self._start()
                if message.get("op") == "guard":
                    return  # _start sent every entry, this one included
            try:
                _write_all(self._wfd, data)
                return
            except OSError as exc:  # the watcher died (killed by hand): start another, once
                log.warning("slurmlab: the allocation guardian is gone (%s); starting a new one", exc)
                self._close()
                if attempt:
                    raise

    def _start(self) -> None:
        self._close()
        rfd, wfd = os.pipe()  # both ends O_CLOEXEC: exec'd subprocesses never hold the write end
        env = dict(os.environ)
        # found from "/" even when slurmlab is imported from a checkout rather than installed
        root = str(Path(__file__).resolve().parents[2])
        env["PYTHONPATH"] = os.pathsep.join(p for p in (root, env.get("PYTHONPATH")) if p)
        log_path = os.environ.get(LOG_ENV)
        log_file: BinaryIO | None = None
        try:
            if log_path:
                log_file = open(log_path, "ab")  # handed to the child, closed below
            out = log_file if log_file is not None else subprocess.DEVNULL
            self._proc = subprocess.Popen(
                [sys.executable, "-m", "slurmlab.slurm.guardian"],
                stdin=rfd,
                stdout=out,
                stderr=out,
                close_fds=True,
                start_new_session=True,
                cwd="/",
                env=env,
            )
        finally:
            os.close(rfd)
            if log_file is not None:
                log_file.close()
        self._wfd = wfd
        for entry in self._entries.values():
            _write_all(wfd, (json.dumps(entry, separators=(",", ":")) + "\n").encode())

    def _close(self) -> None:
        if self._wfd is not None:
            try:
                os.close(self._wfd)
            except OSError:
                pass
            self._wfd = None

    def _forget_after_fork(self) -> None:
        # A forked child (multiprocessing) must not keep the pipe open, or the watcher would
        # wait for the child too; it guards nothing of its own until it allocates.
        self._close()
        self._proc = None
        self._entries = {}
        self._lock = threading.Lock()


def _write_all(fd: int | None, data: bytes) -> None:
    if fd is None:
        raise OSError("no pipe to the guardian")
    view = memoryview(data)
    while view:
        n = os.write(fd, view)
        view = view[n:]


_guardian: Guardian | None = None
_guardian_lock = threading.Lock()
_instances: weakref.WeakSet[Guardian] = weakref.WeakSet()


def get_guardian() -> Guardian:
    """This process's guardian (started on its first ``guard``)."""
    global _guardian
    with _guardian_lock:
        if _guardian is None:
            _guardian = Guardian()
        return _guardian


def _after_fork_in_child() -> None:
    global _guardian_lock
    _guardian_lock = threading.Lock()
    for guardian in list(_instances):
        guardian._forget_after_fork()


os.register_at_fork(after_in_child=_after_fork_in_child)


# ---- watcher side --------------------------------------------------------------------------------
def _is_salloc(pid: int) -> bool:
    try:
        argv0 = Path(f"/proc/{pid}/cmdline").read_bytes().split(b"\0", 1)[0]
    except OSError:
        return False
    return os.path.basename(argv0) == b"salloc"


def _withdraw_salloc(pid: object) -> None:
    # A salloc still waiting for its job id lives in its own session and outlives the kernel;
    # SIGINT makes it withdraw the request. Only a process that is still salloc is signalled.
    if isinstance(pid, int) and pid > 1 and _is_salloc(pid):
        try:
            os.kill(pid, signal.SIGINT)
        except OSError:
            pass


def _ids_by_tag(runner: Runner, user: str, name: str, tag: str) -> list[str]:
    out = runner.run(["squeue", "-h", "-u", user, "-n", name, "-o", "%i|%k"]).stdout
    ids = []
    for line in out.splitlines():
        job, _, comment = line.partition("|")
        if comment == tag and job.strip().isdigit():
            ids.append(job.strip())
    return ids


def _cancel_one(entry: Mapping[str, object], user: str) -> bool:
    """Cancel one registered allocation. True when done (or nothing is left to do)."""
    conf = entry.get("conf")
    if isinstance(conf, str) and conf and not os.path.exists(conf):
        # the cluster's configuration is gone (a sandbox that was stopped and removed): there is no
        # controller left to ask, and waiting GIVE_UP_AFTER for one would leave this process behind
        log.info("job %s: its cluster's configuration %s is gone; nothing to cancel", entry.get("job"), conf)
        return True
    runner = Runner.from_settings(entry)
    job, name, tag = entry.get("job"), entry.get("name"), entry.get("tag")
    if job is None:
        _withdraw_salloc(entry.get("salloc_pid"))
        if not (isinstance(name, str) and name and isinstance(tag, str) and tag):
            return True
        jobs = _ids_by_tag(runner, user, name, tag)
    else:
        jobs = [str(job)]
    for job_id in jobs:
        if not job_id.replace("_", "").isdigit():
            log.warning("not a job id, skipped: %r", job_id)
            continue
        try:
            # --user filters: a job id that is (no longer) this user's is left alone
            runner.run(["scancel", f"--user={user}", job_id])
            log.info("cancelled job %s", job_id)
        except (ControllerDownError, MungeError):
            raise
        except SlurmError as exc:  # ended already, purged: nothing left to release
            log.info("job %s: %s", job_id, exc.message)
    return True


def cancel_entries(
    entries: Sequence[Mapping[str, object]], *, give_up_after: float = GIVE_UP_AFTER,
    sleep: Callable[[float], object] = time.sleep,
) -> list[Mapping[str, object]]:
    """Cancel every entry, retrying those the controller could not take; returns what was left."""
    user = current_user()  # the one "who am I": the effective uid
    left = list(entries)
    deadline = time.monotonic() + give_up_after
    delay = 1.0
    while left:
        retry = []
        for entry in left:
            try:
                _cancel_one(entry, user)
            except (ControllerDownError, MungeError) as exc:
                log.warning("job %s: %s; will retry", entry.get("job"), exc.message)
                retry.append(entry)
            except Exception:  # one bad entry must not keep the others from being cancelled
                log.exception("job %s: could not cancel", entry.get("job"))
        left = retry
        if not left or time.monotonic() + delay > deadline:
            break
        sleep(delay)
        delay = min(delay * 2, 30.0)
    for entry in left:
        log.error("gave up on job %s after %.0f s", entry.get("job"), give_up_after)
    return left


def read_entries(stream: Iterable[bytes | str]) -> dict[str, JSONObject]:
    """Follow the kernel's lines until end of file; returns what is still registered."""
    entries: dict[str, JSONObject] = {}
    for raw in stream:
        try:
            msg = json.loads(raw)
        except ValueError:
            log.warning("ignored a line that is not JSON: %r", raw[:200])
            continue
        if not isinstance(msg, dict) or not isinstance(msg.get("key"), str):
            log.warning("ignored a message without a key: %r", raw[:200])
            continue
        if msg.get("op") == "guard":
            entries[msg["key"]] = msg
        elif msg.get("op") == "drop":
            entries.pop(msg["key"], None)
    return entries


def main(argv: Sequence[str] | None = None) -> int:
    # Own session already; these keep a terminal hangup or a stray Ctrl-C from ending the watch.
    signal.signal(signal.SIGHUP, signal.SIG_IGN)
    signal.signal(signal.SIGINT, signal.SIG_IGN)
    logging.basicConfig(level=logging.INFO, stream=sys.stderr,
                        format=f"%(asctime)s slurmlab-guardian[{os.getpid()}] %(message)s")
    entries = read_entries(sys.stdin.buffer)
    if not entries:
        return 0
    log.info("kernel gone; cancelling %d allocation(s)", len(entries))
    left = cancel_entries(list(entries.values()))
    return 1 if left else 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
