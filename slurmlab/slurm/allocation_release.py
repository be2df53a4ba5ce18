"""Releasing allocations: cancel, the guardian, and the release when the process ends.

Three layers make sure a job dies with the kernel that owns it: :func:`release_all` at exit, the TERM/HUP
handlers that run it before the signal ends the process, and the guardian (:mod:`slurmlab.slurm.guardian`), a
separate process that cancels what is still registered when this one dies without a word (SIGKILL, a crash).
"""

from __future__ import annotations

import atexit
import logging
import os
import signal
import sys
import threading
import weakref
from collections.abc import Callable
from types import FrameType
from typing import TYPE_CHECKING

from slurmlab.errors import JobNotFoundError
from slurmlab.slurm.allocation_submit import kill_salloc
from slurmlab.slurm.guardian import get_guardian

if TYPE_CHECKING:
    from slurmlab.slurm.allocation import Allocation

__all__ = ["RELEASE_DEADLINE", "RELEASE_SIGNALS", "cancel", "guard", "register", "release_all", "unguard"]

# the logger of Allocation as a whole, which users may already filter on
log = logging.getLogger("slurmlab.slurm.allocation")

_live: weakref.WeakSet[Allocation] = weakref.WeakSet()
_live_lock = threading.Lock()


def register(alloc: Allocation) -> None:
    """Count ``alloc`` among this process's allocations, and make sure the exit hooks are in place."""
    with _live_lock:
        _live.add(alloc)
    _ensure_exit_hooks()


def cancel(alloc: Allocation) -> None:
    """Release the allocation (withdraw salloc, scancel); safe to call twice."""
    kill_salloc(alloc._salloc)
    if alloc.job_id is not None and not alloc.ended:
        from slurmlab.slurm import queries

        try:
            # a job this process submitted is ours; one attached by id is checked first
            queries.cancel_job(alloc.job_id, alloc.runner, only_mine=alloc.tag is None)
        except JobNotFoundError:
            pass
        alloc.poller.poke()
    unguard(alloc)  # only once scancel went through: otherwise the guardian still owes it
    with _live_lock:
        _live.discard(alloc)


# ---- the guardian: cancels what is registered if this process dies without releasing ---------
def guard(alloc: Allocation, salloc_pid: int | None = None) -> None:
    """Register (or update) ``alloc`` with the guardian, unless it is kept at exit or not this process's."""
    if not alloc.release_at_exit or os.getpid() != alloc._owner_pid or not alloc.runner.guarded:
        return
    try:
        get_guardian().guard(alloc._guard_key, alloc.runner, job_id=alloc.job_id, name=alloc.name,
                             tag=alloc.tag, salloc_pid=salloc_pid)
    except OSError as exc:  # no watcher: atexit and the TERM/HUP handlers still release it
        log.warning("slurmlab: could not start the allocation guardian: %s", exc)


def unguard(alloc: Allocation) -> None:
    """Take ``alloc`` off the guardian's list (released, or kept on purpose)."""
    if os.getpid() != alloc._owner_pid or not alloc.runner.guarded:
        return
    try:
        get_guardian().drop(alloc._guard_key)
    except OSError as exc:
        log.warning("slurmlab: could not reach the allocation guardian: %s", exc)


# ---- at exit -----------------------------------------------------------------------------------
def release_all() -> list[str]:
    """Cancel every allocation of this process that is not detached (run at exit)."""
    released = []
    with _live_lock:
        allocs = list(_live)
    for alloc in allocs:
        if alloc.release_at_exit and not alloc.ended and alloc._owner_pid == os.getpid():
            try:
                alloc.cancel()
                if alloc.job_id:
                    released.append(alloc.job_id)
            except Exception as exc:  # at exit: report, never raise
                print(f"slurmlab: could not release allocation {alloc.job_id}: {exc}", file=sys.stderr)
    return released


_atexit_done = False
# SIGTERM: `kill`, a batch system, JupyterLab's shutdown after its grace period; SIGHUP: a closed
# terminal or ssh session. SIGINT belongs to ipykernel (it interrupts a cell) and is never touched.
RELEASE_SIGNALS = (signal.SIGTERM, signal.SIGHUP)
# What a signal handler gives release_all before the process dies anyway; the guardian cancels
# whatever it did not reach.
RELEASE_DEADLINE = 10.0
_SignalHandler = Callable[[int, FrameType | None], object] | int | None
_previous_handlers: dict[int, _SignalHandler] = {}
_handlers_pid: int | None = None


def _ensure_exit_hooks() -> None:
    global _atexit_done
    if not _atexit_done:
        atexit.register(release_all)
        _atexit_done = True
    _install_signal_handlers()


def _install_signal_handlers() -> None:
    """Release on TERM/HUP, then let the signal do what it did before (chained or default)."""
    global _handlers_pid
    if _handlers_pid == os.getpid() or threading.current_thread() is not threading.main_thread():
        return  # signal.signal works only in the main thread; a later allocation there retries
    for signum in RELEASE_SIGNALS:
        previous = signal.getsignal(signum)
        # ignored (nohup): the process is meant to survive it; None: a handler not set from
        # Python, which cannot be chained
        if previous is signal.SIG_IGN or previous is None or previous is _on_release_signal:
            continue
        try:
            signal.signal(signum, _on_release_signal)
        except (ValueError, OSError):
            continue
        _previous_handlers[signum] = previous
    _handlers_pid = os.getpid()


def _on_release_signal(signum: int, frame: FrameType | None) -> None:
    previous = _previous_handlers.get(signum, signal.SIG_DFL)
    if os.getpid() == _handlers_pid:  # inherited by a forked child: its parent's jobs are not its own
        # in a thread with a deadline: the main thread may hold a lock release_all needs
        worker = threading.Thread(target=release_all, name="slurmlab-release", daemon=True)
        worker.start()
        worker.join(RELEASE_DEADLINE)
    if callable(previous):
        previous(signum, frame)
        return
    # the default action: die of this signal, as the process would have without slurmlab
    signal.signal(signum, signal.SIG_DFL)
    os.kill(os.getpid(), signum)
