"""``alloc.why()`` and ``alloc.resubmit()`` against a real Slurm (dgx-h100 sandbox: 2 nodes × 8 stand-in H100s):
blocker jobs hold half of each node, an allocation asking for 8 GPUs on one node waits for Resources; why()
names the blockers and a change `sbatch --test-only` says starts sooner; resubmitting to it runs the new job and
cancels the old one. A held job's why says `scontrol release`."""

from __future__ import annotations

import time
from datetime import datetime
from typing import Any

import pytest

from slurmlab.core.diagnosis.findings import Verdict
from slurmlab.slurm.allocation import Allocation
from slurmlab.slurm.allocation.pending import why
from slurmlab.slurm.poller import JobPoller
from tests.integration.sandbox_jobs import clear_queue, squeue, submit, wait_for

pytestmark = pytest.mark.sandbox


def test_why_names_the_blockers_and_resubmit_switches_to_a_sooner_change(sandbox: Any) -> None:
    r = sandbox.runner()
    node1, node2 = sandbox.nodes[:2]
    a = submit(r, "--gpus=4", "-w", node1, "-t", "30", "-J", "blocker-a")
    b = submit(r, "--gpus=4", "-w", node2, "-t", "40", "-J", "blocker-b")
    wait_for(
        lambda: squeue(r, f"{a},{b}", "%T").split() == ["RUNNING", "RUNNING"] or None, 30, "blockers running"
    )
    poller = JobPoller(r, interval=0.5)
    try:
        alloc = Allocation.submit(
            ["--gpus=8", "-N1", "-t", "20"], runner=r, poller=poller, validate=False, release_at_exit=False
        )
        assert alloc.job_id is not None
        wait_for(
            lambda: squeue(r, str(alloc.job_id), "%r") == "Resources" or None, 30, "pending for Resources"
        )
        got = alloc.why()
        assert got.pending and got.job_id == alloc.job_id
        pending = got.finding("job.pending")
        assert pending is not None and "(Resources)" in pending.evidence
        held_by = got.finding("job.blockers")
        assert held_by is not None and held_by.verdict is Verdict.WARN
        assert {d.split()[1] for d in held_by.details} == {a, b} and all(
            " ends " in d for d in held_by.details
        )
        assert got.sooner, got.text()
        best = got.sooner[0]
        start = squeue(r, str(alloc.job_id), "%S")
        assert best.answer.starts is not None
        if start not in ("N/A", ""):  # Slurm's own estimate for the job, once backfill has made one
            assert best.answer.starts.strftime("%Y-%m-%dT%H:%M:%S") < start, (best, start)
        new = alloc.resubmit(best)
        assert new.job_id != alloc.job_id and alloc.replaced_by is new
        new.wait("RUNNING", timeout=30)
        alloc.wait("ENDED", timeout=30)
        assert squeue(r, str(alloc.job_id), "%T") in ("CANCELLED", "")
        assert squeue(r, str(new.job_id), "%T") == "RUNNING"
        assert new.why(alternatives=False).findings[0].check == "job.state"
        new.cancel()
    finally:
        poller.stop()


def test_the_panel_explains_in_the_background_and_its_switch_button_follows_the_new_job(sandbox: Any) -> None:
    pytest.importorskip("ipywidgets")
    from slurmlab.widgets.live import LiveUpdater
    from slurmlab.widgets.panel import AllocationPanel

    r = sandbox.runner()
    node1, node2 = sandbox.nodes[:2]
    blockers = [submit(r, "--gpus=4", "-w", n, "-t", "30") for n in (node1, node2)]
    wait_for(lambda: squeue(r, ",".join(blockers), "%T").split() == ["RUNNING"] * 2 or None, 30, "blockers")
    poller = JobPoller(r, interval=0.5)
    updater = LiveUpdater()
    try:
        alloc = Allocation.submit(
            ["--gpus=8", "-N1", "-t", "20"], runner=r, poller=poller, validate=False, release_at_exit=False
        )
        t0 = time.monotonic()
        panel = AllocationPanel(alloc, updater=updater)
        assert time.monotonic() - t0 < 1.0  # the panel never waits for Slurm's answers itself
        buttons = wait_for(lambda: panel.switches.children or None, 60, "the switch buttons")
        assert "data-check='job.blockers'" in panel.why.value and "data-state='done'" in panel.why.value
        assert all("slurmlab-switch" in b._dom_classes for b in buttons)
        buttons[0].click()
        wait_for(lambda: panel.alloc is not alloc or None, 60, "the panel following the new job")
        new = panel.alloc
        new.wait("RUNNING", timeout=30)
        wait_for(
            lambda: "RUNNING" in panel.header.value and str(new.job_id) in panel.header.value or None,
            10,
            "the panel showing the new job running",
        )
        assert panel.switches.children == () and panel.why.value == ""
        alloc.wait("ENDED", timeout=30)
        assert squeue(r, str(alloc.job_id), "%T") in ("CANCELLED", "")
        new.cancel()
    finally:
        updater.stop()
        poller.stop()


