"""One server-side poller per cluster: asks Slurm on a timer, while clients ask, and fills the cache every client reads.

What it asks costs the site's controller, which every user of the cluster shares, so it asks two things at two
cadences (issue 27): every ``interval`` seconds (every ``cluster_interval`` on 22.05 to 26.05, where it costs a
whole listing: :func:`own_listing_is_whole`) the viewer's own jobs (``squeue -u UID``, as ``--me``: the controller filters
them by uid, a cost that grows with that user's jobs, not the cluster's), and every ``cluster_interval`` seconds
the whole-cluster listings (every job, every node), and those only while a client asked for them (the GPU map,
the "all jobs" scope) in the last ``idle_after`` seconds. When no client has asked for ``idle_after`` seconds
(a hidden tab, a collapsed or closed sidebar: their Lumino polls stand by) the timer asks Slurm nothing at all.
The cadences are site settings (:class:`slurmlab.server.extension.SlurmlabServer`).

A Tornado ``PeriodicCallback`` drives it on the server's own IOLoop, but the poll itself (Slurm's
commands, parsing, views, JSON encoding) runs in a worker process (:mod:`slurmlab.server.worker`):
the loop only awaits its future and stores the bytes it sends back, so neither a slow controller
nor a big cluster holds up any request. Only one poll runs at a time; a request that finds no
data yet waits for the poll in flight instead of starting its own.

Data older than two of its intervals (after such a pause) is refreshed before it is served: a
request waits for a fresh poll, up to ``stale_wait`` seconds, and only a controller that
does not answer in that time gets the old data — which, like every answer, carries the time
Slurm last confirmed it (``as_of``, ``age_s``; see the handlers).

A poll that comes back incomplete (the first of a large queue: views from the brief lines, details still to
come) is stored at once and followed by the next poll straight away, not one interval later.
"""

from __future__ import annotations

import asyncio
import logging
import time
from collections.abc import Callable
from typing import Any

from slurmlab.errors import SlurmError
from slurmlab.server.cache import ResponseCache
from slurmlab.server.contract import ClusterView, ErrorAnswer, StatusAnswer
from slurmlab.server.data import ClusterSource
from slurmlab.server.worker import PollOutcome
from slurmlab.slurm.throttle import Backoff, calm_window, controller_rate_limits

__all__ = [
    "DEFAULT_CLUSTER_INTERVAL",
    "DEFAULT_IDLE_AFTER",
    "DEFAULT_INTERVAL",
    "OWN_LISTING_IS_WHOLE_UP_TO",
    "WHOLE_KEYS",
    "ClusterPoller",
    "PollFailure",
    "own_listing_is_whole",
]

# One open sidebar, per minute: one whole-cluster poll (squeue of every job, sinfo -N) and one listing of the
# user's own jobs between two (squeue -u), except where that listing costs a whole one (22.05, below). Each costs
# 2 RPCs on 22.05 (sdiag: squeue asks JOB_INFO and PARTITION_INFO, even filtered by user; sinfo NODE_INFO and
# PARTITION_INFO): 4 a minute there, 6 where the own listing runs between (issue 27's budget: 6).
# The sidebar asks the server every 5 s; those requests are answered from the cache.
DEFAULT_INTERVAL = 30.0
DEFAULT_CLUSTER_INTERVAL = 60.0
# On these Slurm releases squeue asks the controller for the whole queue (REQUEST_JOB_INFO) even for one user's
# jobs: sdiag on the 22.05 sandbox counted JOB_INFO + PARTITION_INFO for `squeue -u UID`, `squeue --me` and
# `squeue -j A,B` alike, and on the 24.11 and 26.05 roots the same for `squeue -u UID` and `--me` (make bench's
# sidebar row there: 2 job listings a minute with the own listing between); only one job by id is cheaper
# (`scontrol show job ID`: FED_INFO + JOB_INFO_SINGLE, 2 RPCs a job). There the own jobs come from the
# whole-cluster listing, once per cluster_interval, instead of a second whole-queue listing in between (one
# sidebar: 4 RPCs a minute, 1 job listing). A release after the last one measured keeps the own listing between
# until measured (benchmarks/bench_rpc.py in its root).
OWN_LISTING_IS_WHOLE_UP_TO = (26, 5)
# a client that stopped asking (its tab hidden, its sidebar closed) stops the polls after this long
DEFAULT_IDLE_AFTER = 30.0
# the answers only a whole-cluster poll makes
WHOLE_KEYS = frozenset({"nodes", "queue:all"})

# a poll this slow (several commands, each a few ms to a controller at ease) met a rate-limiting or busy
# controller: a refused client sleeps a whole second and asks again (slurmlab.slurm.throttle)
SLOW_POLL_S = 2.0

log = logging.getLogger("slurmlab.server")


