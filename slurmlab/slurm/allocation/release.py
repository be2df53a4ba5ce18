"""This process's live allocations and their release: the guardian, the release when the process ends, and making a
release stick.

:data:`LIVE` (a :class:`LiveAllocations`) is the registry every :class:`~.lifecycle.Allocation` joins when it is
made. Three layers make sure a job dies with the kernel that owns it: :meth:`LiveAllocations.release_all` at exit, the TERM/HUP
handlers that run it before the signal ends the process, and the guardian (:mod:`slurmlab.slurm.guardian`), a
separate process that cancels what is still registered when this one dies without a word (SIGKILL, a crash).

A cancel is not final when ``scancel`` returns: slurmctld writes it to its StateSaveLocation only with its periodic
state save (every 300 s, compiled in as PERIODIC_CHECKPOINT; a cancel does not ask for an earlier one), and a
slurmctld killed before then starts again from the older state, where the job is RUNNING and holds its GPUs. So
every job this process cancelled is followed (:class:`ReleaseFollower`, one ``squeue`` per round for all of them:
the first :data:`FIRST_CHECK` seconds after a cancel, then every :data:`FOLLOW_INTERVAL` seconds) until the
controller has answered for :data:`RELEASE_SETTLE` seconds after the cancel; one that comes back is
cancelled again, and its allocation shows it (its state, and a note saying what happened). The guardian keeps the
released entries meanwhile and looks at them once more if the kernel dies.
"""

from __future__ import annotations

import atexit
import logging
import os
import signal
import sys
import threading
import time
import weakref
from collections.abc import Callable
from dataclasses import dataclass
from types import FrameType
from typing import TYPE_CHECKING, Protocol

from slurmlab.core.slurm.models import Job
from slurmlab.errors import SlurmError
from slurmlab.slurm.guardian import RELEASE_SETTLE, get_guardian, live_jobs_of, scancel_mine
from slurmlab.slurm.identity import current_user
from slurmlab.slurm.loop_thread import LoopThread

if TYPE_CHECKING:
    from slurmlab.slurm.runner import Runner

__all__ = [
    "FIRST_CHECK",
    "FOLLOW_INTERVAL",
    "CancelledJob",
    "LIVE",
    "RELEASE_DEADLINE",
    "RELEASE_SIGNALS",
    "LiveAllocations",
    "Releasable",
    "ReleaseFollower",
    "follow_cancelled",
    "release_all",
]

# the logger of Allocation as a whole, which users may already filter on
log = logging.getLogger("slurmlab.slurm.allocation")

# How often released jobs are looked at (one squeue for all of a cluster's): a job a restarted controller brought
# back holds its GPUs at most this long (plus the restart) before it is cancelled again. The rounds go on for
# RELEASE_SETTLE (5.5 minutes) after a cancel and each is a whole-queue listing on 22.05 (JOB_INFO +
# PARTITION_INFO): every 10 s cost 33 listings after each cancel, every 30 s costs 12.
FOLLOW_INTERVAL = 30.0
# The first look after a cancel comes sooner (one round for every cancel made meanwhile): a cancel lost at once
# (the controller restarting as it was sent) is redone within this, not FOLLOW_INTERVAL.
FIRST_CHECK = 10.0
# SIGTERM: `kill`, a batch system, JupyterLab's shutdown after its grace period; SIGHUP: a closed
# terminal or ssh session. SIGINT belongs to ipykernel (it interrupts a cell) and is never touched.
RELEASE_SIGNALS = (signal.SIGTERM, signal.SIGHUP)
# What a signal handler gives release_all before the process dies anyway; the guardian cancels
# whatever it did not reach.
RELEASE_DEADLINE = 10.0
_SignalHandler = Callable[[int, FrameType | None], object] | int | None


