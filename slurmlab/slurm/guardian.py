"""A watcher process that cancels a kernel's allocations once the kernel is gone, however it died.

``atexit`` and signal handlers cannot run on SIGKILL, an OOM kill or a forced kernel restart that
kills the kernel's process group. So the first allocation of a process starts one small guardian
(``python -m slurmlab.slurm.guardian``) in its own session: killing the kernel or its group does
not kill it. The kernel writes JSON lines to a pipe whose write end only the kernel holds (not
inherited by its subprocesses, closed in forked children): ``guard`` an allocation (its job id once
known, its unique name and tag before; ``released`` once the kernel asked for its cancel), ``drop``
one that was detached, or released long enough ago that Slurm has saved the cancel. When the pipe
reaches end of file the kernel is gone: the guardian cancels what is still registered, through the
Runner (``scancel`` argv, the kernel runner's SLURM_CONF/cluster), and exits. It never cancels a
job it was not given: every ``scancel`` names the job id and is filtered by this user; a job whose
id was not known yet is looked up by its unique name and exact tag (``--comment``) among this
user's jobs (``squeue -u``: the uid Slurm recorded, which no other user can forge).

A job whose id was not known yet may not exist yet either: salloc's request can sit unread in a
frozen or restarting controller, and ``salloc --no-shell`` interrupted while it waits still leaves the
job behind once the controller reads the request. So the guardian keeps looking while that salloc
lives, and for a grace after it is gone, counted in time the controller answered (a modest back-off:
a handful of ``squeue`` calls). A job the kernel released shortly before it died is looked at once:
slurmctld saves a cancel only with its periodic state save, and one that crashed before then brings
the job back RUNNING.

Kernel side::

    guardian = get_guardian()
    guardian.guard(key, runner, job_id=None, name=..., tag=..., salloc_pid=...)   # upsert
    guardian.released(key)                                                        # cancel asked for
    guardian.drop(key)

``SLURMLAB_GUARDIAN_LOG=<path>`` makes the guardian log what it does there (default: nowhere).
"""

from __future__ import annotations

import contextlib
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

from slurmlab.core.gpu.hardware_profile import HARDWARE_FILE
from slurmlab.core.jsontypes import JSONObject
from slurmlab.errors import ControllerDownError, MungeError, SlurmError
from slurmlab.slurm.identity import current_user
from slurmlab.slurm.munge import DEFAULT_MUNGE_SOCKET, munge_socket
from slurmlab.slurm.runner import Runner

__all__ = [
    "BACK_STATES",
    "RELEASE_SETTLE",
    "Guardian",
    "cancel_entries",
    "get_guardian",
    "live_jobs_of",
    "main",
    "scancel_mine",
]

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
            "released": None,
            **runner.settings(),  # conf, cluster, env, timeout: the watcher runs the same Slurm from "/"
        }
        with self._lock:
            old = self._entries.get(key, {})
            for field in ("job", "name", "tag", "salloc_pid", "released"):
                if entry[field] is None and old.get(field) is not None:
                    entry[field] = old[field]
            self._entries[key] = entry
            self._send(entry)

    def released(self, key: str) -> None:
        """The kernel asked Slurm to cancel this allocation: at the kernel's end the watcher checks it once more
        (a controller that crashed before saving the cancel brings the job back) instead of cancelling it."""
        with self._lock:
            entry = self._entries.get(key)
            if entry is None:
                return
            entry["released"] = time.time()  # wall clock: the watcher compares it with its own
            self._send(entry)

    def drop(self, key: str) -> None:
        """The allocation was detached, or released long enough ago: the watcher must leave it alone."""
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
def _is_salloc(pid: int, name: str | None = None) -> bool:
    """``pid`` is a salloc (of the job named ``name``, when given: a pid reused by another salloc is not)."""
    try:
        argv = Path(f"/proc/{pid}/cmdline").read_bytes().split(b"\0")
    except OSError:
        return False
    return os.path.basename(argv[0]) == b"salloc" and (name is None or f"--job-name={name}".encode() in argv)


def _withdraw_salloc(pid: object) -> None:
    # A salloc still waiting for its job id lives in its own session and outlives the kernel;
    # SIGINT makes it withdraw the request. Only a process that is still salloc is signalled.
    if isinstance(pid, int) and pid > 1 and _is_salloc(pid):
        try:
            os.kill(pid, signal.SIGINT)
        except OSError:
            pass


def _ids_by_tag(runner: Runner, user: str, name: str, tag: str) -> list[str]:
    # -u: Slurm's own record of the owner (a uid), so another user's job of that name and tag is never listed
    out = runner.run(["squeue", "-h", "-u", user, "-n", name, "-o", "%i|%k"]).stdout
    ids = []
    for line in out.splitlines():
        job, _, comment = line.partition("|")
        if comment == tag and job.strip().isdigit():
            ids.append(job.strip())
    return ids


