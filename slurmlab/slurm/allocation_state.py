"""How an allocation's state follows Slurm: the poller's updates, a refresh on demand, and waiting for a state.

The functions take the :class:`~slurmlab.slurm.allocation.Allocation` whose state they move; every change
happens under its condition and wakes its waiters and subscribers, whichever thread made it.
"""

from __future__ import annotations

import time
from typing import TYPE_CHECKING

from slurmlab.core.slurm.states import ENDED
from slurmlab.errors import AllocationError, JobNotFoundError
from slurmlab.slurm.poller import JobUpdate

if TYPE_CHECKING:
    from slurmlab.slurm.allocation import Allocation

__all__ = ["ENDED_STATES", "apply_update", "refresh", "time_left", "wait_for"]

# Slurm's ended states, and slurmlab's own: GONE (Slurm forgot the job), REJECTED (salloc refused it)
ENDED_STATES = ENDED | {"GONE", "REJECTED"}


def apply_update(alloc: Allocation, update: JobUpdate) -> None:
    """Take in what the poller saw (called from its thread); stop watching once the job ended."""
    with alloc._cond:
        alloc.updated_at = update.at
        if update.error is not None:
            alloc.error = str(update.error)
        elif update.brief is not None or update.detail is not None or update.gone:
            # Slurm answered: an earlier "controller not responding" no longer holds (a job the
            # controller forgot across a restart is GONE, not "not responding" for ever)
            alloc.error = None
        if update.brief is not None:
            alloc.brief = update.brief
            alloc.state = update.brief.state
            alloc.reason = update.brief.reason
            alloc.node_alerts = tuple(update.node_alerts)
        if update.detail is not None:
            alloc.job = update.detail
            if update.brief is None:
                alloc.state = update.detail.state
                alloc.reason = update.detail.reason
        if update.gone and alloc.state not in ENDED_STATES:
            alloc.state = "GONE"
        alloc._cond.notify_all()
    alloc._notify()
    if alloc.ended and alloc._watch is not None:
        alloc._watch.cancel()


def refresh(alloc: Allocation) -> None:
    """Fetch the full detail now instead of waiting for the next poll."""
    if alloc.job_id is None:
        return
    from slurmlab.slurm import queries

    try:
        job = queries.job_detail(alloc.job_id, alloc.runner)
    except JobNotFoundError:
        alloc._set_state("GONE")
        return
    with alloc._cond:
        alloc.job = job
        if alloc.state not in ENDED_STATES or job.state in ENDED_STATES:
            alloc.state = job.state
            alloc.reason = job.reason
        alloc._cond.notify_all()
    alloc._notify()


def wait_for(alloc: Allocation, state: str, timeout: float | None) -> None:
    """Block until ``alloc`` reaches ``state`` (``"ENDED"`` = any end).

    Raises AllocationError if it ends first, TimeoutError after ``timeout`` seconds.
    """
    deadline = None if timeout is None else time.monotonic() + timeout
    with alloc._cond:
        while alloc.state != state and not (state == "ENDED" and alloc.ended):
            if alloc.ended and state not in ENDED_STATES and state != "ENDED":
                raise AllocationError(
                    f"allocation {alloc.job_id} ended ({alloc.state}) before it was {state}"
                    + (f": {alloc.error}" if alloc.error else ""),
                    hint="submit a new one with `%salloc …` / Allocation.submit(...)",
                )
            if state in ENDED_STATES and alloc.ended:
                break
            remaining = None if deadline is None else deadline - time.monotonic()
            if remaining is not None and remaining <= 0:
                raise TimeoutError(
                    f"allocation {alloc.job_id} is still {alloc.state}"
                    + (f" ({alloc.reason})" if alloc.reason else "")
                    + f" after {timeout:g} s"
                )
            alloc._cond.wait(timeout=min(0.5, remaining) if remaining is not None else 0.5)
    if alloc.state == "RUNNING" and alloc.job is None:
        alloc.refresh()  # granted before the poller fetched the detail: nodes and GPUs now


def time_left(alloc: Allocation, now: float | None = None) -> float | None:
    """Seconds until the time limit ends the allocation (None while unknown or unlimited)."""
    if alloc.state != "RUNNING":
        return None
    for src in (alloc.brief, alloc.job):
        end = src.end_time if src is not None else None
        if end is not None:
            return max(0.0, float(end.timestamp()) - (time.time() if now is None else now))
    return None