class Releasable(Protocol):
    """What the registry and the follower ask of an allocation (an :class:`~slurmlab.slurm.allocation.Allocation`),
    and the reports they send it back."""

    released_at: float | None  # when this process last asked Slurm to cancel the job

    @property
    def runner(self) -> Runner: ...
    @property
    def job_id(self) -> str | None: ...
    @property
    def job(self) -> Job | None: ...
    @property
    def name(self) -> str | None: ...
    @property
    def tag(self) -> str | None: ...
    @property
    def release_at_exit(self) -> bool: ...
    @property
    def ended(self) -> bool: ...
    @property
    def owner_pid(self) -> int: ...
    @property
    def guard_key(self) -> str: ...

    def cancel(self) -> None: ...

    # the reports of the follower
    def follow_release(self, following: bool) -> None: ...
    def release_settled(self) -> None: ...
    def add_note(self, note: str) -> None: ...
    def came_back(self, state: str, note: str) -> None: ...


class LiveAllocations:
    """The allocations of this process, and what releases them: the guardian's list, the exit hooks (atexit and
    the TERM/HUP handlers) and the follower of released jobs. One per process (:data:`LIVE`); an allocation joins
    it when it is made and leaves it once released."""

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._live: weakref.WeakSet[Releasable] = weakref.WeakSet()
        # the tags (comments) of the jobs this process asked Slurm to cancel: find_leftovers lists one still alive
        self.released: set[str] = set()
        self.follower: ReleaseFollower | None = None  # made on the first release that needs following
        self._atexit_done = False
        self._previous_handlers: dict[int, _SignalHandler] = {}
        self._handlers_pid: int | None = None

    # ---- the registry ---------------------------------------------------------------------------
    def register(self, alloc: Releasable) -> None:
        """Count ``alloc`` among this process's allocations, and make sure the exit hooks are in place."""
        with self._lock:
            self._live.add(alloc)
        self._ensure_exit_hooks()

    def discard(self, alloc: Releasable) -> None:
        """``alloc`` is released: nothing is left to do for it at exit."""
        with self._lock:
            self._live.discard(alloc)

    def released_tags(self) -> frozenset[str]:
        """The comments of the jobs this process cancelled (a slurmlab tag, or the comment an attached job had)."""
        with self._lock:
            return frozenset(self.released)

    def get_follower(self) -> ReleaseFollower:
        """This process's follower of released jobs."""
        with self._lock:
            if self.follower is None:
                self.follower = ReleaseFollower()
            return self.follower

    # ---- the guardian: cancels what is registered if this process dies without releasing ---------
    def guard(self, alloc: Releasable, salloc_pid: int | None = None) -> None:
        """Register (or update) ``alloc`` with the guardian, unless it is kept at exit or not this process's."""
        if not alloc.release_at_exit or os.getpid() != alloc.owner_pid or not alloc.runner.guarded:
            return
        try:
            get_guardian().guard(
                alloc.guard_key,
                alloc.runner,
                job_id=alloc.job_id,
                name=alloc.name,
                tag=alloc.tag,
                salloc_pid=salloc_pid,
            )
        except OSError as exc:  # no watcher: atexit and the TERM/HUP handlers still release it
            log.warning("slurmlab: could not start the allocation guardian: %s", exc)

    def unguard(self, alloc: Releasable) -> None:
        """Take ``alloc`` off the guardian's list (released, or kept on purpose)."""
        if os.getpid() != alloc.owner_pid or not getattr(alloc.runner, "guarded", False):
            return
        try:
            get_guardian().drop(alloc.guard_key)
        except OSError as exc:
            log.warning("slurmlab: could not reach the allocation guardian: %s", exc)

    def tell_released(self, alloc: Releasable) -> None:
        """Tell the guardian ``alloc``'s job was cancelled: it keeps the entry, and looks at it once more if this
        process dies before Slurm has saved the cancel."""
        if os.getpid() != alloc.owner_pid:
            return
        try:
            get_guardian().released(alloc.guard_key)
        except OSError as exc:
            log.warning("slurmlab: could not reach the allocation guardian: %s", exc)

    # ---- making a release stick -----------------------------------------------------------------
    def follow_release(self, alloc: Releasable) -> None:
        """``alloc``'s job was just cancelled: follow it until Slurm has saved the cancel (the module's docstring)."""
        alloc.released_at = time.time()
        comment = alloc.tag or (alloc.job.comment if alloc.job is not None else None)
        with self._lock:
            if comment:
                self.released.add(comment)
        if not getattr(alloc.runner, "guarded", False) or os.getpid() != alloc.owner_pid:
            self.unguard(alloc)  # a replaying runner has no cluster that could bring the job back
            return
        if alloc.release_at_exit:
            self.tell_released(alloc)
        self.get_follower().follow(alloc)

    def follow_given_up(self, alloc: Releasable) -> None:
        """A submission given up before salloc said the job's id (see :func:`.salloc.may_still_be_made`): a job
        the controller makes from it later is found by its tag and cancelled; the guardian keeps looking for it by
        name and tag if this process dies first."""
        with self._lock:
            if alloc.tag:
                self.released.add(alloc.tag)
        if not getattr(alloc.runner, "guarded", False) or os.getpid() != alloc.owner_pid:
            return
        self.get_follower().follow(alloc)

    # ---- at exit --------------------------------------------------------------------------------
    def release_all(self) -> list[str]:
        """Cancel every allocation of this process that is not detached (run at exit)."""
        released = []
        with self._lock:
            allocs = list(self._live)
        for alloc in allocs:
            if alloc.release_at_exit and not alloc.ended and alloc.owner_pid == os.getpid():
                try:
                    alloc.cancel()
                    if alloc.job_id:
                        released.append(alloc.job_id)
                except Exception as exc:  # at exit: report, never raise
                    print(f"slurmlab: could not release allocation {alloc.job_id}: {exc}", file=sys.stderr)
        return released

    def _ensure_exit_hooks(self) -> None:
        if not self._atexit_done:
            atexit.register(self.release_all)
            self._atexit_done = True
        self._install_signal_handlers()

    def _install_signal_handlers(self) -> None:
        """Release on TERM/HUP, then let the signal do what it did before (chained or default)."""
        if self._handlers_pid == os.getpid() or threading.current_thread() is not threading.main_thread():
            return  # signal.signal works only in the main thread; a later allocation there retries
        for signum in RELEASE_SIGNALS:
            previous = signal.getsignal(signum)
            # ignored (nohup): the process is meant to survive it; None: a handler not set from
            # Python, which cannot be chained
            if previous is signal.SIG_IGN or previous is None or previous == self._on_release_signal:
                continue
            try:
                signal.signal(signum, self._on_release_signal)
            except (ValueError, OSError):
                continue
            self._previous_handlers[signum] = previous
        self._handlers_pid = os.getpid()

    def _on_release_signal(self, signum: int, frame: FrameType | None) -> None:
        previous = self._previous_handlers.get(signum, signal.SIG_DFL)
        if (
            os.getpid() == self._handlers_pid
        ):  # inherited by a forked child: its parent's jobs are not its own
            # in a thread with a deadline: the main thread may hold a lock release_all needs
            worker = threading.Thread(target=self.release_all, name="slurmlab-release", daemon=True)
            worker.start()
            worker.join(RELEASE_DEADLINE)
        if callable(previous):
            previous(signum, frame)
            return
        # the default action: die of this signal, as the process would have without slurmlab
        signal.signal(signum, signal.SIG_DFL)
        os.kill(os.getpid(), signum)


