"""A down controller is not an empty queue (Slurm 24.11+).

With slurmctld down, 24.11 and 26.05 ``scontrol --json show job -d [ID]`` exit 0 with ``"jobs": []`` (recorded:
``l24_scontrol_json_show_job_d_controller_down.json``), the very answer of an empty queue or an unknown id. Such
an answer is believed only after ``scontrol ping`` finds the controller up; otherwise the user is told the
controller does not answer, never that the job ended. A non-empty answer costs no ping.
"""

from __future__ import annotations

import asyncio
import time
from collections.abc import Callable

import pytest
from fake_slurm import golden_with

from slurmlab.errors import ControllerDownError, JobNotFoundError, MungeError
from slurmlab.slurm.allocation import Allocation
from slurmlab.slurm.job_queries import alist_jobs, job_detail, list_jobs
from slurmlab.slurm.poller import JobPoller, JobUpdate
from slurmlab.testing import FakeRunner, recorded

# the versions whose JSON job query answers a down controller with exit 0 and no jobs
SILENT = [
    v
    for v in golden_with("l24_scontrol_json_show_job_d_controller_down.json")
    if recorded(f"{v}/l24_scontrol_json_show_job_d_controller_down.json").returncode == 0
]
PING = ["scontrol", "ping"]
SHOW_JOB = ["scontrol", "--json", "show", "job", "-d"]


def test_the_recordings_hold_the_silent_answer() -> None:
    # so that the tests below cannot pass on an empty parameter list
    assert {"24.11", "26.05"} <= set(SILENT)


def _job_id(version: str) -> str:
    """The job that was running when the controller was stopped in that recording."""
    argv = recorded(f"{version}/l19_squeue_brief_controller_down.txt").argv
    assert argv is not None
    return argv[argv.index("-j") + 1]


def _silent(fake: FakeRunner, version: str, *, ping: str) -> str:
    """slurmctld as recorded when down: the JSON job queries print no jobs; ``ping`` is the ping's file."""
    empty = recorded(f"{version}/l24_scontrol_json_show_job_d_controller_down.json")
    jid = _job_id(version)
    fake.replay(
        f"{version}/00_sinfo_version.txt",
        f"{version}/l24_scontrol_json_show_job_d_controller_down.json",
        f"{version}/{ping}",
        f"{version}/l19_squeue_brief_controller_down.txt",
    )
    fake.on([*SHOW_JOB, jid], reply=empty)
    return jid


def _assert_down(exc: BaseException) -> None:
    text = str(exc)
    assert isinstance(exc, ControllerDownError) and not isinstance(exc, JobNotFoundError)
    # what was wrong (the controller, in Slurm's own words) and what to do
    assert "the Slurm controller is not responding" in text and "printed no jobs" in text
    assert "is DOWN" in text
    assert exc.hint is not None and "scontrol ping" in exc.hint and "slurmlab sandbox status" in exc.hint


@pytest.mark.parametrize("version", SILENT)
def test_no_jobs_from_a_down_controller_is_not_an_unknown_job(fake: FakeRunner, version: str) -> None:
    jid = _silent(fake, version, ping="l21_scontrol_ping_controller_down.txt")
    with pytest.raises(ControllerDownError) as info:
        job_detail(jid, fake)
    _assert_down(info.value)
    assert f"scontrol --json show job -d {jid}" in str(info.value)
    assert len(fake.called(PING)) == 1


@pytest.mark.parametrize("version", SILENT)
@pytest.mark.parametrize("how", ["mine", "all users", "async"])
def test_no_jobs_from_a_down_controller_is_not_an_empty_queue(
    fake: FakeRunner, version: str, how: str
) -> None:
    _silent(fake, version, ping="l21_scontrol_ping_controller_down.txt")
    with pytest.raises(ControllerDownError) as info:
        if how == "async":
            asyncio.run(alist_jobs(fake))
        else:
            list_jobs(fake, all_users=how == "all users")
    _assert_down(info.value)
    assert len(fake.called(PING)) == 1


@pytest.mark.parametrize("version", SILENT)
def test_no_jobs_from_a_live_controller_stands(fake: FakeRunner, version: str) -> None:
    jid = _silent(fake, version, ping="s23_scontrol_ping.txt")
    fake.replay(f"{version}/s22_squeue_owners.txt")
    with pytest.raises(JobNotFoundError, match=f"job {jid} is not known to the controller"):
        job_detail(jid, fake)
    assert list(list_jobs(fake)) == []
    assert list(asyncio.run(alist_jobs(fake, all_users=True))) == []
    assert len(fake.called(PING)) == 3