def own_listing_is_whole(version: str | None) -> bool:
    """Whether listing one user's jobs costs the controller a whole-queue listing on Slurm ``version`` (None:
    not known yet, taken as no)."""
    if not version:
        return False
    try:
        major, minor = (int(p) for p in version.split(".")[:2])
    except ValueError:
        return False
    return (major, minor) <= OWN_LISTING_IS_WHOLE_UP_TO


class PollFailure:
    """Why the last poll failed: the HTTP status to answer with and the message to show."""

    def __init__(
        self, error: BaseException | None = None, *, kind: str = "", message: str = "", status: int = 500
    ) -> None:
        self.kind = type(error).__name__ if error is not None else kind
        self.message = str(error) if error is not None else message
        # Slurm down/unreachable/not installed: the service is unavailable, not the server broken.
        self.status = (503 if isinstance(error, SlurmError) else 500) if error is not None else status
        self.at = time.time()

    @classmethod
    def of(cls, outcome: PollOutcome) -> PollFailure:
        """The failure a worker reported (exceptions stay in the worker; their words travel)."""
        return cls(
            kind=outcome.error_kind or "", message=outcome.error_message or "", status=outcome.error_status
        )

    def to_dict(self) -> ErrorAnswer:
        return ErrorAnswer(message=self.message, reason=self.kind)


