"""Issue 28, point 1: "why it waits" gives advice that is true — replayed from what a real Slurm 22.05 printed
(``tests/data/slurm/22.05/why_waits``, recorded by ``scripts/record_why_waits.py``; dgx-h100 sandbox,
2 nodes × 8 GPUs, two jobs holding all 16 GPUs for 30 and 60 minutes).

- ``g``: ``--gpus=1 -t 99999``, asked at once (``g0``: no reason, no expected start yet) and once Slurm had its
  estimate (``g1``). ``sbatch --test-only`` says its ``-t`` changes would start 2027-01-08: a month later.
- ``n``: ``-N2 --gpus-per-node=8 -t 10``; its ``-t 5`` change starts ten minutes after the job's own estimate.
- ``b``: ``--begin=now+10minutes``, held and released: Slurm's reason says ``None`` for a moment, and the
  changes of its resources (which drop ``--begin``) would start at once.

One estimate, stated once; a change offered only while it starts strictly before it, with its date; the real
cause (its begin time) first; and no ``--test-only`` (each takes a job number) before Slurm looked at the job.
"""

from __future__ import annotations

import importlib
import re
import time
from datetime import datetime, timedelta
from typing import Any

import pytest

from slurmlab.core.diagnosis.alternatives import Alternative, parse_test_only
from slurmlab.core.diagnosis.findings import Verdict
from slurmlab.core.slurm.squeue_brief import JobBrief
from slurmlab.core.slurm.timefmt import parse_timestamp
from slurmlab.slurm.allocation import Allocation
from slurmlab.slurm.allocation.pending import PendingWhy, why
from slurmlab.slurm.doctor import doctor
from slurmlab.slurm.poller import JobPoller, JobUpdate
from slurmlab.testing import FakeRunner, golden_dir, recorded
from slurmlab.testing.recordings import listed_commands
from slurmlab.widgets.panel_why import WhyWorker, switch_label
from tests.unit.core.diagnosis.fake_cluster import cluster

WHY_WAITS = "22.05/why_waits"


def _names(*prefixes: str) -> list[str]:
    """Every recorded file of the scenes ``prefixes`` (``g0`` = g001…, ``g0x`` = g0x01…), in order."""
    listed = listed_commands(golden_dir() / WHY_WAITS)
    return [
        f"{WHY_WAITS}/{n}" for n in listed if any(n.startswith(p) and n[len(p)].isdigit() for p in prefixes)
    ]


def _fake(*prefixes: str) -> FakeRunner:
    fake = FakeRunner()
    fake.replay(*_names(*prefixes))
    return fake


def _test_only(fake: FakeRunner) -> list[list[str]]:
    return [a for a in fake.history if a[:2] == ["sbatch", "--test-only"]]


def _brief(job_id: int, start: datetime | None, reason: str | None = None) -> JobBrief:
    """The panel's poll of the job as squeue gives it: its state, reason and Slurm's estimate (%S)."""
    return JobBrief(
        display_id=str(job_id),
        job_id=job_id,
        array_job_id=None,
        array_task=None,
        state="PENDING",
        reason=reason,
        start_time=start,
        end_time=None,
        time_limit=None,
        time_left=None,
        time_used=None,
        num_nodes=None,
        nodelist="",
        nodes=(),
        partition="gpu",
        user="root",
        tres_per_node=(),
    )


class _Updater:
    def add(self, view: object) -> None: ...
    def remove(self, view: object) -> None: ...
    def mark_dirty(self, view: object) -> None: ...


def _panel(result: PendingWhy, poll: JobBrief) -> Any:
    """A panel on the job, its poll showing ``poll``, its background ask answering ``result``."""
    pytest.importorskip("ipywidgets")
    from slurmlab.widgets.panel import AllocationPanel

    poller = JobPoller(
        runner=object(),  # type: ignore[arg-type]
        fetch_brief=lambda ids, r: {},
        fetch_detail=lambda jid, r: None,  # type: ignore[arg-type,return-value]
        interval=3600,
    )
    alloc = Allocation(result.job_id, runner=object(), poller=poller, release_at_exit=False)  # type: ignore[arg-type]
    poller.stop()
    alloc._on_update(JobUpdate(result.job_id, brief=poll))
    panel = AllocationPanel(alloc, updater=_Updater())  # type: ignore[arg-type]
    panel.worker = WhyWorker(lambda a: result)
    panel.render()
    deadline = time.monotonic() + 5
    while panel.worker.result is None and time.monotonic() < deadline:
        time.sleep(0.01)
    panel.render()
    return panel


