"""The panel's pending section, asked in the background when the state or reason changed (never every poll, at
most once per interval), its switch buttons (the panel follows the new job), and the amber time warning printed
once per level into the cell."""

from __future__ import annotations

import threading
import time
from datetime import datetime, timedelta, timezone
from types import SimpleNamespace
from typing import Any

import pytest

from slurmlab.core.diagnosis.alternatives import Alternative, StartEstimate, Variant
from slurmlab.core.diagnosis.findings import Finding, Verdict
from slurmlab.core.slurm.models import Job
from slurmlab.core.slurm.squeue_brief import JobBrief
from slurmlab.slurm.allocation import Allocation
from slurmlab.slurm.allocation.pending import PendingWhy
from slurmlab.slurm.poller import JobPoller, JobUpdate
from slurmlab.testing import job_brief
from slurmlab.widgets.panel import panel_html
from slurmlab.widgets.panel_why import WhyWorker, why_html

NOW = datetime.now(timezone.utc)
ALT = Alternative(
    Variant("gpus", "4 GPU(s) (--gpus) instead of 8", ("-p", "gpu", "--gpus=4", "-t", "20")),
    StartEstimate(NOW + timedelta(minutes=2), "node1", "gpu"),
)


def answer(job_id: str = "7") -> PendingWhy:
    return PendingWhy(
        job_id,
        "PENDING",
        (
            Finding("job.pending", "job pending", Verdict.WARN, "waiting for resources (Resources)"),
            Finding(
                "job.blockers",
                "what holds its GPUs",
                Verdict.WARN,
                "1 running job(s) hold GPUs it needs",
                details=("job 5 (bob, RUNNING): 4 gpu on node1; ends soon",),
            ),
        ),
        sooner=(ALT,),
    )


def brief(state: str, reason: str | None = None, end: datetime | None = None, jid: int = 7) -> JobBrief:
    return job_brief(
        jid, state, reason, time_left=None, end_time=end, time_limit=60, partition="gpu", user="alice"
    )


def _alloc(jid: str = "7") -> Allocation:
    poller = JobPoller(
        runner=object(),
        fetch_brief=lambda ids, r: {},  # type: ignore[arg-type]
        fetch_detail=lambda jid, r: None,
        interval=3600,
    )  # type: ignore[arg-type,return-value]
    alloc = Allocation(jid, runner=object(), poller=poller, release_at_exit=False)  # type: ignore[arg-type]
    poller.stop()
    return alloc


def wait_until(check: Any, what: str) -> None:
    deadline = time.monotonic() + 5
    while not check():
        if time.monotonic() > deadline:
            raise AssertionError(f"{what} did not happen")
        time.sleep(0.01)


# ---- the worker: when it asks -----------------------------------------------------------------------------------


def test_the_worker_asks_on_a_change_at_most_once_per_interval() -> None:
    calls: list[str] = []
    done = threading.Event()
    worker = WhyWorker(lambda a: calls.append(str(a.reason)) or answer(), min_interval=30)
    alloc = SimpleNamespace(job_id="7", state="PENDING", reason="Priority", view=None)
    assert worker.maybe_start(alloc, done.set, now=100)  # type: ignore[arg-type]
    wait_until(done.is_set, "the first ask")
    assert worker.result is not None and worker.result.sooner == (ALT,)
    assert not worker.maybe_start(alloc, done.set, now=101)  # type: ignore[arg-type]  # no change: no ask
    alloc.reason = "Resources"
    assert not worker.maybe_start(alloc, done.set, now=110)  # type: ignore[arg-type]  # too soon after the last
    done.clear()
    assert worker.maybe_start(alloc, done.set, now=131)  # type: ignore[arg-type]
    wait_until(done.is_set, "the second ask")
    assert calls == ["Priority", "Resources"] and worker.runs == 2
    # issue 28: Slurm's first estimate (its reason unchanged) is a change too: the changes are asked again
    alloc.view = SimpleNamespace(expected_start=NOW + timedelta(minutes=30))
    done.clear()
    assert worker.maybe_start(alloc, done.set, now=170)  # type: ignore[arg-type]
    wait_until(done.is_set, "the ask once Slurm estimated the start")
    assert calls == ["Priority", "Resources", "Resources"]
    alloc.state, alloc.reason = "RUNNING", "None"
    assert not worker.maybe_start(alloc, done.set, now=1000)  # type: ignore[arg-type]  # only while pending


def test_a_failing_ask_is_shown_not_raised() -> None:
    done = threading.Event()

    def broken(alloc: object) -> PendingWhy:
        raise RuntimeError("sbatch: error: Unable to contact slurm controller")

    worker = WhyWorker(broken)
    worker.maybe_start(SimpleNamespace(job_id="7", state="PENDING", reason="Resources", view=None), done.set)  # type: ignore[arg-type]
    wait_until(done.is_set, "the ask")
    shown = why_html(worker)
    assert "data-state='failed'" in shown and "class='slurmlab-why-error'" in shown
    assert "Unable to contact slurm controller" in shown and worker.result is None and not worker.computing


def test_the_section_escapes_what_slurm_and_users_wrote() -> None:
    worker = WhyWorker()
    worker.result = PendingWhy(
        "7",
        "PENDING",
        (Finding("job.blockers", "t", Verdict.WARN, "<script>x</script>", details=("job 5 (<img src=x>)",)),),
    )
    shown = why_html(worker)
    assert "<script>" not in shown and "<img" not in shown and "data-check='job.blockers'" in shown