def test_a_held_jobs_why_says_scontrol_release(sandbox: Any) -> None:
    r = sandbox.runner()
    job = submit(r, "--hold", "--gpus=1", "-t", "5")
    wait_for(lambda: squeue(r, job, "%r") == "JobHeldUser" or None, 20, "the job held")
    alloc = Allocation.attach(job, runner=r)
    try:
        got = alloc.why()
        held = got.finding("job.held")
        assert held is not None and f"`scontrol release {job}`" in held.fix and not got.sooner
        r.run(held.fix.split("`")[1].split())
        wait_for(lambda: squeue(r, job, "%r") != "JobHeldUser" or None, 20, "the job released")
        assert alloc.why(alternatives=False).finding("job.held") is None
    finally:
        alloc.forget()


@pytest.fixture(scope="module")
def accounted(sandbox_factory: Any) -> Any:
    """A seed sandbox (2 nodes × 4 GPUs) with accounting: QOS normal caps each user at 4 GPUs. The session's
    (shared with the sidebar's recent-jobs test, which only reads accounting): one start less."""
    from slurmlab.testing.sandbox_fixtures import accounting_missing_reason

    missing = accounting_missing_reason()
    if missing:
        pytest.skip(missing)
    return sandbox_factory("seed", 2, accounting=True)


def test_a_job_over_the_qos_gpu_limit_gets_the_limit_named_with_the_users_usage(accounted: Any) -> None:
    r = accounted.runner()
    first = submit(r, "--gpus=4", "-t", "10")
    wait_for(lambda: squeue(r, first, "%T") == "RUNNING" or None, 60, "the first job running")
    over = submit(r, "--gpus=2", "-t", "10")
    reason = wait_for(
        lambda: squeue(r, over, "%r") if squeue(r, over, "%r").startswith("QOS") else None,
        60,
        "the second job held back by its QOS",
    )
    alloc = Allocation.attach(over, runner=r)
    try:
        got = alloc.why(alternatives=False)
    finally:
        alloc.forget()
    limit = got.finding("job.limit")
    assert limit is not None, got.text()
    assert reason in limit.evidence or "MaxTRESPU" in limit.evidence
    assert "4 GPU(s) in use of 4 GPU(s) allowed" in limit.evidence, limit
    assert "this job asks for 2 GPU(s)" in limit.details
    r.run(["scancel", first, over], check=False)