def _words(html: str) -> str:
    return re.sub(r"\s+", " ", re.sub(r"<[^>]+>", " ", html))


def _estimates(text: str) -> int:
    """How many times the text states (or denies) an expected start."""
    return len(
        re.findall(r"Expected start:|expects it to start|no expected start|not estimated a start", text)
    )


def test_the_panel_states_one_expected_start_though_the_ask_had_none() -> None:
    """g0 was asked before Slurm had an estimate; the poll has one now (g1's): the panel says it once."""
    early = why("3", _fake("g0", "g0x"))
    assert early.job is not None and early.job.expected_start is None
    later = why("3", _fake("g1"))
    assert later.job is not None and later.job.expected_start is not None
    panel = _panel(early, _brief(3, later.job.expected_start))
    shown = _words(panel.body.value + panel.why.value)
    assert _estimates(shown) == 1 and "Expected start:" in shown, shown
    assert panel.switches.children == ()


def test_the_panel_lists_no_change_that_starts_later_and_dates_none_without_its_day() -> None:
    """g1: the `-t` changes start 2027-01-08, a month after the estimate: the panel offers none of them, and
    nothing it shows is a bare time of another day."""
    got = why("3", _fake("g1"))
    assert got.job is not None and got.job.expected_start is not None
    assert got.sooner == () and got.rest and all(a.answer.starts for a in got.rest)
    panel = _panel(got, _brief(3, got.job.expected_start))
    shown = _words(panel.why.value)
    assert "2027" not in shown and "%salloc" not in shown, shown
    assert "2 other change(s) checked start no sooner (`%slurm doctor --job 3` lists them)" in shown, shown
    assert panel.switches.children == ()
    said = got.finding("job.alternatives")
    assert said is not None and "none of 2 change(s) checked would start sooner" in said.evidence
    # the doctor's text keeps them, each dated, and without a line to type
    assert all("2027-01-08 14:" in d and "%salloc" not in d for d in said.details if "(not sooner)" in d)


def test_the_n2_scene_offers_no_t5_change_that_starts_after_the_estimate() -> None:
    got = why("12", _fake("n1"))
    assert got.job is not None and got.job.expected_start is not None
    later = [a for a in got.rest if a.variant.kind == "time"]
    assert later and all(a.answer.starts and a.answer.starts > got.job.expected_start for a in later)
    assert got.sooner == ()
    panel = _panel(got, _brief(12, got.job.expected_start, "Resources"))
    assert "-t 5" not in _words(panel.why.value) and panel.switches.children == ()


def test_a_change_stays_offered_only_while_it_starts_strictly_before_the_estimate_shown() -> None:
    """The doctor's recording: 4 GPUs would start 08:05:39, the job expects 08:25:35. Should the poll's
    estimate move to 08:05:39 (a blocker ending early), the change is no longer sooner: not offered."""
    fake = cluster()
    got = why("16", fake)
    best = got.sooner[0]
    assert best.answer.starts is not None and got.expected_start is not None
    assert got.against(got.expected_start) is got
    moved = got.against(best.answer.starts)
    assert best not in moved.sooner and best in moved.rest
    assert all(a.answer.starts is not None and a.answer.starts < best.answer.starts for a in moved.sooner)
    said = moved.finding("job.alternatives")
    assert said is not None and not any(best.variant.salloc_line in d for d in said.details)
    panel = _panel(got, _brief(16, best.answer.starts, "Resources"))
    assert not any("4 GPU(s)" in b.description for b in panel.switches.children)
    assert "--gpus=4" not in _words(panel.why.value)
    panel = _panel(got, _brief(16, got.expected_start, "Resources"))
    assert any("4 GPU(s)" in b.description for b in panel.switches.children)


def test_a_switch_button_gives_the_date_of_a_start_that_is_not_today() -> None:
    name = next(n for n in _names("g1") if "test-only" in n)
    reply = recorded(name)
    answer = parse_test_only(reply.stdout + "\n" + reply.stderr, reply.returncode)
    assert answer.starts is not None and answer.starts.year == 2027
    label = switch_label(Alternative(why("3", _fake("g1")).rest[0].variant, answer))
    assert "(starts 2027-01-08 " in label, label


