"""How an allocation takes the shared poller's updates: errors that clear once Slurm answers again,
a job forgotten across a controller restart, and a node that stops responding (issue 10, point 7)."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from slurmlab.core.slurm.squeue_brief import JobBrief
from slurmlab.errors import ControllerDownError
from slurmlab.slurm.allocation import Allocation
from slurmlab.slurm.poller import JobPoller, JobUpdate
from slurmlab.widgets.panel import panel_html


def _alloc() -> Allocation:
    # a poller whose fetchers are never reached: the test hands updates over itself
    poller = JobPoller(
        runner=object(),
        fetch_brief=lambda ids, r: {},  # type: ignore[arg-type]
        fetch_detail=lambda jid, r: None,
        interval=3600,
    )
    alloc = Allocation("5", runner=object(), poller=poller, release_at_exit=False)  # type: ignore[arg-type]
    poller.stop()
    return alloc


def test_a_job_forgotten_across_a_controller_restart_is_gone_not_unreachable(
    make_brief: Callable[..., JobBrief],
) -> None:
    running = make_brief(5, "RUNNING", time_left=None, nodes=("node1",))
    alloc = _alloc()
    alloc._on_update(JobUpdate("5", brief=running))
    alloc._on_update(JobUpdate("5", error=ControllerDownError("the Slurm controller is not responding")))
    assert alloc.state == "RUNNING" and "not responding" in (alloc.error or "")
    alloc._on_update(JobUpdate("5", gone=True))
    assert alloc.state == "GONE" and alloc.error is None


def test_a_silent_node_shows_on_the_panel_and_clears(make_brief: Callable[..., JobBrief]) -> None:
    running = make_brief(5, "RUNNING", time_left=None, nodes=("node1",))
    alloc = _alloc()
    alloc._on_update(JobUpdate("5", brief=running, node_alerts=(("node1", "mixed*"),)))
    assert alloc.node_alerts == (("node1", "mixed*"),)
    html = panel_html(alloc)
    assert "Node trouble" in html and "node1: not responding" in html
    alloc._on_update(JobUpdate("5", brief=running))
    assert alloc.node_alerts == () and "Node trouble" not in panel_html(alloc)


def test_one_unreadable_detail_keeps_the_state_and_says_why(make_brief: Callable[..., JobBrief]) -> None:
    from slurmlab.errors import ParseError

    running = make_brief(5, "RUNNING", time_left=None, nodes=("node1",))
    alloc = _alloc()
    bad: Any = ParseError("scontrol job record", "JobId=5 …", hint="a key appears twice")
    alloc._on_update(JobUpdate("5", brief=running, error=bad))
    assert alloc.state == "RUNNING" and "cannot parse" in (alloc.error or "")


def test_time_left_after_a_pushed_grant_is_the_granted_jobs_not_the_pending_estimate() -> None:
    """Slurm 26.05's poll of a job pending behind another one carries the scheduler's estimate of its end (the
    blocker's end plus its own limit, 2026-12-01T03:30:01 for job 9 of the recording below); granted early by a
    push, the job's time left comes from the detail read with the news, not from that estimate (the 26.05 root saw
    598 s left of a 5-minute job)."""
    from dataclasses import replace

    from slurmlab.core.slurm.parse_text import parse_scontrol_jobs
    from slurmlab.core.slurm.squeue_brief import parse_squeue_brief
    from slurmlab.testing import recorded

    pending = next(
        b for b in parse_squeue_brief(recorded("26.05/s21_squeue_brief.txt").stdout) if b.job_id == 9
    )
    assert pending.state == "PENDING" and pending.end_time is not None  # the estimate, as Slurm printed it
    running = parse_scontrol_jobs(recorded("22.05/l06_scontrol_show_job_d_running.txt").stdout)[0]
    assert running.state == "RUNNING" and running.end_time is not None and running.time_limit == 600
    alloc = _alloc()
    alloc._on_update(JobUpdate("5", brief=replace(pending, job_id=5, display_id="5")))
    assert alloc.time_left() is None  # pending: its clock has not started
    alloc._on_update(JobUpdate("5", detail=running))  # the grant's read: the detail only
    at = running.start_time.timestamp() + 60  # type: ignore[union-attr]
    assert alloc.state == "RUNNING" and alloc.time_left(now=at) == 540
