"""What a reopened notebook shows of an allocation (its saved text and HTML): the state as of when it was seen,
and what became of the job when its kernel ended, which that state cannot show (issue 28, point 9: after
`kill -9` of a kernel its saved panel said RUNNING though the guardian had cancelled the job a second later)."""

from __future__ import annotations

from slurmlab.core.slurm.squeue_brief import parse_squeue_brief
from slurmlab.slurm.allocation import Allocation
from slurmlab.slurm.allocation.display import saved_html, saved_text
from slurmlab.slurm.poller import JobPoller, JobUpdate
from slurmlab.testing import FakeRunner, recorded


def _allocation(state_file: str, *, release_at_exit: bool) -> Allocation:
    fake = FakeRunner()
    poller = JobPoller(fake, fetch_brief=lambda ids, r: {}, fetch_detail=lambda jid, r: None, interval=3600)
    alloc = Allocation("19", runner=fake, poller=poller, release_at_exit=release_at_exit)
    poller.stop()
    (brief,) = parse_squeue_brief(recorded(f"22.05/{state_file}").stdout)
    alloc._on_update(JobUpdate("19", brief=brief))
    return alloc


def test_a_running_job_of_a_kernel_says_it_was_cancelled_when_the_kernel_ended() -> None:
    alloc = _allocation("l06_squeue_brief_running.txt", release_at_exit=True)
    text, html = saved_text(alloc), saved_html(alloc)
    assert text.startswith("<Allocation 19: RUNNING as of ")  # a snapshot, dated
    assert "cancelled when its kernel ends; re-run the cell to reconnect>" in text
    assert "cancelled when its kernel ends" in html


def test_a_kept_job_says_it_outlives_the_kernel_and_an_ended_one_says_nothing_more() -> None:
    kept = _allocation("l06_squeue_brief_running.txt", release_at_exit=False)
    assert "kept when its kernel ends; re-run the cell to reconnect" in saved_text(kept)
    ended = _allocation("l12_squeue_brief_cancelled.txt", release_at_exit=True)
    text = saved_text(ended)
    assert "CANCELLED as of" in text and "when its kernel ends" not in text
