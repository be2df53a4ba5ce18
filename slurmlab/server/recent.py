"""The sidebar's "recent jobs": the server user's jobs of the last day, as Slurm accounting remembers them.

Only the jobs of the uid the server runs as: ``sacct -u`` selects by that uid's name, then every record whose
UID (Slurm's, never a name field a user can write) is another is dropped. sacct asks slurmdbd, which a real
site does not want asked every few seconds, so the answer is kept for ``RECENT_INTERVAL`` (a minute) and
refreshed only when a client asks after that, or sooner when the user's own jobs in the poller's queue changed
(one started, ended or left): the list changes when a job ends, and a minute's lag showed a job that had
ended as still running (issue 28). That check reads the queue the poller already holds: no extra RPC. The
query and its parsing run in the poll worker (:mod:`slurmlab.server.worker`: its process for a real Slurm, else
a thread), never on Jupyter's event loop. Accounting off is an answer, not an error: ``accounting`` false and
a ``message`` saying how to turn it on, which the sidebar shows as its one line. The route is
``RecentHandler`` in :mod:`slurmlab.server.handlers`; this module loads no jupyter_server, since the worker
process imports it.
"""

from __future__ import annotations

import asyncio
import logging
import time
import weakref
from concurrent.futures import Executor
from concurrent.futures.process import BrokenProcessPool
from typing import Any

from slurmlab.core.diagnosis.efficiency import efficiencies
from slurmlab.core.diagnosis.fairshare import owned_by, state_in_words
from slurmlab.errors import AccountingOffError, SlurmlabError
from slurmlab.server import worker as poll_worker
from slurmlab.server.cache import CacheEntry
from slurmlab.server.contract import RecentJob, RecentJobsAnswer
from slurmlab.server.poller import ClusterPoller
from slurmlab.server.worker import Encoded
from slurmlab.slurm import identity
from slurmlab.slurm.accounting_queries import recent_records
from slurmlab.slurm.runner import Runner, get_runner

__all__ = ["RECENT_HOURS", "RECENT_INTERVAL", "RECENT_LIMIT", "RecentJobs", "recent_answer", "recent_for"]

RECENT_INTERVAL = 60.0
# after a change of my jobs, sacct is asked once more this much later: slurmdbd may take a moment to record an end
RECENT_SETTLE = 5.0
RECENT_HOURS = 24.0
RECENT_LIMIT = 30
log = logging.getLogger("slurmlab.server")


def recent_answer(
    runner: Any,
    me: int,
    *,
    user: str | None = None,
    since_hours: float = RECENT_HOURS,
    limit: int = RECENT_LIMIT,
) -> RecentJobsAnswer:
    """The jobs of uid ``me`` in the last ``since_hours``, newest first (blocking: runs in a worker). ``user``:
    the name of ``me`` on that cluster (over SSH, as its login node's ``id`` said it); default: this machine's."""
    user = identity.user_name(me) if user is None else user

    def empty(message: str, accounting: bool) -> RecentJobsAnswer:
        return RecentJobsAnswer(
            user=user, since_hours=since_hours, accounting=accounting, message=message, jobs=[]
        )

    try:
        records = owned_by(recent_records(runner, user=user, since_hours=since_hours, limit=limit), me)
        effs = efficiencies(records)
    except AccountingOffError as exc:
        return empty(str(exc), False)
    except SlurmlabError as exc:
        return empty(f"cannot read recent jobs: {exc}", True)
    except Exception as exc:  # a bug must show as a line in the sidebar, not kill the route
        log.exception("slurmlab: recent jobs failed unexpectedly")
        return empty(f"cannot read recent jobs: {type(exc).__name__}: {exc}", True)
    jobs: list[RecentJob] = []
    for r in reversed([r for r in records if r.is_job]):
        eff = effs.get(r.job_id) if r.start is not None else None
        jobs.append(
            RecentJob(
                job_id=r.job_id,
                name=r.name,
                state=r.state,
                state_words=state_in_words(
                    r.state, identity.user_name(r.cancelled_by) if r.cancelled_by is not None else None
                ),
                exit_code=r.exit.code if r.exit else None,
                signal=r.exit.signal if r.exit else None,
                elapsed_s=r.elapsed,
                time_limit_s=r.time_limit,
                gpus=r.gpus,
                start_time=r.start.isoformat() if r.start else None,
                end_time=r.end.isoformat() if r.end else None,
                efficiency=eff.line() if eff is not None else None,
            )
        )
    return RecentJobsAnswer(user=user, since_hours=since_hours, accounting=True, message=None, jobs=jobs)