# ---- making a release stick --------------------------------------------------------------------
@dataclass
class _Released:
    alloc: Releasable
    job_id: str | None  # None: a submission given up before salloc said the job's id (found by its tag)
    comment: str | None  # the job's tag: a reused job id of another job is never taken for it
    asked_at: float  # clock() of the latest cancel


def _clock_text(wall: float | None) -> str:
    return time.strftime("%H:%M:%S", time.localtime(wall)) if wall is not None else "?"


class ReleaseFollower:
    """Looks at the jobs this process cancelled until Slurm has saved each cancel; cancels again one that a
    controller restart brought back, and puts the truth in its allocation. One thread, started on demand, ends
    when nothing is left to follow.

    One round (one ``squeue`` per cluster) looks at every job followed. A cancel asks for a round within
    ``first_check`` seconds unless one is due sooner, so cancels made close together share their first look;
    after a round the next comes ``interval`` seconds later. ``first_check`` defaults to a third of ``interval``
    (:data:`FIRST_CHECK` for the default :data:`FOLLOW_INTERVAL`)."""

    def __init__(
        self,
        *,
        interval: float = FOLLOW_INTERVAL,
        first_check: float | None = None,
        settle: float = RELEASE_SETTLE,
        clock: Callable[[], float] = time.monotonic,
    ) -> None:
        self.interval = interval
        self.first_check = interval * FIRST_CHECK / FOLLOW_INTERVAL if first_check is None else first_check
        self.settle = settle
        self.clock = clock
        self._next_round: float | None = None  # clock() of the next round; None: none planned
        self._lock = threading.RLock()
        self._jobs: dict[tuple[str | None, str | None, str], _Released] = {}
        self._wake = threading.Event()
        self._loop = LoopThread(self._run, name="slurmlab-release-follow", lock=self._lock)
        self.rounds = 0  # squeue calls made, for tests
        self._pid = os.getpid()

    def follow(self, alloc: Releasable, *, start: bool = True) -> None:
        """Follow ``alloc``'s job from now (a second cancel starts its wait again). An allocation without a job id
        is a submission given up while salloc waited: a controller that reads its request late still makes the
        job, which is then found by the allocation's tag."""
        comment = alloc.tag or (alloc.job.comment if alloc.job is not None else None)
        if alloc.job_id is None and not comment:
            return
        key = (alloc.runner.configuration(), alloc.runner.cluster, alloc.job_id or f"tag:{comment}")
        with self._lock:
            self._after_fork()
            now = self.clock()
            self._jobs[key] = _Released(alloc, alloc.job_id, comment or None, now)
            alloc.follow_release(True)
            sooner = self._next_round is None or now + self.first_check < self._next_round
            if sooner:
                self._next_round = now + self.first_check
        if start:
            try:
                self._loop.ensure_running()
            except (
                RuntimeError
            ):  # the interpreter is shutting down (release_all at exit): the guardian checks it
                log.debug("slurmlab: released jobs not followed: the interpreter is shutting down")
                return
            if sooner:
                self._wake.set()  # the thread waits for a later round: it waits for this one instead

    def following(self) -> list[str]:
        """The job ids followed (a submission given up: ``tag:<its tag>``)."""
        with self._lock:
            return [key[2] for key in self._jobs]

    def stop(self) -> None:
        self._loop.stop(self._wake, timeout=5)

    def _after_fork(self) -> None:
        if self._pid != os.getpid():  # a forked child: its parent's releases are not its own
            self._jobs.clear()
            self._pid = os.getpid()

    def _run(self, stop: threading.Event) -> None:
        while not stop.is_set():
            with self._lock:
                if not self._jobs:
                    self._next_round = None
                    stop.set()  # under the lock: a follow() now sees this thread ending and starts one
                    return
                if self._next_round is None:
                    self._next_round = self.clock() + self.first_check
                wait = self._next_round - self.clock()
            if wait > 0:
                self._wake.wait(wait)  # woken early by a cancel that needs a sooner round, or by stop()
                self._wake.clear()
                continue
            try:
                self.check_once()
            except Exception:  # the thread must outlive any round
                log.exception("slurmlab: following released jobs failed; it goes on")

    def check_once(self) -> None:
        """One round: per cluster, one squeue of this user's live jobs; a released job among them is back. The
        next round comes ``interval`` seconds after this one."""
        with self._lock:
            self._after_fork()
            self._next_round = self.clock() + self.interval
            groups: dict[tuple[str | None, str | None], list[_Released]] = {}
            for (conf, cluster, _), rel in self._jobs.items():
                groups.setdefault((conf, cluster), []).append(rel)
        user = current_user()
        for group in groups.values():
            runner = group[0].alloc.runner
            self.rounds += 1
            try:
                alive = live_jobs_of(runner, user)
            except SlurmError as exc:  # down or restarting: nothing is settled until it answers again
                log.info("slurmlab: released jobs not checked: %s", exc.message)
                continue
            now = self.clock()
            for rel in group:
                if rel.job_id is None:
                    late = [(job_id, seen[0]) for job_id, seen in alive.items() if seen[1] == rel.comment]
                    for job_id, state in late:
                        self._made_late(rel, job_id, state, runner, user)
                    if not late and now - rel.asked_at >= self.settle:
                        self._settled(rel)
                    continue
                seen = alive.get(rel.job_id)
                if seen is not None and (rel.comment is None or seen[1] == rel.comment):
                    self._came_back(rel, rel.job_id, seen[0], runner, user)
                elif now - rel.asked_at >= self.settle:
                    self._settled(rel)

    def _key(self, rel: _Released) -> tuple[str | None, str | None, str]:
        runner = rel.alloc.runner
        return runner.configuration(), runner.cluster, rel.job_id or f"tag:{rel.comment}"

    def _settled(self, rel: _Released) -> None:
        alloc = rel.alloc
        with self._lock:
            self._jobs.pop(self._key(rel), None)
            alloc.follow_release(False)
        LIVE.unguard(alloc)  # Slurm has saved the cancel: the guardian has nothing more to check
        alloc.release_settled()

    def _made_late(self, rel: _Released, job_id: str, state: str, runner: Runner, user: str) -> None:
        """The controller made the job of a submission slurmlab gave up (it read salloc's request late)."""
        try:
            scancel_mine(runner, user, job_id)
        except SlurmError as exc:
            log.warning(
                "slurmlab: job %s (%s) was made after its submission was given up; cancelling it failed: "
                "%s; cancel it yourself: scancel %s",
                job_id,
                rel.comment,
                exc.message,
                job_id,
            )
            return
        log.warning(
            "slurmlab: job %s (%s) was made after its submission was given up (the controller read the "
            "request late); cancelled it",
            job_id,
            rel.comment,
        )
        rel.asked_at = self.clock()
        rel.alloc.add_note(
            f"job {job_id} was made {state} after this submission was given up (the controller "
            f"read salloc's request late); slurmlab cancelled it at {_clock_text(time.time())}"
        )

    def _came_back(self, rel: _Released, job_id: str, state: str, runner: Runner, user: str) -> None:
        alloc = rel.alloc
        lost = _clock_text(alloc.released_at)
        log.warning(
            "slurmlab: job %s is %s again: a controller restart lost its cancel; cancelling it again",
            job_id,
            state,
        )
        try:
            scancel_mine(runner, user, job_id)
            done = f"slurmlab cancelled it again at {_clock_text(time.time())}"
        except SlurmError as exc:
            done = (
                f"cancelling it again failed ({exc.message}); slurmlab tries again every {self.interval:g} s, "
                f"or cancel it yourself: scancel {job_id}"
            )
        else:
            rel.asked_at = self.clock()
            alloc.released_at = time.time()
            if alloc.release_at_exit:
                LIVE.tell_released(alloc)
        alloc.came_back(
            state,
            f"job {job_id} came back {state} after the Slurm controller restarted: the cancel "
            f"sent at {lost} was lost (slurmctld had not saved it yet); {done}",
        )


