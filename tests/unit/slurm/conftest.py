from __future__ import annotations

from collections.abc import Iterator

import pytest

from slurmlab.slurm.poller import JobPoller
from slurmlab.testing import FakeRunner


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
