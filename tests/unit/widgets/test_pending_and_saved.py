"""A pending allocation says why (plain words, Slurm's word, what would help), for how long, and when Slurm
expects it to start; what a notebook keeps of an allocation says when its state was seen and how to reconnect
(issue 13, points 4 and 8)."""

from __future__ import annotations

import time
from datetime import datetime, timedelta, timezone

import pytest

from slurmlab.core.slurm.models import Job
from slurmlab.core.slurm.squeue_brief import JobBrief
from slurmlab.slurm.allocation import Allocation
from slurmlab.slurm.allocation import display as allocation_display
from slurmlab.slurm.poller import JobPoller, JobUpdate
from slurmlab.widgets.panel import panel_html
from slurmlab.widgets.rows import JOB_COLUMNS, Table, expected_start_text, job_row, pending_text, waited_text

NOW = datetime(2026, 12, 1, 14, 0, 0, tzinfo=timezone.utc)


def brief(
    state: str, reason: str | None = None, start: datetime | None = None, nodes: tuple[str, ...] = ()
) -> JobBrief:
    return JobBrief(
        display_id="7",
        job_id=7,
        array_job_id=None,
        array_task=None,
        state=state,
        reason=reason,
        start_time=start,
        end_time=None,
        time_limit=300,
        time_left=None,
        time_used=None,
        num_nodes=len(nodes) or None,
        nodelist=",".join(nodes),
        nodes=nodes,
        partition="gpu",
        user="alice",
        tres_per_node=(),
    )


def job(
    state: str, reason: str | None = None, submitted: datetime | None = None, start: datetime | None = None
) -> Job:
    return Job(
        job_id=7,
        name="nb",
        state=state,
        reason=reason,
        user="alice",
        partition="gpu",
        submit_time=submitted,
        start_time=start,
        time_limit=300,
    )


def _alloc(argv: tuple[str, ...] = ()) -> Allocation:
    # a poller whose fetchers are never reached: the test hands the updates over itself
    poller = JobPoller(
        runner=object(),
        fetch_brief=lambda ids, r: {},  # type: ignore[arg-type]
        fetch_detail=lambda jid, r: None,
        interval=3600,
    )  # type: ignore[arg-type,return-value]
    alloc = Allocation(
        "7",
        argv=argv,
        runner=object(),
        poller=poller,  # type: ignore[arg-type]
        release_at_exit=False,
    )
    poller.stop()
    return alloc


# --- the pending view ----------------------------------------------------------------------------------------


def test_pending_panel_says_why_for_how_long_and_when_slurm_expects_it() -> None:
    alloc = _alloc()
    start = NOW + timedelta(minutes=3)
    alloc._on_update(
        JobUpdate(
            "7",
            brief=brief("PENDING", "Resources", start),
            detail=job("PENDING", "Resources", NOW - timedelta(seconds=125), start),
        )
    )
    html = panel_html(alloc, now=NOW.timestamp())
    assert "class='slurmlab-reason' data-reason='Resources'" in html
    assert "in use by other jobs (Resources)" in html
    assert "class='slurmlab-pending-for'>Pending for 2 minutes 5 seconds<" in html
    local = start.astimezone().strftime("%H:%M:%S")
    assert "class='slurmlab-expected-start'" in html and f"Expected start:</b> {local} (in 3 minutes)" in html
    assert "not estimated" not in html


def test_before_slurm_estimates_a_start_the_panel_says_so() -> None:
    alloc = _alloc(("--gpus=1",))
    alloc.submitted_at = (
        NOW.timestamp() - 40
    )  # submitted by this kernel: counted from then until Slurm answers
    alloc._on_update(JobUpdate("7", brief=brief("PENDING", "Priority")))
    html = panel_html(alloc, now=NOW.timestamp())
    assert "waiting in line" in html and "Pending for 40 seconds" in html
    assert "Slurm has not estimated a start time yet" in html and "Expected start" not in html


def test_a_request_that_can_never_start_is_shown_with_its_fix() -> None:
    alloc = _alloc()
    alloc._on_update(
        JobUpdate(
            "7",
            brief=brief("PENDING", "PartitionConfig"),
            detail=job("PENDING", "PartitionConfig", NOW - timedelta(hours=1, minutes=5)),
        )
    )
    html = panel_html(alloc, now=NOW.timestamp())
    assert "than its partition allows or has (PartitionConfig)" in html
    assert "What would help:</b> cancel it" in html and "color:#dc3545" in html
    assert "Pending for 1 hour 5 minutes" in html


