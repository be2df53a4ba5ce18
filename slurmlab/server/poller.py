"""One server-side poller: asks Slurm on a timer and fills the cache every client reads.

A Tornado ``PeriodicCallback`` drives it on the server's own IOLoop, but the poll itself (Slurm's
commands, parsing, views, JSON encoding) runs in a worker process (:mod:`slurmlab.server.worker`):
the loop only awaits its future and stores the bytes it sends back, so neither a slow controller
nor a big cluster holds up any request. Only one poll runs at a time; a request that finds no
data yet waits for the poll in flight instead of starting its own. When no client has asked for a while the timer stops
asking Slurm (a sidebar left open on a laptop should not load a real cluster's controller).

Data older than two intervals (after such a pause) is refreshed before it is served: a
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
from typing import Any

from slurmlab.errors import SlurmError
from slurmlab.server.cache import ResponseCache
from slurmlab.server.contract import ClusterView, ErrorAnswer, StatusAnswer
from slurmlab.server.data import ClusterSource
from slurmlab.server.worker import PollOutcome

__all__ = ["DEFAULT_IDLE_AFTER", "DEFAULT_INTERVAL", "ClusterPoller", "PollFailure"]

DEFAULT_INTERVAL = 5.0
DEFAULT_IDLE_AFTER = 300.0

log = logging.getLogger("slurmlab.server")


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
        idle_after: float = DEFAULT_IDLE_AFTER,
        stale_wait: float = 10.0,
        cluster: ClusterView | None = None,
    ) -> None:
        if interval <= 0:
            raise ValueError(f"poll interval must be positive, got {interval!r}")
        self.source = source
        self.cluster = cluster  # which cluster it polls, named in its status answer
        self.cache = cache if cache is not None else ResponseCache()
        self.interval = float(interval)
        self.idle_after = float(idle_after)
        self.stale_wait = float(stale_wait)
        self.failure: PollFailure | None = None
        self.version: str | None = None
        self.polls = 0
        self.last_poll: float | None = None
        self._inflight: asyncio.Future[None] | None = None
        self._callback: Any = None
        self._last_request = time.monotonic()

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

    def touch(self) -> None:
        """A client asked: keep polling."""
        self._last_request = time.monotonic()

    async def _tick(self) -> None:
        if time.monotonic() - self._last_request > self.idle_after:
            return
        await self.refresh()

    # ---- polling -----------------------------------------------------------------------------
    async def refresh(self) -> None:
        """Poll now, or join the poll already in flight."""
        if self._inflight is not None and not self._inflight.done():
            await asyncio.shield(self._inflight)
            return
        self._inflight = asyncio.ensure_future(self._poll())
        await asyncio.shield(self._inflight)

    async def ensure_data(self) -> None:
        """Before answering: wait for a first poll; when the data is stale (an idle pause, a
        stopped timer), wait for a fresh one — at most ``stale_wait`` seconds, so that a hung
        controller delays an answer but never hangs it."""
        self.touch()
        if self.last_poll is None:
            await self.refresh()
        elif time.monotonic() - self.last_poll > 2 * self.interval:
            if not self.polling:
                self._inflight = asyncio.ensure_future(self._poll())
            assert self._inflight is not None
            try:
                await asyncio.wait_for(asyncio.shield(self._inflight), self.stale_wait)
            except asyncio.TimeoutError:
                log.info(
                    "slurmlab: Slurm is slow to answer; serving data %.0f s old",
                    time.monotonic() - self.last_poll,
                )

    @property
    def polling(self) -> bool:
        return self._inflight is not None and not self._inflight.done()

    async def _poll(self) -> None:
        self.polls += 1
        complete = True
        try:
            complete = await self._poll_once()
        finally:
            self.last_poll = time.monotonic()
        if not complete:  # run after this poll's future is done, so that refresh() starts a new one
            asyncio.get_running_loop().call_soon(self._follow_up)

    def _follow_up(self) -> None:
        self._inflight = asyncio.ensure_future(self._poll())

    async def _poll_once(self) -> bool:
        """One poll, stored; False when it was incomplete and another should follow at once."""
        outcome = await self.source.poll(self.version)
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
                user=self.source.user,
                error=self.failure.message if self.failure else None,
                error_kind=self.failure.kind if self.failure else None,
            ),
        )