# The states a job comes back in when a restarted controller lost its cancel: it holds or waits for resources.
# Not COMPLETING: a job that was just cancelled is still completing, and that is no return.
BACK_STATES = "PENDING,CONFIGURING,RUNNING,SUSPENDED,REQUEUED,RESIZING"


def live_jobs_of(runner: Runner, user: str) -> dict[str, tuple[str, str]]:
    """{job id: (state, comment)} of ``user``'s jobs that hold or wait for resources, in one ``squeue``."""
    out = runner.run(["squeue", "-h", "-u", user, "-t", BACK_STATES, "-o", "%i|%T|%k"]).stdout
    jobs = {}
    for line in out.splitlines():
        job, sep, rest = line.partition("|")
        state, sep2, comment = rest.partition("|")  # the comment last: its own "|" cannot shift the id
        if sep and sep2 and job.strip().isdigit():
            jobs[job.strip()] = (state.strip(), comment)
    return jobs


def scancel_mine(runner: Runner, user: str, job_id: str) -> None:
    """scancel one job of ``user``; one that ended or was purged already is not an error."""
    if not job_id.replace("_", "").isdigit():
        log.warning("not a job id, skipped: %r", job_id)
        return
    try:
        # --user filters: a job id that is (no longer) this user's is left alone
        runner.run(["scancel", f"--user={user}", job_id])
        log.info("cancelled job %s", job_id)
    except (ControllerDownError, MungeError):
        raise
    except SlurmError as exc:  # ended already, purged: nothing left to release
        log.info("job %s: %s", job_id, exc.message)


# Looking for a job whose id the kernel never learnt: how often /proc is read to see whether its salloc still
# runs (free), the longest wait between two squeue calls, and the grace after salloc is gone: how long the
# controller must have answered, from the first answer after salloc's end, before "no such job" is believed.
# A request salloc sent stays in the controller's socket until the controller reads it (after a freeze, a
# restart of the process that holds the socket); once it answers again it creates the job within moments.
SALLOC_CHECK = 0.5
LOOKUP_MAX_DELAY = 8.0
SEARCH_GRACE = 10.0
RETRY_MAX_DELAY = 30.0


class _Work:
    """What the guardian still owes for some entries; :meth:`step` runs when ``due`` and says when it is done."""

    def __init__(self, entries: Sequence[Mapping[str, object]], runner: Runner) -> None:
        self.entries = list(entries)
        self.runner = runner
        self.due = 0.0
        self.retry_delay = 1.0

    def step(self, user: str, now: float) -> bool:
        raise NotImplementedError

    def _retry(self, now: float, exc: ControllerDownError | MungeError) -> bool:
        log.warning("%s: %s; will retry", self, exc.message)
        self.due = now + self.retry_delay
        self.retry_delay = min(self.retry_delay * 2, RETRY_MAX_DELAY)
        return False


class _CancelJob(_Work):
    """A job whose id is known: one scancel, retried while the controller does not answer; then its salloc, if it
    lingers, is nudged (:func:`_nudge_lingering_salloc`)."""

    def __str__(self) -> str:
        return f"job {self.entries[0].get('job')}"

    def step(self, user: str, now: float) -> bool:
        entry = self.entries[0]
        try:
            scancel_mine(self.runner, user, str(entry.get("job")))
        except (ControllerDownError, MungeError) as exc:
            return self._retry(now, exc)
        _nudge_lingering_salloc(entry.get("salloc_pid"), entry.get("name"))
        return True


# how long the salloc of a cancelled job gets to end by itself before it is nudged (seconds; it ends in
# milliseconds when all is well: its command ended with the kernel's pipe, and the job with the scancel)
LINGER = 1.0


def _nudge_lingering_salloc(pid: object, name: object) -> None:
    """The held salloc of a dead kernel's job, still there after the job's cancel: salloc's handler of the job's
    end can reap its command (ended with the kernel's pipe) before salloc's main loop does, which then busy-waits
    for a child that is gone until a signal comes; SIGHUP ends that loop (see
    :data:`slurmlab.slurm.allocation.salloc.NUDGE_AFTER`)."""
    if not (isinstance(pid, int) and pid > 1 and isinstance(name, str) and name):
        return
    deadline = time.monotonic() + LINGER
    while _is_salloc(pid, name):
        if time.monotonic() >= deadline:
            log.info("salloc (pid %s) of the cancelled job %s lingers: SIGHUP", pid, name)
            with contextlib.suppress(OSError):
                os.kill(pid, signal.SIGHUP)
            return
        time.sleep(0.05)


