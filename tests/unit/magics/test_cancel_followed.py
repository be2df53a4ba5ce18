"""A cancel made without an allocation is followed too (issue 29 follow-up of issue 25, point 7): slurmctld saves
a cancel only with its periodic state save (every 300 s), so a controller that crashes before then brings the job
back RUNNING. ``%scancel J`` of a job no allocation of the notebook follows, and a leftover's Cancel button, hand
the job to the same follower as an allocation's cancel (:mod:`slurmlab.slurm.allocation.release`).

Recorded Slurm 22.05 output (FakeRunner, fake_slurm: job 19 running, its owner, its scancel). The FakeRunner is
marked guarded here (a real runner is): an unguarded replaying runner has no cluster that could bring a job back,
and is not followed. The come-back itself is tests/unit/slurm/test_allocation_release_follow.py's.
"""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

import pytest
from fake_slurm import JOB, job_in

from slurmlab.slurm.allocation import release
from slurmlab.slurm.allocation.release import ReleaseFollower
from slurmlab.testing import FakeRunner


class _Clock:
    now = 1000.0

    def __call__(self) -> float:
        return self.now


@pytest.fixture
def follower(monkeypatch: pytest.MonkeyPatch, fake_runner: FakeRunner) -> Iterator[ReleaseFollower]:
    """This process's follower, driven by hand (its thread waits an hour between rounds, its clock is the
    test's); the replaying runner counts as one a controller restart could bring a job back on."""
    mine = ReleaseFollower(interval=3600, clock=_Clock())
    monkeypatch.setattr(release.LIVE, "follower", mine)
    monkeypatch.setattr(release.LIVE, "released", set())
    monkeypatch.setattr(fake_runner, "guarded", True, raising=False)
    yield mine
    mine.stop()


def test_scancel_of_a_job_no_allocation_follows_is_followed(
    shell: Any, fake_runner: FakeRunner, follower: ReleaseFollower, capsys: pytest.CaptureFixture[str]
) -> None:
    from slurmlab.magics.session import get_session

    job_in(fake_runner, "running")
    assert not get_session().allocations  # job 19 is no allocation of this notebook
    shell.run_line_magic("scancel", JOB)
    assert fake_runner.called(["scancel", JOB]) and f"cancelled job {JOB}" in capsys.readouterr().out
    assert follower.following() == [JOB]
    # nothing of the user's lives any more (a real squeue -h that lists no job prints nothing): once the
    # controller has answered for the settle time after the cancel, it is saved and the job is let go
    fake_runner.on(["squeue", "-h", "-u", ...], stdout="")
    follower.check_once()
    assert follower.following() == [JOB]  # answered, but too soon after the cancel
    follower.clock.now += follower.settle  # type: ignore[attr-defined]
    follower.check_once()
    assert follower.following() == []
    assert fake_runner.called(["scancel", ...]) == [["scancel", JOB]]  # cancelled once: it never came back


def test_a_leftover_s_cancel_button_is_followed_with_its_tag(
    shell: Any, fake_runner: FakeRunner, follower: ReleaseFollower
) -> None:
    pytest.importorskip("ipywidgets")
    from datetime import datetime, timezone

    from slurmlab.core.slurm.models import Job
    from slurmlab.magics.leftover_buttons import leftover_buttons
    from slurmlab.slurm.allocation.leftovers import Leftovers

    job_in(fake_runner, "running")
    tag = "slurmlab:h:1:x:y"
    start = datetime.now(timezone.utc)
    job = Job(
        int(JOB), "slurmlab-19", "RUNNING", nodelist="node1", nodes=("node1",), start_time=start, comment=tag
    )
    row, said = leftover_buttons(Leftovers([job])).children
    row.children[2].click()  # Cancel
    assert fake_runner.called(["scancel", JOB]) and f"cancelled job {JOB}" in said.value
    assert follower.following() == [JOB]
    # the tag goes with it: a job id a restarted controller gave another job is never taken for this one
    assert tag in release.LIVE.released_tags()