def _encoded(runner: Any, me: int, user: str | None = None) -> Encoded:
    return Encoded.of(recent_answer(runner, me, user=user))


def _encoded_elsewhere(settings: dict[str, Any], me: int) -> Encoded:
    """The worker process's entry: rebuild the runner from its settings, then ask."""
    return _encoded(Runner.from_settings(settings), me)


class RecentJobs:
    """One cluster's recent-jobs answer, kept for ``interval`` seconds; refreshed in the poll worker."""

    def __init__(self, poller: ClusterPoller, *, interval: float = RECENT_INTERVAL) -> None:
        self.poller = poller
        self.interval = interval
        self.entry: CacheEntry | None = None
        self.fetched_at = 0.0
        self.fetches = 0
        self._inflight: asyncio.Future[None] | None = None
        self._queue_seen: frozenset[tuple[str, str]] | None = None  # my jobs and states at the last fetch
        self._recheck_at: float | None = None  # when to ask once more after a change

    def _my_queue(self) -> frozenset[tuple[str, str]] | None:
        """My jobs in the poller's last queue answer, with their states (None before its first poll)."""
        entry = self.poller.cache.get("queue:mine")
        if entry is None:
            return None
        jobs = entry.payload.get("jobs") or []
        return frozenset((str(j.get("job_id")), str(j.get("state"))) for j in jobs)

    async def answer(self) -> CacheEntry:
        """The kept answer, or a fresh one when it is older than ``interval`` or my jobs in the queue changed
        since it was fetched (one fetch at a time)."""
        mine = self._my_queue()
        moved = mine is not None and self._queue_seen is not None and mine != self._queue_seen
        now = time.monotonic()
        settle = self._recheck_at is not None and now >= self._recheck_at
        if self.entry is None or moved or settle or now - self.fetched_at > self.interval:
            if self._inflight is None or self._inflight.done():
                self._queue_seen = mine
                self._recheck_at = now + RECENT_SETTLE if moved else None
                self._inflight = asyncio.ensure_future(self._fetch())
            await asyncio.shield(self._inflight)
        elif self._queue_seen is None:
            self._queue_seen = mine
        assert self.entry is not None
        return self.entry

    async def _fetch(self) -> None:
        source = self.poller.source
        runner = source.runner if source.runner is not None else get_runner()
        loop = asyncio.get_running_loop()
        self.fetches += 1
        try:
            me, user = await source.who()  # over SSH: the login there, as its own `id` says
        except SlurmlabError as exc:
            got = Encoded.of(
                RecentJobsAnswer(
                    user="",
                    since_hours=RECENT_HOURS,
                    accounting=True,
                    jobs=[],
                    message=f"cannot read recent jobs: {exc}",
                )
            )
        else:
            got = await self._ask(
                loop, runner, me, user if getattr(runner, "ssh", None) is not None else None
            )
        now = time.time()
        changed = self.entry.changed_at if self.entry is not None and self.entry.etag == got.etag else now
        self.entry = CacheEntry(got.body, got.etag, changed, now)
        self.fetched_at = time.monotonic()

    async def _ask(self, loop: asyncio.AbstractEventLoop, runner: Any, me: int, user: str | None) -> Encoded:
        """sacct for uid ``me`` (named ``user`` there), in the poll worker."""
        source = self.poller.source
        if source.worker.uses_process(runner):
            settings = runner.settings()
            key = poll_worker._settings_key(settings)
            pool: Executor = poll_worker._POOLS.process(key)
            try:
                got = await loop.run_in_executor(pool, _encoded_elsewhere, settings, me)
            except BrokenProcessPool:
                poll_worker._POOLS.forget_process(key, pool)
                got = Encoded.of(
                    RecentJobsAnswer(
                        user=identity.user_name(me),
                        since_hours=RECENT_HOURS,
                        accounting=True,
                        jobs=[],
                        message="slurmlab's worker process died; the next refresh starts a new one",
                    )
                )
            return got
        return await loop.run_in_executor(poll_worker._POOLS.thread(), _encoded, runner, me, user)


_KEPT: weakref.WeakKeyDictionary[ClusterPoller, RecentJobs] = weakref.WeakKeyDictionary()


def recent_for(poller: ClusterPoller) -> RecentJobs:
    """The recent jobs of ``poller``'s cluster (made on first use, dropped with the poller)."""
    found = _KEPT.get(poller)
    if found is None:
        found = _KEPT[poller] = RecentJobs(poller)
    return found