def test_at_the_qos_gpu_cap_every_change_offered_starts_when_taken(accounted: Any) -> None:
    """Issue 25, point 8: `sbatch --test-only` applies no QOS limit, so a shorter time or fewer GPUs "would start
    at once" while the user's QOS cap holds them as it holds the job. Nothing offered may wait for a limit:
    every change why() offers is taken for real here and must run; the held ones name the cap; the finding
    names the limit and what lifts it (ending the user's own job, or QOS debug: a cap of its own)."""
    r = accounted.runner()
    clear_queue(r)
    first = submit(r, "--gpus=4", "-t", "30", "-J", "at-the-cap")  # QOS normal: 4 GPUs per user, all in use
    wait_for(lambda: squeue(r, first, "%T") == "RUNNING" or None, 60, "the first job running")
    over = submit(r, "--gpus=2", "-t", "10", "-J", "over-the-cap")
    wait_for(lambda: squeue(r, over, "%r").startswith("QOS") or None, 60, "the second job held by its QOS")
    taken: list[str] = []
    try:
        got = why(over, r)
        assert got.sooner, got.text()
        for alt in got.sooner:  # the strong check: what is offered starts when taken
            jid = submit(r, *alt.variant.options)
            taken.append(jid)
            said = wait_for(
                lambda jid=jid: (
                    lambda s: s if s.startswith("RUNNING") or not s.endswith(("|None", "|Priority")) else None
                )(squeue(r, jid, "%T|%r")),
                30,
                f"a verdict on {alt.line()}",
            )
            assert said.startswith("RUNNING"), f"offered, yet it waits when taken ({said}): {alt.line()}"
            r.run(["scancel", jid], check=False)
        held = [a for a in got.rest if a.held_by]
        assert {"time", "gpus"} <= {a.variant.kind for a in held}, (
            got.text()
        )  # what --test-only alone offered
        assert all("MaxTRESPU" in a.held_by[0] for a in held if a.variant.kind in ("time", "gpus"))
        limit = got.finding("job.limit")
        assert limit is not None and "MaxTRESPU" in limit.evidence, got.text()
        assert "4 GPU(s) in use of 4 GPU(s) allowed" in limit.evidence
        assert f"end your job {first}" in limit.fix and "QOS debug instead of normal" in limit.fix, limit.fix
    finally:
        r.run(["scancel", first, over, *taken], check=False)


def test_with_all_16_gpus_held_the_panel_states_one_estimate_and_offers_nothing_later(sandbox: Any) -> None:
    """Issue 28, point 1: two jobs hold all 16 GPUs, then `--gpus=1 -t 99999` waits. The panel states Slurm's
    expected start once (never "no expected start" beside it), lists no change that starts later than it
    (its `-t` changes start weeks away), and every switch it offers starts strictly sooner, its label dated
    when not today."""
    pytest.importorskip("ipywidgets")
    import re

    from slurmlab.widgets.live import LiveUpdater
    from slurmlab.widgets.panel import AllocationPanel

    r = sandbox.runner()
    node1, node2 = sandbox.nodes[:2]
    held = [submit(r, "--gpus=8", "-w", n, "-t", t) for n, t in ((node1, "30"), (node2, "60"))]
    wait_for(lambda: squeue(r, ",".join(held), "%T").split() == ["RUNNING"] * 2 or None, 30, "16 GPUs held")
    poller = JobPoller(r, interval=0.5)
    updater = LiveUpdater()
    try:
        alloc = Allocation.submit(
            ["--gpus=1", "-t", "99999"], runner=r, poller=poller, validate=False, release_at_exit=False
        )
        panel = AllocationPanel(alloc, updater=updater)
        panel.worker.min_interval = 1.0  # the panel's 30 s between asks, shortened for the test

        def asked_with_estimate() -> bool | None:
            result = panel.worker.result
            view = alloc.view
            said = result.finding("job.alternatives") if result is not None else None
            return (
                said is not None
                and said.verdict.value != "SKIP"
                and view is not None
                and view.expected_start is not None
                and "data-state='done'" in panel.why.value
            ) or None

        wait_for(asked_with_estimate, 60, "the changes asked once Slurm estimated the start")
        updater.mark_dirty(panel)
        time.sleep(0.5)
        words = re.sub(r"\s+", " ", re.sub(r"<[^>]+>", " ", panel.body.value + panel.why.value))
        stated = re.findall(
            r"Expected start:|expects it to start|no expected start|not estimated a start", words
        )
        assert stated == ["Expected start:"], words
        assert "(not sooner)" not in words and "%salloc" not in words.split("what would start it sooner")[0]
        from slurmlab.widgets.panel_why import shown_result

        view = alloc.view
        assert view is not None and view.expected_start is not None
        offered = shown_result(panel.worker, view.expected_start)
        assert offered is not None
        for alt in offered.sooner:
            assert alt.answer.starts is not None and alt.answer.starts < view.expected_start, alt.line()
        for button in panel.switches.children:
            alt = next(a for a in offered.sooner if a.variant.salloc_line == button.tooltip)
            assert alt.answer.starts is not None
            local = alt.answer.starts.astimezone()
            if local.date() != datetime.now().astimezone().date():
                assert local.strftime("%Y-%m-%d") in button.description, button.description
        alloc.cancel()
    finally:
        updater.stop()
        poller.stop()