# ---- the panel ---------------------------------------------------------------------------------------------------


class Updater:
    def __init__(self) -> None:
        self.dirty = 0

    def add(self, view: object) -> None: ...
    def remove(self, view: object) -> None: ...

    def mark_dirty(self, view: object) -> None:
        self.dirty += 1


def _panel(alloc: Allocation) -> Any:
    pytest.importorskip("ipywidgets")
    from slurmlab.widgets.panel import AllocationPanel

    panel = AllocationPanel(alloc, updater=Updater())  # type: ignore[arg-type]
    panel.worker = WhyWorker(lambda a: answer(str(a.job_id)))
    return panel


def test_a_pending_panel_shows_why_and_one_switch_per_sooner_change(monkeypatch: pytest.MonkeyPatch) -> None:
    alloc = _alloc()
    alloc._on_update(JobUpdate("7", brief=brief("PENDING", "Resources")))
    panel = _panel(alloc)
    panel.render()
    wait_until(lambda: panel.worker.result is not None, "the why")
    panel.render()
    assert "data-check='job.blockers'" in panel.why.value and "job 5 (bob, RUNNING)" in panel.why.value
    (button,) = panel.switches.children
    assert "slurmlab-switch" in button._dom_classes and button.description.startswith("Switch: 4 GPU(s)")
    assert "--gpus=4" in button.tooltip

    new = _alloc("9")
    new._on_update(JobUpdate("9", brief=brief("PENDING", "Priority", jid=9)))

    def resubmit(alternative: Alternative | None = None, **kw: object) -> Allocation:
        assert alternative is ALT
        alloc.replaced_by = new
        return new

    monkeypatch.setattr(alloc, "resubmit", resubmit)
    button.click()
    wait_until(lambda: not panel._switching, "the switch")
    panel.render()
    assert (
        "switched to 4 GPU(s)" in panel.switch_status.value and "job 7 cancelled" in panel.switch_status.value
    )
    panel.render()
    assert panel.alloc is new and "allocation 9" in panel.header.value
    new._on_update(JobUpdate("9", brief=brief("RUNNING", None, NOW + timedelta(hours=1), jid=9)))
    assert panel.updater.dirty  # the panel now hears the new job's updates


def test_a_refused_switch_keeps_the_old_allocation(monkeypatch: pytest.MonkeyPatch) -> None:
    alloc = _alloc()
    alloc._on_update(JobUpdate("7", brief=brief("PENDING", "Resources")))
    panel = _panel(alloc)

    def refused(alternative: Alternative | None = None, **kw: object) -> Allocation:
        raise RuntimeError("salloc: error: Invalid qos specification")

    monkeypatch.setattr(alloc, "resubmit", refused)
    panel.switch(ALT)
    wait_until(lambda: not panel._switching, "the switch")
    panel.render()
    assert panel.alloc is alloc and "switch refused" in panel.switch_status.value
    assert "Invalid qos specification" in panel.switch_status.value


def test_the_panel_turns_amber_and_prints_each_time_warning_once() -> None:
    # a 10-hour limit with 30 minutes left: under a tenth (1 hour), far from five minutes, so how long the test
    # waits for a core never changes the level (times are taken now, not at import)
    now = datetime.now(timezone.utc)
    limit = 10 * 3600
    start = now - timedelta(hours=9, minutes=30)
    end = now + timedelta(minutes=30)
    detail = Job(job_id=7, name="nb", state="RUNNING", start_time=start, end_time=end, time_limit=limit)
    alloc = _alloc()
    alloc._on_update(JobUpdate("7", brief=brief("RUNNING", None, end), detail=detail))
    panel = _panel(alloc)
    panel.render()
    assert "slurmlab-Panel-warn" in panel.widget._dom_classes
    assert "data-level='tenth'" in panel.body.value and "data-level='tenth'" in panel_html(alloc)
    panel.render()
    outputs = panel.output.outputs
    assert (
        len(outputs) == 1
        and "Time running out" in outputs[0]["text"]
        and "allocation 7" in outputs[0]["text"]
    )
    later = now + timedelta(minutes=4)
    alloc._on_update(
        JobUpdate(
            "7",
            brief=brief("RUNNING", None, later),
            detail=Job(
                job_id=7, name="nb", state="RUNNING", start_time=start, end_time=later, time_limit=limit
            ),
        )
    )
    panel.render()
    panel.render()
    said = [o["text"] for o in panel.output.outputs]
    assert len(said) == 2 and "Time running out" in said[0] and "Time almost up: " in said[1]
    assert "data-level='five-minutes'" in panel.body.value


def test_no_warning_with_plenty_of_time_left() -> None:
    now = datetime.now(timezone.utc)
    detail = Job(
        job_id=7,
        name="nb",
        state="RUNNING",
        start_time=now,
        end_time=now + timedelta(hours=2),
        time_limit=7200,
    )
    alloc = _alloc()
    alloc._on_update(JobUpdate("7", brief=brief("RUNNING", None, detail.end_time), detail=detail))
    panel = _panel(alloc)
    panel.render()
    assert (
        "slurmlab-Panel-warn" not in panel.widget._dom_classes
        and "slurmlab-time-warning" not in panel.body.value
    )
    assert panel.output.outputs == ()