class _FindJob(_Work):
    """A job whose id the kernel never learnt (it died while salloc waited for the controller).

    Its salloc is told to withdraw the request; then the job is looked for by name and tag while salloc runs
    and for :data:`SEARCH_GRACE` of answered time after, and every match is cancelled."""

    def __init__(self, entry: Mapping[str, object], runner: Runner, grace: float) -> None:
        super().__init__([entry], runner)
        pid = entry.get("salloc_pid")
        self.salloc_pid = pid if isinstance(pid, int) and pid > 1 else None
        self.name, self.tag = str(entry.get("name")), str(entry.get("tag"))
        self.grace = grace
        self.withdrawn = False
        self.salloc_alive = self.salloc_pid is not None
        self.next_lookup = 0.0
        self.lookup_delay = 1.0
        self.quiet_since: float | None = None  # the first answered lookup after salloc's end
        self.last_answer: float | None = None
        self.lookups = 0
        self.found: list[str] = []
        self.cancelled: set[str] = set()

    def __str__(self) -> str:
        return f"the job named {self.name}"

    def step(self, user: str, now: float) -> bool:
        if not self.withdrawn:
            _withdraw_salloc(self.salloc_pid)
            self.withdrawn = True
        if self.salloc_alive and not (self.salloc_pid is not None and _is_salloc(self.salloc_pid)):
            self.salloc_alive = False  # it just ended: whatever it submitted is in the controller's hands now
            self.next_lookup, self.lookup_delay = now, 1.0
            log.info("%s: its salloc (pid %s) is gone", self, self.salloc_pid)
        if now >= self.next_lookup and not self._lookup(user, now):
            return False
        for job_id in [j for j in self.found if j not in self.cancelled]:
            try:
                scancel_mine(self.runner, user, job_id)
            except (ControllerDownError, MungeError) as exc:
                return self._retry(now, exc)
            self.cancelled.add(job_id)
        # one salloc makes one job: once it is gone, its job cancelled or not made in the grace, all is done
        if not self.salloc_alive and (
            self.cancelled
            or (
                self.quiet_since is not None
                and self.last_answer is not None
                and self.last_answer - self.quiet_since >= self.grace
            )
        ):
            log.info(
                "%s: %s after %d lookup(s)",
                self,
                f"cancelled {', '.join(sorted(self.cancelled))}" if self.cancelled else "never created",
                self.lookups,
            )
            return True
        self.due = min(self.next_lookup, now + SALLOC_CHECK) if self.salloc_alive else self.next_lookup
        return False

    def _lookup(self, user: str, now: float) -> bool:
        """One squeue for the job; False when the controller did not answer (retried later)."""
        self.lookups += 1
        self.next_lookup = now + self.lookup_delay
        self.lookup_delay = min(self.lookup_delay * 2, LOOKUP_MAX_DELAY)
        try:
            ids = _ids_by_tag(self.runner, user, self.name, self.tag)
        except (ControllerDownError, MungeError) as exc:
            log.warning("%s: lookup %d: %s; will look again", self, self.lookups, exc.message)
            self.quiet_since = None  # the controller may have been down: the grace starts again
            self.due = min(self.next_lookup, now + SALLOC_CHECK) if self.salloc_alive else self.next_lookup
            return False
        log.info("%s: lookup %d: %s", self, self.lookups, ", ".join(ids) if ids else "not there")
        self.found += [j for j in ids if j not in self.found]
        if not self.salloc_alive:
            self.last_answer = now
            if self.quiet_since is None:
                self.quiet_since = now
        return True


class _Recheck(_Work):
    """Jobs the kernel released shortly before it died: one squeue says whether a controller restart brought any
    back (see :data:`RELEASE_SETTLE`), and those are cancelled again."""

    def __str__(self) -> str:
        return "released job(s) " + ", ".join(str(e.get("job")) for e in self.entries)

    def step(self, user: str, now: float) -> bool:
        try:
            alive = live_jobs_of(self.runner, user)
            for entry in self.entries:
                job_id, tag = str(entry.get("job")), entry.get("tag")
                if job_id in alive and (not isinstance(tag, str) or alive[job_id][1] == tag):
                    log.info("job %s was released but is back (a controller restart lost its cancel)", job_id)
                    scancel_mine(self.runner, user, job_id)
        except (ControllerDownError, MungeError) as exc:
            return self._retry(now, exc)
        return True


# slurmctld writes a cancel to its StateSaveLocation only with its periodic state save (every 300 s, compiled in as
# PERIODIC_CHECKPOINT; a cancel does not ask for an earlier one): one killed before then starts from the older state,
# where the job RUNS. So a release is looked at until this long after it (the kernel: 10 s after the cancel, then
# every 30 s, FIRST_CHECK and FOLLOW_INTERVAL of slurmlab.slurm.allocation.release; the guardian, if the kernel dies
# meanwhile: one look, retried while the controller does not answer); an older one is saved and costs no call.
RELEASE_SETTLE = 330.0