def _at_the_recording(monkeypatch: pytest.MonkeyPatch) -> None:
    """The clock of why() and the doctor set to the moment of the ``b`` recording (a second after the job's
    SubmitTime, as its record gives it), so that its begin time is ten minutes ahead, as it was."""
    record = recorded(f"{WHY_WAITS}/b02_scontrol_show_job.txt").stdout
    found = re.search(r"SubmitTime=(\S+)", record)
    assert found is not None
    submitted = parse_timestamp(found.group(1))
    assert submitted is not None
    moment: datetime = submitted + timedelta(seconds=1)

    class Recorded(datetime):
        @classmethod
        def now(cls, tz: Any = None) -> Any:
            return moment.astimezone(tz)

    for name in ("allocation.pending", "doctor", "pending_alternatives"):
        monkeypatch.setattr(importlib.import_module(f"slurmlab.slurm.{name}"), "datetime", Recorded)


def test_a_job_released_before_its_begin_time_is_told_its_begin_time_first_and_offered_nothing(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """Right after the release Slurm's reason says None; the changes of its resources would start at once
    (``bx``), but only because they drop its --begin: the real cause is the begin time."""
    _at_the_recording(monkeypatch)
    fake = _fake("b", "bx")
    got = why("23", fake)
    assert got.job is not None and got.job.reason is None
    pending = got.finding("job.pending")
    assert pending is not None and pending.verdict is Verdict.WARN
    begin = re.search(r"EligibleTime=(\S+)", recorded(f"{WHY_WAITS}/b02_scontrol_show_job.txt").stdout)
    assert begin is not None
    assert f"begin time {begin.group(1).replace('T', ' ')} (in 9 minutes 59 seconds)" in pending.evidence
    assert "--begin" in pending.evidence
    assert [f.check for f in got.findings] == ["job.pending"] and got.sooner == ()
    assert _test_only(fake) == []


def test_the_doctor_names_the_begin_time_and_offers_nothing(monkeypatch: pytest.MonkeyPatch) -> None:
    _at_the_recording(monkeypatch)
    fake = _fake("bk")
    fake.replay(
        f"{WHY_WAITS}/b01_sinfo_version.txt"
    )  # the same sandbox's version (bk's runner had it cached)
    report = doctor(fake, job="23")
    about = [f for f in report.findings if f.subject == "job 23"]
    assert [f.check for f in about] == ["job.pending"], report.text()
    assert "begin time" in about[0].evidence and "without --begin" in about[0].fix


def test_no_test_only_is_asked_before_slurm_looked_at_the_job() -> None:
    """Each `sbatch --test-only` takes a job number (``i01``/``i02``: held jobs 8 and 11 around one why() that
    asked two). A job with no reason and no estimate yet (g0, n0) gets none; the panel asks again once the
    reason changes."""
    assert recorded(f"{WHY_WAITS}/i01_sbatch_hold.txt").stdout.strip() == "8"
    assert recorded(f"{WHY_WAITS}/i02_sbatch_hold.txt").stdout.strip() == "11"
    assert sum("test-only" in n for n in _names("i")) == 2
    for scene, jid in (("g0", "3"), ("n0", "12")):
        fake = _fake(scene, scene + "x")
        got = why(jid, fake)
        assert _test_only(fake) == [], scene
        said = got.finding("job.alternatives")
        assert said is not None and said.verdict is Verdict.SKIP and "job number" in said.fix


def test_the_begin_time_is_read_from_the_text_and_the_json_records() -> None:
    """Slurm's EligibleTime (``--begin``): scontrol's text (22.05) and ``scontrol --json`` (24.11, 26.05)."""
    import json

    from slurmlab.core.slurm.json_jobs import parse_jobs_json
    from slurmlab.core.slurm.parse_text import parse_scontrol_jobs

    text = recorded(f"{WHY_WAITS}/b02_scontrol_show_job.txt").stdout
    (job,) = parse_scontrol_jobs(text)
    begin = re.search(r"EligibleTime=(\S+)", text)
    assert begin is not None and job.eligible_time == parse_timestamp(begin.group(1))
    for version in ("24.11", "26.05"):
        doc = json.loads((golden_dir() / version / "l02_scontrol_json_show_job_d_pending.json").read_text())
        (pending,) = parse_jobs_json(doc)
        raw = doc["jobs"][0]["eligible_time"]
        assert pending.eligible_time is not None and pending.eligible_time.timestamp() == raw["number"]