class ClusterPoller:
    def __init__(
        self,
        source: ClusterSource,
        cache: ResponseCache | None = None,
        *,
        interval: float = DEFAULT_INTERVAL,
        cluster_interval: float | None = None,
        idle_after: float = DEFAULT_IDLE_AFTER,
        stale_wait: float = 10.0,
        cluster: ClusterView | None = None,
        clock: Callable[[], float] = time.monotonic,
    ) -> None:
        if interval <= 0:
            raise ValueError(f"poll interval must be positive, got {interval!r}")
        if cluster_interval is not None and cluster_interval <= 0:
            raise ValueError(f"cluster poll interval must be positive, got {cluster_interval!r}")
        self.source = source
        self.cluster = cluster  # which cluster it polls, named in its status answer
        self.cache = cache if cache is not None else ResponseCache()
        self.interval = float(interval)
        # never more often than the own jobs: a whole poll lists them too
        self.cluster_interval = max(self.interval, float(cluster_interval or DEFAULT_CLUSTER_INTERVAL))
        self.idle_after = float(idle_after)
        self.stale_wait = float(stale_wait)
        self.failure: PollFailure | None = None
        self.version: str | None = None
        self.polls = 0
        self.whole_polls = 0
        self.last_poll: float | None = None
        self.last_whole: float | None = None
        self._clock = clock
        self._inflight: asyncio.Future[None] | None = None
        self._inflight_whole = False
        self._callback: Any = None
        self._last_request = clock()
        self._last_whole_request: float | None = None
        # slow polls stretch the intervals; an episode ends after five usual rounds of quick ones (calm_window)
        self.backoff = Backoff(
            slow_after=SLOW_POLL_S, max_factor=4.0, calm_for=calm_window(self.interval), clock=clock
        )

    # ---- life cycle ------------------------------------------------------------------------
    def start(self) -> None:
        from tornado.ioloop import PeriodicCallback

        if self._callback is None:
            self._callback = PeriodicCallback(self._tick, self.interval * 1000, jitter=0.1)
            self._callback.start()

    def stop(self) -> None:
        if self._callback is not None:
            self._callback.stop()
            self._callback = None

    @property
    def running(self) -> bool:
        return self._callback is not None

    def touch(self, whole: bool = False) -> None:
        """A client asked (``whole``: for an answer only a whole-cluster poll makes): keep polling."""
        now = self._clock()
        self._last_request = now
        if whole:
            self._last_whole_request = now

    @property
    def idle(self) -> bool:
        """No client asked for ``idle_after`` seconds: the timer asks Slurm nothing."""
        return self._clock() - self._last_request > self.idle_after

    def whole_due(self) -> bool:
        """Whether the next poll should list the whole cluster: a client asked for such an answer lately and
        the last whole poll is a ``cluster_interval`` old (less half a tick: the timer's jitter)."""
        now = self._clock()
        if self._last_whole_request is None or now - self._last_whole_request > self.idle_after:
            return False
        return self.last_whole is None or now - self.last_whole >= self.cluster_interval - self.interval / 2

    async def _tick(self) -> None:
        if self.idle or self._held_back():
            return
        whole = self.whole_due()
        if not whole and self._own_waits():
            return
        await self.refresh(whole=whole)

    @property
    def own_every(self) -> float:
        """Seconds between two listings of the viewer's own jobs: ``interval``, or ``cluster_interval`` where
        such a listing costs a whole one (:func:`own_listing_is_whole`)."""
        return self.cluster_interval if own_listing_is_whole(self.version) else self.interval

    def _own_waits(self) -> bool:
        """Whether an own listing would come sooner than :attr:`own_every` after the last poll."""
        if self.last_poll is None:
            return False
        return self._clock() - self.last_poll < self.own_every - self.interval / 2

    def _held_back(self) -> bool:
        """Whether the back-off skips this tick: while polls come slowly, one in ``interval`` x its factor."""
        if not self.backoff.backing_off or self.last_poll is None:
            return False
        return self._clock() - self.last_poll < self.backoff.stretch(self.interval) - self.interval / 2

    # ---- polling -----------------------------------------------------------------------------
    async def refresh(self, whole: bool = True) -> None:
        """Poll now, or join the poll already in flight (followed by a whole one when ``whole`` and the one
        in flight is not)."""
        while self.polling:
            assert self._inflight is not None
            joined_whole = self._inflight_whole
            await asyncio.shield(self._inflight)
            if joined_whole or not whole:
                return
        self._start(whole)
        assert self._inflight is not None
        await asyncio.shield(self._inflight)

    def _start(self, whole: bool) -> None:
        self._inflight_whole = whole
        self._inflight = asyncio.ensure_future(self._poll(whole))

    async def ensure_data(self, whole: bool = False) -> None:
        """Before answering (``whole``: an answer only a whole-cluster poll makes): wait for a first poll;
        when the data is stale (an idle pause, a stopped timer), wait for a fresh one — at most
        ``stale_wait`` seconds, so that a hung controller delays an answer but never hangs it."""
        self.touch(whole)
        last = self.last_whole if whole else self.last_poll
        if last is None:
            await self.refresh(whole)
            return
        every = (self.cluster_interval if whole else self.own_every) * self.backoff.factor
        if self._clock() - last <= 2 * every:
            return
        if not self.polling or (whole and not self._inflight_whole):
            fresh: asyncio.Future[None] = asyncio.ensure_future(self.refresh(whole))
        else:
            assert self._inflight is not None
            fresh = self._inflight
        try:
            await asyncio.wait_for(asyncio.shield(fresh), self.stale_wait)
        except asyncio.TimeoutError:
            log.info("slurmlab: Slurm is slow to answer; serving data %.0f s old", self._clock() - last)

    @property
    def polling(self) -> bool:
        return self._inflight is not None and not self._inflight.done()

    async def _poll(self, whole: bool) -> None:
        self.polls += 1
        self.whole_polls += whole
        complete = True
        asked = self._clock()
        try:
            complete = await self._poll_once(whole)
        finally:
            self.last_poll = self._clock()
            if whole:
                self.last_whole = self.last_poll
        stopped = self.failure is not None and self.failure.kind == "SlurmTimeoutError"
        took = self.last_poll - asked
        # a site whose slurm.conf turns rl_enable on is named as rate-limiting (None: the server's own SLURM_CONF)
        limits = (stopped or took >= self.backoff.slow_after) and controller_rate_limits(
            getattr(getattr(self.source, "runner", None), "slurm_conf", None)
        )
        self.backoff.rate_limited = self.backoff.rate_limited or limits
        note = self.backoff.failed() if stopped else self.backoff.answered(took)
        if note:
            log.warning("slurmlab: %s", note)
        self._put_status()  # the sidebar shows the episode, and the stretched interval, from the status answer
        if not complete:  # run after this poll's future is done, so that refresh() starts a new one
            asyncio.get_running_loop().call_soon(self._follow_up, whole)

    def _follow_up(self, whole: bool) -> None:
        if not self.polling:
            self._start(whole)

    async def _poll_once(self, whole: bool) -> bool:
        """One poll, stored; False when it was incomplete and another should follow at once."""
        outcome = await self.source.poll(self.version, whole)
        if outcome.version is not None:
            self.version = outcome.version
        if outcome.error_kind is not None:
            failure = PollFailure.of(outcome)
            if outcome.unexpected:
                log.error("slurmlab: poll failed unexpectedly: %s: %s", failure.kind, failure.message)
            elif self.failure is None or self.failure.message != failure.message:
                log.warning("slurmlab: poll failed: %s", failure.message)
            self.failure = failure
            self._put_status()
            return True
        if self.failure is not None:
            log.info("slurmlab: Slurm answers again")
        self.failure = None
        if outcome.problems:
            log.warning(
                "slurmlab: %d Slurm record(s) could not be read: %s",
                len(outcome.problems),
                "; ".join(outcome.problems[:3]),
            )
        for key, answer in outcome.answers.items():
            self.cache.put_encoded(key, answer.body, answer.etag)
        self._put_status()
        return outcome.complete

    def _put_status(self) -> None:
        self.cache.put(
            "status",
            StatusAnswer(
                cluster=self.cluster,
                reachable=self.failure is None,
                version=self.version,
                poll_interval_s=self.interval,
                cluster_poll_interval_s=self.cluster_interval,
                user=self.source.user,
                error=self.failure.message if self.failure else None,
                error_kind=self.failure.kind if self.failure else None,
                slow=self.backoff.words(self.own_every),
            ),
        )