class CancelledJob:
    """A job this process cancelled without an :class:`~.lifecycle.Allocation` (``%scancel J`` of a job no
    allocation of the notebook follows, a leftover's Cancel button): what the follower needs of it, so that a
    controller restart that brings it back is met as for an allocation's. Its ``notes`` say what happened
    (there is no panel to show them); the log says it too."""

    release_at_exit = False  # nothing to cancel at exit: it is cancelled already
    ended = True
    job = None
    name = None

    def __init__(self, job_id: str, runner: Runner, comment: str | None = None) -> None:
        self.job_id: str | None = job_id
        self.runner = runner
        self.tag = comment or None  # a job id a restarted controller reuses for another job is left alone
        self.released_at: float | None = None
        self.owner_pid = os.getpid()
        self.guard_key = f"cancelled:{job_id}"
        self.following = False
        self.notes: list[str] = []

    def cancel(self) -> None:
        """Cancelled already; the follower cancels it again itself when it comes back."""

    def follow_release(self, following: bool) -> None:
        self.following = following

    def release_settled(self) -> None:
        self.following = False

    def add_note(self, note: str) -> None:
        self.notes.append(note)

    def came_back(self, state: str, note: str) -> None:
        self.notes.append(note)


def follow_cancelled(job_id: str, runner: Runner, comment: str | None = None) -> CancelledJob:
    """Follow job ``job_id``, just cancelled by this process without an allocation, until Slurm has saved the
    cancel (the module's docstring); ``comment``: the job's comment when known (a slurmlab tag)."""
    job = CancelledJob(job_id, runner, comment)
    LIVE.follow_release(job)
    return job


LIVE = LiveAllocations()
# what atexit runs, and what a user may call to release everything now
release_all = LIVE.release_all
