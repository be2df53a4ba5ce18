"""The panel's "how it ended" section: asked once in a worker thread when the allocation ends (never on the
kernel's thread), drawn with the CSS hook ``slurmlab-ended`` and its state, one line printed into the owning cell,
and the panel stops following only once it has told how the job ended."""

from __future__ import annotations

import threading
from pathlib import Path
from typing import Any

import pytest

from slurmlab.core.diagnosis.ended import Ended, explain_end
from slurmlab.core.slurm.sacct import parse_sacct
from slurmlab.core.slurm.squeue_brief import JobBrief
from slurmlab.slurm.allocation import Allocation
from slurmlab.slurm.poller import JobPoller, JobUpdate
from slurmlab.testing import job_brief
from tests.unit.widgets.test_panel_why import wait_until  # one bounded wait for both panel sections

DATA = Path(__file__).resolve().parents[2] / "data" / "slurm" / "24.11" / "sacct" / "a01_sacct_jobs.txt"


def brief(state: str, jid: int = 6) -> JobBrief:
    return job_brief(jid, state, time_left=None, time_limit=1, partition="debug", user="root")


def _alloc(jid: str = "6") -> Allocation:
    poller = JobPoller(
        runner=object(),
        fetch_brief=lambda ids, r: {},  # type: ignore[arg-type]
        fetch_detail=lambda jid, r: None,
        interval=3600,
    )  # type: ignore[arg-type,return-value]
    alloc = Allocation(
        jid,
        runner=object(),
        poller=poller,
        release_at_exit=False,  # type: ignore[arg-type]
        argv=["--gpus=1", "-t", "1"],
    )
    poller.stop()
    return alloc


class Updater:
    def __init__(self) -> None:
        self.dirty = 0
        self.removed = False

    def add(self, view: object) -> None: ...

    def remove(self, view: object) -> None:
        self.removed = True

    def mark_dirty(self, view: object) -> None:
        self.dirty += 1


def judged(alloc: Allocation) -> Ended:
    rows = [r for r in parse_sacct(DATA.read_text()) if r.job_id == alloc.job_id]
    return explain_end(rows, me=0, argv=alloc.request_argv)


def _panel(alloc: Allocation, ask: Any) -> Any:
    pytest.importorskip("ipywidgets")
    from slurmlab.widgets.panel import AllocationPanel
    from slurmlab.widgets.panel_ended import EndedSection

    panel = AllocationPanel(alloc, updater=Updater())  # type: ignore[arg-type]
    panel.ended = EndedSection(lambda: panel.updater.mark_dirty(panel), ask=ask)
    panel.widget.children = (*panel.widget.children, panel.ended.widget)
    return panel


def test_an_ended_allocation_is_explained_once_in_the_background_and_printed_once() -> None:
    alloc = _alloc()
    gate, threads = threading.Event(), []

    def ask(a: Allocation) -> Ended:
        threads.append(threading.current_thread())
        gate.wait(5)
        return judged(a)

    panel = _panel(alloc, ask)
    panel.render()
    assert panel.ended.widget.value == "" and not threads  # running: nothing to tell yet
    alloc._on_update(JobUpdate("6", brief=brief("TIMEOUT")))
    panel.render()
    assert "data-state='computing'" in panel.ended.widget.value and not panel.updater.removed
    gate.set()
    wait_until(lambda: not panel.ended.computing, "the answer")
    assert threads and threads[0] is not threading.main_thread()
    panel.render()
    shown = panel.ended.widget.value
    assert "class='slurmlab-ended'" in shown and "data-state='TIMEOUT'" in shown
    assert "%salloc --gpus=1 -t 2" in shown and panel.updater.removed
    panel.render()
    said = [o["text"] for o in panel.output.outputs]
    assert len(said) == 1 and said[0].startswith("slurmlab: Job 6 reached its time limit")
    assert len(threads) == 1  # asked once per job


def test_a_failing_ask_is_shown_in_the_section_not_raised_and_not_printed() -> None:
    alloc = _alloc()

    def ask(a: Allocation) -> Ended:
        raise RuntimeError("sacct: error: Problem talking to the database")

    panel = _panel(alloc, ask)
    alloc._on_update(JobUpdate("6", brief=brief("CANCELLED")))
    panel.render()
    wait_until(lambda: not panel.ended.computing, "the answer")
    panel.render()
    assert "data-state='failed'" in panel.ended.widget.value and "Problem talking" in panel.ended.widget.value
    assert list(panel.output.outputs) == [] and panel.updater.removed


def test_the_section_escapes_what_users_named() -> None:
    from slurmlab.widgets.panel_ended import ended_html

    rows = [r for r in parse_sacct(DATA.read_text()) if r.job_id == "6"]
    end = explain_end(rows, me=0, argv=["-J", "<script>alert(1)</script>"])
    shown = ended_html(end, None, False)
    assert "<script>" not in shown and "&lt;script&gt;" in shown and "data-state='TIMEOUT'" in shown
    assert "<img" not in ended_html(None, "<img src=x onerror=alert(1)>", False)