# A sandbox publishes this file beside its slurm.conf while it runs, and removes it when it is taken down on
# purpose; a crashed or frozen one keeps it (and its slurm.conf and HARDWARE_FILE stay either way)
SANDBOX_STATE = "state.json"


def cluster_gone(conf: object) -> str | None:
    """Why no controller will come back for the cluster of ``conf``, or None: its configuration is gone (a sandbox
    stopped and removed), or it is a sandbox taken down on purpose (whose slurmctld saved its state as it stopped,
    so no cancel was lost, and whose jobs ended with it). Waiting GIVE_UP_AFTER for either would leave this
    process behind."""
    if not isinstance(conf, str) or not conf:
        return None
    if not os.path.exists(conf):
        return f"its cluster's configuration {conf} is gone"
    socket = munge_socket(conf)
    if socket is not None and socket != DEFAULT_MUNGE_SOCKET and not os.path.isdir(os.path.dirname(socket)):
        # a copy of a sandbox's slurm.conf outliving the sandbox: the folder of the munge it names is gone
        return f"the munge folder {os.path.dirname(socket)} that {conf} names is gone"
    folder = os.path.dirname(conf)
    if os.path.exists(os.path.join(folder, HARDWARE_FILE)) and not os.path.exists(
        os.path.join(folder, SANDBOX_STATE)
    ):
        return f"the sandbox of {conf} was taken down"
    return None


def _plan(entries: Sequence[Mapping[str, object]], wall_now: float, grace: float) -> list[_Work]:
    """The work each entry needs; the released ones of one cluster share one lookup."""
    works: list[_Work] = []
    released: dict[str, tuple[Runner, list[Mapping[str, object]]]] = {}
    for entry in entries:
        runner = Runner.from_settings(entry)
        gone = cluster_gone(runner.environ().get("SLURM_CONF"))  # the runner's own env may name it
        if gone is not None:
            log.info("job %s: %s; nothing to cancel", entry.get("job") or entry.get("name"), gone)
            continue
        job, name, tag, when = entry.get("job"), entry.get("name"), entry.get("tag"), entry.get("released")
        if isinstance(when, (int, float)) and job is not None:
            if wall_now - when < RELEASE_SETTLE:
                key = json.dumps([runner.slurm_conf, runner.cluster, dict(runner.env)], sort_keys=True)
                released.setdefault(key, (runner, []))[1].append(entry)
        elif job is not None:
            works.append(_CancelJob([entry], runner))
        elif isinstance(name, str) and name and isinstance(tag, str) and tag:
            works.append(_FindJob(entry, runner, grace))
        else:
            _withdraw_salloc(
                entry.get("salloc_pid")
            )  # nothing to look the job up by: withdraw the request only
    works += [_Recheck(group, runner) for runner, group in released.values()]
    return works


def cancel_entries(
    entries: Sequence[Mapping[str, object]],
    *,
    give_up_after: float = GIVE_UP_AFTER,
    sleep: Callable[[float], object] = time.sleep,
    clock: Callable[[], float] = time.monotonic,
    grace: float = SEARCH_GRACE,
) -> list[Mapping[str, object]]:
    """Cancel every entry, retrying those the controller could not take; returns what was left."""
    user = current_user()  # the one "who am I": the effective uid
    works = _plan(entries, time.time(), grace)
    deadline = clock() + give_up_after
    while works:
        for work in list(works):
            now = clock()
            if work.due > now:
                continue
            gone = cluster_gone(work.runner.environ().get("SLURM_CONF"))  # taken down while it waited
            if gone is not None:
                log.info("%s: %s; nothing left to do", work, gone)
                works.remove(work)
                continue
            try:
                done = work.step(user, now)
            except Exception:  # one bad entry must not keep the others from being cancelled
                log.exception("%s: could not cancel", work)
                done = True
            if done:
                works.remove(work)
        if not works:
            break
        wake = min(work.due for work in works)
        if wake > deadline:
            break
        sleep(max(0.0, wake - clock()))
    left = [entry for work in works for entry in work.entries]
    for entry in left:
        log.error("gave up on job %s after %.0f s", entry.get("job") or entry.get("name"), give_up_after)
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
    logging.basicConfig(
        level=logging.INFO,
        stream=sys.stderr,
        format=f"%(asctime)s slurmlab-guardian[{os.getpid()}] %(message)s",
    )
    entries = read_entries(sys.stdin.buffer)
    if not entries:
        return 0
    log.info("kernel gone; cancelling %d allocation(s)", len(entries))
    left = cancel_entries(list(entries.values()))
    return 1 if left else 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
