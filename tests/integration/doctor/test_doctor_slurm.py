"""``slurmlab doctor`` against a real Slurm (issue 16's Done when): a job pending for resources (the blockers named,
a change that ``sbatch --test-only`` says starts sooner), a held job, a drained node, the controller stopped and
munge stopped — each a real state of a sandbox, never a mock."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from slurmlab.core.diagnosis.findings import Report, Verdict
from slurmlab.sandbox.processes import alive
from slurmlab.slurm.doctor import doctor
from slurmlab.slurm.doctor_evidence import planned_start
from tests.integration.sandbox_jobs import clear_queue, squeue, submit, wait_for

pytestmark = pytest.mark.sandbox
REPO = Path(__file__).resolve().parents[3]


@pytest.fixture
def sb(slurm_sandbox: Any) -> Iterator[Any]:
    runner = slurm_sandbox.runner()
    clear_queue(runner)
    yield slurm_sandbox
    clear_queue(runner)
    for node in slurm_sandbox.nodes:
        runner.run(["scontrol", "update", f"nodename={node}", "state=resume"], check=False)


def by_check(report: Report, check: str) -> Any:
    return next(f for f in report.findings if f.check == check)


def test_a_job_pending_for_resources_names_its_blockers_and_a_sooner_change(sb: Any) -> None:
    r = sb.runner()
    node1, node2 = sb.nodes[:2]
    a = submit(r, "--gpus=4", "-w", node1, "-t", "30", "-J", "train")
    b = submit(r, "--gpus=4", "-w", node2, "-t", "40", "-J", "x UserId=root(0) JobState=RUNNING")
    wait_for(
        lambda: squeue(r, f"{a},{b}", "%T").split() == ["RUNNING", "RUNNING"] or None, 30, "blockers running"
    )
    big = submit(r, "--gpus=8", "-N1", "-t", "20", "-J", "big")
    wait_for(lambda: squeue(r, big, "%r") == "Resources" or None, 30, "the big job pending for Resources")
    report = doctor(r, job=big)
    assert by_check(report, "controller").verdict is Verdict.OK
    pending = by_check(report, "job.pending")
    assert pending.verdict is Verdict.WARN and "(Resources)" in pending.evidence
    # the expected start is squeue --start's, with the node the scheduler plans it on once backfill has planned it
    planned = planned_start(big, r)
    if planned.start is not None:
        assert planned.nodes in sb.nodes, planned
    assert "expects it to start" in pending.details[0] or "no expected start" in pending.details[0], (
        pending.details
    )
    held_by = by_check(report, "job.blockers")
    assert {d.split()[1] for d in held_by.details} == {a, b}
    alt = by_check(report, "job.alternatives")
    assert alt.verdict is Verdict.WARN, report.text()
    assert alt.fix.startswith(f"`%scancel {big}` then `%salloc ") and "--gpus=" in alt.fix
    # what the doctor promises is what Slurm says: its best change, asked again, starts before the job itself
    options = alt.fix.split("`%salloc ", 1)[1].rstrip("`").split()
    again = r.run(["sbatch", "--test-only", "-o", "/dev/null", *options, "--wrap=true"], check=False)
    start = squeue(r, big, "%S")
    said = again.stderr.split(" to start at ", 1)[1].split()[0]
    assert said < start, (said, start)
    # the command line says the same, as JSON, with exit code 0 (a waiting job is advice, not a failure)
    env = {**os.environ, "SLURM_CONF": str(sb.conf_path)}
    cli = subprocess.run(
        [sys.executable, "-m", "slurmlab", "doctor", "--job", big, "--json"],
        capture_output=True,
        text=True,
        timeout=120,
        cwd=REPO,
        env=env,
    )
    assert cli.returncode == 0, cli.stderr
    doc = json.loads(cli.stdout)
    assert "job.alternatives" in [f["check"] for f in doc["findings"]] and doc["worst"] == "WARN"


def test_a_held_job_fails_and_its_fix_releases_it(sb: Any) -> None:
    r = sb.runner()
    job = submit(r, "--hold", "--gpus=1", "-t", "5")
    wait_for(lambda: squeue(r, job, "%r") == "JobHeldUser" or None, 20, "the job held")
    report = doctor(r, job=job)
    held = by_check(report, "job.held")
    assert held.verdict is Verdict.FAIL and report.exit_code() == 1 and "JobHeldUser" in held.evidence
    fix = held.fix.split("`")[1].split()
    assert fix == ["scontrol", "release", job]
    r.run(fix)
    wait_for(lambda: squeue(r, job, "%r") != "JobHeldUser" or None, 20, "the job released")
    assert not any(f.check == "job.held" for f in doctor(r, job=job).findings)


def test_a_drained_node_fails_with_its_reason_and_resume_clears_it(sb: Any) -> None:
    r = sb.runner()
    node = sb.nodes[-1]
    r.run(["scontrol", "update", f"nodename={node}", "state=drain", "reason=doctor test: bad fan"])
    report = doctor(r, node=node)
    f = report.findings[-1]
    assert f.subject == f"node {node}" and f.verdict is Verdict.FAIL and report.exit_code() == 1
    assert "doctor test: bad fan" in f.evidence and "set by " in f.evidence and "DRAIN" in f.evidence
    assert f"scontrol update nodename={node} state=resume" in f.fix
    # every drained node shows without --node too, as a warning
    assert any(x.subject == f"node {node}" and x.verdict is Verdict.WARN for x in doctor(r).findings)
    r.run(["scontrol", "update", f"nodename={node}", "state=resume"])
    # slurmctld flags a resumed node NOT_RESPONDING until its slurmd answers the next ping (seconds)
    settled = wait_for(
        lambda: (
            doctor(r, node=node).findings[-1]
            if doctor(r, node=node).findings[-1].verdict is Verdict.OK
            else None
        ),
        30,
        f"{node} taking jobs again",
    )
    assert "takes jobs" in settled.evidence


def test_gres_configuration_of_the_sandbox_is_sane(sb: Any) -> None:
    f = by_check(doctor(sb.runner()), "config.gres")
    assert f.verdict is Verdict.OK and "gpu" in f.evidence


@pytest.fixture
def own(sandbox_factory: Any) -> Iterator[Any]:
    """A sandbox of another profile, for breaking: its daemons come back after each test."""
    box = sandbox_factory("seed")
    yield box
    box.restart()


def _kill(pid: int) -> None:
    os.kill(pid, signal.SIGKILL)
    wait_for(lambda: not alive(pid) or None, 10, f"pid {pid} ending")


def test_a_stopped_controller_fails_once_and_every_later_check_skips(own: Any) -> None:
    _kill(own.pids["slurmctld"])
    report = doctor(own.runner(timeout=10), job=1, node=own.nodes[0])
    verdicts = [(f.check, f.verdict) for f in report.findings]
    assert verdicts[0] == ("controller", Verdict.FAIL) and report.exit_code() == 1
    assert all(
        v is Verdict.SKIP and "controller down" in f.evidence
        for f, (_, v) in zip(report.findings[1:], verdicts[1:], strict=True)
    )
    assert "slurmctld" in report.findings[0].fix and "sandbox up" in report.findings[0].fix
    assert "DOWN" in report.findings[0].evidence or "did not answer" in report.findings[0].evidence


def test_a_stopped_munged_is_named_as_munge(own: Any) -> None:
    _kill(own.pids["munged"])
    report = doctor(own.runner(timeout=10))
    first = report.findings[0]
    assert first.check == "controller" and first.verdict is Verdict.FAIL
    assert "munge" in first.evidence.lower()
    assert all(f.verdict is Verdict.SKIP for f in report.findings[1:])


def test_a_running_job_shows_its_nodes_steps_time_left_and_the_gpu_checks(sb: Any) -> None:
    r = sb.runner()
    job = submit(r, "--gpus=1", "-t", "10")
    wait_for(lambda: squeue(r, job, "%T") == "RUNNING" or None, 30, "the job running")
    report = doctor(r, job=job)
    running = by_check(report, "job.running")
    assert running.verdict is Verdict.OK and running.evidence.startswith("RUNNING on ")
    assert any(d.startswith("time left: ") and "minute" in d for d in running.details)
    assert any(d.startswith(f"step {job}.batch") for d in running.details)
    gpu = [f for f in report.findings if f.check.startswith("gpu.")]
    assert gpu and {f.verdict for f in gpu} == {Verdict.SKIP}  # the sandbox has no GPU, and says so
