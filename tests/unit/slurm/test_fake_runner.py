"""The FakeRunner itself: scripts by argv pattern, recorded outputs, Slurm's failures, background processes."""

from __future__ import annotations

import asyncio
import os
import re
import signal

import pytest
from fake_slurm import JOB, UNKNOWN_JOB, VERSION, controller_down, pending_salloc, rec

from slurmlab.errors import ControllerDownError, JobNotFoundError, SlurmError
from slurmlab.slurm import queries
from slurmlab.slurm.runner import Runner, get_runner
from slurmlab.testing import ANY, FakeRunner, UnscriptedCommand, golden


def test_it_is_a_runner_that_records_every_argv(fake: FakeRunner) -> None:
    assert isinstance(fake, Runner)
    fake.replay(f"{VERSION}/00_sinfo_version.txt")
    assert queries.slurm_version(fake)[:2] == (22, 5)
    assert fake.history == [["sinfo", "--version"]] and fake.calls == 1
    assert fake.called(["sinfo", ...]) == [["sinfo", "--version"]]


def test_patterns_match_exact_any_regex_and_ellipsis_newest_first(fake: FakeRunner) -> None:
    fake.on(["squeue", ...], stdout="old")
    fake.on(["squeue", "-j", ANY], stdout="any")
    fake.on(["squeue", "-j", re.compile(r"\d+"), "-o", ...], stdout="regex")
    assert fake.run(["squeue", "-j", "7", "-o", "%i"]).stdout == "regex"
    assert fake.run(["squeue", "-j", "x"]).stdout == "any"
    assert fake.run(["squeue", "--me"]).stdout == "old"
    with pytest.raises(UnscriptedCommand, match="sinfo"):
        fake.run(["sinfo"])
    assert fake.unscripted == [["sinfo"]]


def test_then_gives_one_answer_per_call_and_the_last_repeats(fake: FakeRunner) -> None:
    fake.on(["squeue"], stdout="PENDING").then(stdout="RUNNING").then(stdout="COMPLETED")
    assert [fake.run(["squeue"]).stdout for _ in range(4)] == ["PENDING", "RUNNING", "COMPLETED", "COMPLETED"]


def test_replay_answers_the_recorded_argv_with_its_recorded_output(fake: FakeRunner) -> None:
    fake.replay(f"{VERSION}/l02_squeue_brief_pending.txt", f"{VERSION}/l06_squeue_brief_running.txt")
    argv = list(rec("l02_squeue_brief_pending.txt").argv or ())
    assert argv[:6] == ["squeue", "-h", "-t", "all", "-j", JOB]
    first, second = (queries.brief_states([JOB], fake)[JOB] for _ in range(2))
    assert (first.state, first.reason) == ("PENDING", "Resources")
    assert (second.state, second.nodes) == ("RUNNING", ("node1",))
    assert golden(f"{VERSION}/l06_squeue_brief_running.txt").startswith(f"{JOB}|")


def test_recorded_failures_raise_what_a_real_slurm_raises(fake: FakeRunner) -> None:
    controller_down(fake)
    with pytest.raises(ControllerDownError) as down:
        fake.run(["scontrol", "show", "job", "-d", JOB])
    assert "Unable to contact slurm controller" in str(down.value)
    fake.replay(f"{VERSION}/l17_scontrol_show_job_d_unknown_job.txt")
    with pytest.raises(JobNotFoundError):
        queries.job_detail(UNKNOWN_JOB, fake)
    res = fake.run(["scontrol", "ping"], check=False)
    assert res.returncode == 1 and "DOWN" in res.stdout
    with pytest.raises(SlurmError):
        fake.run(["scontrol", "ping"])


def test_argv_is_checked_as_the_runner_checks_it(fake: FakeRunner) -> None:
    with pytest.raises(TypeError):
        fake.run("squeue -h")  # type: ignore[arg-type]
    with pytest.raises(ValueError):
        fake.run(["squeue", "a\x00b"])


def test_arun_is_the_async_twin(fake: FakeRunner) -> None:
    fake.replay(f"{VERSION}/00_sinfo_version.txt")
    result = asyncio.run(fake.arun(["sinfo", "--version"]))
    assert result.stdout.strip() == "slurm-wlm 22.05.8"


def test_popen_replays_a_held_salloc_until_release(fake: FakeRunner) -> None:
    fake.on(["salloc", ...], reply=pending_salloc())
    proc = fake.popen(["salloc", "--no-shell", "--gpus=2"])
    assert proc.stderr is not None
    assert proc.stderr.readline() == f"salloc: Pending job allocation {JOB}\n"
    assert proc.stderr.readline().endswith("queued and waiting for resources\n")
    assert proc.poll() is None
    assert fake.release() == 1
    assert proc.stderr.read() == rec("l05_salloc_granted.txt").stderr
    assert proc.wait(timeout=10) == 0


def test_popen_answers_sigint_to_its_group_as_a_pending_salloc(fake: FakeRunner) -> None:
    fake.on(["salloc", ...], reply=pending_salloc())
    proc = fake.popen(["salloc", "--no-shell", "--gpus=2"])
    assert proc.stderr is not None
    proc.stderr.readline()
    proc.stderr.readline()
    os.killpg(proc.pid, signal.SIGINT)  # as Allocation.cancel withdraws a pending salloc
    assert proc.stderr.read() == "salloc: Job aborted due to signal\n"
    assert proc.wait(timeout=10) == rec("l14_salloc_pending_interrupted.txt").returncode


def test_the_fixture_makes_it_the_process_wide_runner(fake_runner: FakeRunner) -> None:
    assert get_runner() is fake_runner
    assert fake_runner.slurm_conf and not os.path.exists(fake_runner.slurm_conf)