def test_the_queue_rows_show_the_same_words_time_pending_and_expected_start() -> None:
    start = NOW + timedelta(minutes=10)
    row = job_row(job("PENDING", "QOSMaxGRESPerUser", NOW - timedelta(minutes=2), start), NOW)
    assert row["reason"].startswith("your jobs already use the most GPUs (GRES) your QOS allows per user")
    assert (
        row["pending"]
        == f"pending for 2 minutes; expected start {start.astimezone():%H:%M:%S} (in 10 minutes)"
    )
    assert "pending" in JOB_COLUMNS and "pending for 2 minutes" in Table([row], JOB_COLUMNS).text()
    running = job_row(job("RUNNING", None, NOW - timedelta(minutes=2), NOW - timedelta(minutes=1)), NOW)
    assert running["pending"] == "" and running["reason"] == ""


@pytest.mark.parametrize(
    ("seconds", "text"),
    [
        (0, "0 seconds"),
        (1, "1 second"),
        (59, "59 seconds"),
        (60, "1 minute"),
        (125, "2 minutes 5 seconds"),
        (3599, "59 minutes 59 seconds"),
        (3600, "1 hour"),
        (3905, "1 hour 5 minutes"),
        (90061, "1 day 1 hour"),
        (-5, "0 seconds"),
    ],
)
def test_time_waited_in_words(seconds: int, text: str) -> None:
    assert waited_text(seconds) == text


def test_expected_start_another_day_carries_the_date_and_a_past_estimate_is_due() -> None:
    later = NOW + timedelta(days=2)
    assert expected_start_text(later, NOW).startswith(later.astimezone().strftime("%Y-%m-%d %H:%M"))
    assert expected_start_text(NOW - timedelta(seconds=5), NOW).endswith("(due now)")
    assert pending_text(job("PENDING", "Resources"), NOW) == ""  # nothing known yet: nothing made up


# --- what a notebook keeps ------------------------------------------------------------------------------------


def _running() -> Allocation:
    alloc = _alloc()
    alloc._on_update(JobUpdate("7", brief=brief("RUNNING", None, NOW, ("node1",))))
    return alloc


def test_the_text_and_html_a_notebook_keeps_are_dated_and_say_how_to_reconnect() -> None:
    alloc = _running()
    seen = datetime.fromtimestamp(alloc.updated_at or 0).strftime("%Y-%m-%d %H:%M:%S")
    bundle = alloc._repr_mimebundle_()
    text, html = str(bundle["text/plain"]), str(bundle["text/html"])
    assert text == (
        f"<Allocation 7: RUNNING as of {seen}, nodes node1 — kept when its kernel ends; "
        "re-run the cell to reconnect>"
    )
    assert "class='slurmlab-saved-allocation' data-job='7' data-state='RUNNING'" in html
    assert f"RUNNING as of {seen}" in html and "re-run the cell to reconnect" in html
    assert "left" not in text  # no countdown frozen in a saved notebook


def test_a_state_never_heard_from_slurm_is_dated_when_shown() -> None:
    alloc = _alloc()
    before = time.time()
    text = allocation_display.saved_text(alloc, now=before)
    assert text.startswith("<Allocation 7: UNKNOWN as of ") and text.endswith("re-run the cell to reconnect>")


def test_the_live_panel_is_live_and_its_fallbacks_are_dated() -> None:
    pytest.importorskip("ipywidgets")
    from slurmlab.widgets.live import LiveUpdater
    from slurmlab.widgets.panel import AllocationPanel

    alloc = _running()
    updater = LiveUpdater()
    try:
        panel = AllocationPanel(alloc, updater=updater)
        bundle = panel._repr_mimebundle_()
        assert "application/vnd.jupyter.widget-view+json" in bundle
        assert "as of" in str(bundle["text/plain"]) and "re-run the cell to reconnect" in str(
            bundle["text/plain"]
        )
        assert "as of" in str(bundle["text/html"]) and "slurmlab-saved-allocation" in str(bundle["text/html"])
        assert "as of" not in panel.header.value + panel.body.value  # the widget shows the live state only
        assert "RUNNING" in panel.header.value
    finally:
        updater.stop()
