from __future__ import annotations

from collections.abc import Callable, Iterator
from typing import Any

import pytest

from slurmlab.core.slurm.squeue_brief import JobBrief
from slurmlab.slurm.poller import JobPoller
from slurmlab.testing import FakeRunner, job_brief


@pytest.fixture
def make_brief() -> Callable[..., JobBrief]:
    """The builder of brief poll lines (:func:`job_brief`)."""
    return job_brief


@pytest.fixture
def fake() -> Iterator[FakeRunner]:
    """A FakeRunner (recorded Slurm output only); closed after the test."""
    runner = FakeRunner()
    try:
        yield runner
    finally:
        runner.close()


@pytest.fixture
def poller(fake: FakeRunner) -> Iterator[JobPoller]:
    """A poller of the fake that polls every 20 ms, so a state change reaches a test at once."""
    p = JobPoller(fake, interval=0.02, node_check_interval=0.0)
    try:
        yield p
    finally:
        p.stop()


class SimulatedPolling:
    """Pollers driven round by round on a simulated clock: the object is the clock (``now`` moves only when a
    test moves it, or a scripted Slurm call does by the seconds it took), so "a quiet minute" takes no time and
    nothing depends on the machine's speed; the assertions are on the waits the poller chose."""

    def __init__(self) -> None:
        self.now = 1000.0
        self._pollers: list[JobPoller] = []

    def __call__(self) -> float:
        return self.now

    brief = staticmethod(job_brief)

    def poller(self, runner: Any = None, **kw: Any) -> JobPoller:
        """A JobPoller on this clock (a round a second, at most 10 s between two) without its thread: the test
        drives the rounds (``watch`` would start the thread; its poke does nothing here)."""
        kw.setdefault("interval", 1.0)
        kw.setdefault("max_interval", 10.0)
        stand_in: Any = object()  # a runner the fetchers given in ``kw`` never use
        p = JobPoller(stand_in if runner is None else runner, clock=self, **kw)
        p.poke = lambda: None  # type: ignore[method-assign]
        self._pollers.append(p)
        return p

    def run_for(self, poller: JobPoller, seconds: float) -> list[float]:
        """Rounds of ``poller`` for ``seconds`` of simulated time; the waits it chose."""
        end = self.now + seconds
        waits = []
        while self.now < end:
            waits.append(poller.step())
            self.now += waits[-1]
        return waits

    def close(self) -> None:
        for p in self._pollers:
            p.stop()


@pytest.fixture
def sim() -> Iterator[SimulatedPolling]:
    """Pollers on a simulated clock (:class:`SimulatedPolling`), stopped after the test."""
    polling = SimulatedPolling()
    try:
        yield polling
    finally:
        polling.close()