@pytest.mark.parametrize("version", golden_with("s05_scontrol_json_show_job_d.json", "24.11", "26.05"))
def test_an_answer_with_jobs_costs_no_ping(fake: FakeRunner, version: str) -> None:
    fake.replay(f"{version}/00_sinfo_version.txt", f"{version}/s05_scontrol_json_show_job_d.json")
    jobs = list_jobs(fake, all_users=True, active_only=False)
    assert jobs
    some = recorded(f"{version}/s05_scontrol_json_show_job_d.json")
    fake.on([*SHOW_JOB, str(jobs[0].job_id)], reply=some)
    assert job_detail(jobs[0].job_id, fake).job_id == jobs[0].job_id
    assert fake.called(PING) == []


def test_the_text_form_fails_by_itself_and_costs_no_ping(fake: FakeRunner) -> None:
    # 22.05 has no scontrol --json; its text form exits 1 with "Unable to contact slurm controller"
    fake.replay(
        "22.05/00_sinfo_version.txt",
        "22.05/l20_scontrol_show_job_d_controller_down.txt",
        "22.05/l23_scontrol_show_job_d_controller_down.txt",
    )
    with pytest.raises(ControllerDownError, match="not responding"):
        job_detail(_job_id("22.05"), fake)
    with pytest.raises(ControllerDownError, match="not responding"):
        list_jobs(fake, all_users=True)
    assert fake.called(PING) == []


@pytest.mark.parametrize("version", SILENT)
def test_a_backup_controller_that_is_up_answers(fake: FakeRunner, version: str) -> None:
    # hand-written, in scontrol ping's form: the primary is down, the backup took over and answers queries
    jid = _silent(fake, version, ping="l21_scontrol_ping_controller_down.txt")
    fake.on(
        PING, stdout="Slurmctld(primary) at ctl1 is DOWN\nSlurmctld(backup) at ctl2 is UP\n", returncode=1
    )
    with pytest.raises(JobNotFoundError):
        job_detail(jid, fake)


@pytest.mark.parametrize("version", SILENT)
def test_a_ping_refused_by_munge_says_munge(fake: FakeRunner, version: str) -> None:
    jid = _silent(fake, version, ping="l21_scontrol_ping_controller_down.txt")
    # hand-written, in Slurm's words for a stopped munged
    fake.on(
        PING,
        stderr='scontrol: error: Munge encode failed: Failed to connect to "/run/munge/munge.socket.2": '
        "Connection refused\nslurm_ping error: Protocol authentication error\n",
        returncode=1,
    )
    with pytest.raises(MungeError) as info:
        job_detail(jid, fake)
    assert info.value.hint is not None and "munged" in info.value.hint


# ---- the callers that once read "no jobs" as "the job ended" --------------------------------------
def _until(check: Callable[[], object], seconds: float = 5.0) -> None:
    deadline = time.monotonic() + seconds
    while not check():
        assert time.monotonic() < deadline, "condition not reached"
        time.sleep(0.01)


@pytest.mark.parametrize("version", SILENT)
@pytest.mark.parametrize("ping", ["l21_scontrol_ping_controller_down.txt", "s23_scontrol_ping.txt"])
def test_the_poller_says_gone_only_when_the_controller_answered(
    fake: FakeRunner, version: str, ping: str
) -> None:
    # the controller died between squeue (which no longer listed the job) and scontrol
    jid = _silent(fake, version, ping=ping)
    poller = JobPoller(fake, interval=0.02, fetch_brief=lambda ids, runner: {})
    updates: list[JobUpdate] = []
    try:
        poller.watch(jid, updates.append)
        _until(lambda: updates)
    finally:
        poller.stop()
    if ping.startswith("s23"):
        assert updates[0].gone and updates[0].error is None
    else:
        assert not updates[0].gone
        assert isinstance(updates[0].error, ControllerDownError)
        _assert_down(updates[0].error)


@pytest.mark.parametrize("version", SILENT)
@pytest.mark.parametrize("ping", ["l21_scontrol_ping_controller_down.txt", "s23_scontrol_ping.txt"])
def test_a_refresh_ends_an_allocation_only_when_the_controller_answered(
    fake: FakeRunner, poller: JobPoller, version: str, ping: str
) -> None:
    jid = _silent(fake, version, ping=ping)
    alloc = Allocation.attach(jid, runner=fake, poller=poller)
    try:
        if ping.startswith("s23"):
            alloc.refresh()
            assert alloc.state == "GONE"
        else:
            with pytest.raises(ControllerDownError) as info:
                alloc.refresh()
            _assert_down(info.value)
            assert alloc.state != "GONE" and not alloc.ended
    finally:
        alloc.forget()
