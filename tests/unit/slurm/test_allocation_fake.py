"""The Allocation state machine on recorded Slurm 22.05 output (FakeRunner): submit → pending with its
reason → running → ended; cancel while pending and while running; attach; errors. No Slurm runs."""

from __future__ import annotations

import time
from collections.abc import Callable

import pytest
from fake_slurm import (
    JOB,
    NAME,
    SALLOC,
    UNKNOWN_JOB,
    cluster,
    controller_down,
    granted_salloc,
    job_in,
    pending_salloc,
    rec,
)

from slurmlab.errors import AllocationError
from slurmlab.slurm.allocation import Allocation
from slurmlab.slurm.poller import JobPoller
from slurmlab.testing import FakeRunner, recorded


def _until(check: Callable[[], object], seconds: float = 5.0) -> None:
    deadline = time.monotonic() + seconds
    while not check():
        assert time.monotonic() < deadline, "condition not reached"
        time.sleep(0.01)


def _submit(fake: FakeRunner, poller: JobPoller, *, validate: bool = True) -> Allocation:
    return Allocation.submit(
        ["--gpus=2", "-t", "10"],
        runner=fake,
        poller=poller,
        name=NAME,
        release_at_exit=False,
        validate=validate,
    )


def test_submit_pends_with_slurms_reason_then_runs_on_the_granted_gpus(
    fake: FakeRunner, poller: JobPoller
) -> None:
    cluster(fake)
    job_in(fake, "pending")
    fake.on(SALLOC, reply=pending_salloc())
    alloc = _submit(fake, poller)  # validated against the recorded nodes and partitions
    assert (alloc.job_id, alloc.state) == (JOB, "PENDING")
    salloc = fake.called(SALLOC)[0]
    assert "--gpus=2" in salloc and any(a.startswith("--comment=slurmlab:") for a in salloc)
    _until(lambda: alloc.reason == "Resources")
    with pytest.raises(TimeoutError, match="PENDING"):
        alloc.wait(timeout=0.05)

    job_in(fake, "running")
    fake.release()  # salloc: "Granted job allocation 19"
    alloc.wait(timeout=5)
    assert alloc.running and alloc.nodes == ["node1"]
    gpus = rec("l06_scontrol_show_job_d_running.txt").stdout
    assert "IDX:" in gpus and sum(len(v) for v in alloc.gpus.values()) == 2
    assert f"allocation {JOB}: RUNNING" in alloc.summary()

    alloc.cancel()
    job_in(fake, "cancelled")  # after scancel, as on the controller
    assert ["scancel", JOB] in fake.history
    alloc.wait("ENDED", timeout=5)
    assert alloc.state == "CANCELLED" and alloc.ended


def test_granted_at_once_is_running_before_the_first_poll(fake: FakeRunner, poller: JobPoller) -> None:
    cluster(fake)
    job_in(fake, "running")
    fake.on(SALLOC, reply=granted_salloc())
    alloc = _submit(fake, poller, validate=False)
    alloc.wait(timeout=5)
    assert alloc.job is not None and alloc.nodes == ["node1"]
    assert not fake.unscripted


def test_cancel_while_pending_withdraws_salloc_with_sigint_and_scancels(
    fake: FakeRunner, poller: JobPoller
) -> None:
    cluster(fake)
    job_in(fake, "pending")
    fake.on(SALLOC, reply=pending_salloc())
    alloc = _submit(fake, poller, validate=False)
    _until(lambda: alloc.reason == "Resources")
    alloc.cancel()
    job_in(fake, "cancelled")  # after scancel, as on the controller
    assert (
        alloc._salloc is not None
        and alloc._salloc.returncode == rec("l14_salloc_pending_interrupted.txt").returncode
    )
    assert ["scancel", JOB] in fake.history
    _until(lambda: "salloc: Job aborted due to signal" in alloc.salloc_messages)
    alloc.wait("ENDED", timeout=5)
    assert alloc.state == "CANCELLED"


def test_a_request_slurm_refuses_raises_with_slurms_own_words(fake: FakeRunner, poller: JobPoller) -> None:
    refused = recorded("26.05/e14_salloc_gres_and_gpus_per_node.txt")
    fake.on(SALLOC, reply=refused)
    with pytest.raises(AllocationError) as info:
        Allocation.submit(
            ["--gres=gpu:1", "--gpus-per-node=1"],
            runner=fake,
            poller=poller,
            release_at_exit=False,
            validate=False,
        )
    words = refused.stderr.strip().split(": ", 2)[-1]  # "salloc: fatal: <Slurm's words>"
    assert words in str(info.value)
    assert not fake.called(["squeue", ...])  # no job came out: nothing to watch


def test_attach_follows_a_running_job(fake: FakeRunner, poller: JobPoller) -> None:
    cluster(fake)
    job_in(fake, "running")
    alloc = Allocation.attach(JOB, runner=fake, poller=poller)
    alloc.wait(timeout=5)
    assert alloc.nodes == ["node1"] and not alloc.release_at_exit
    alloc.forget()


def test_attach_to_a_job_the_controller_does_not_know_is_gone(fake: FakeRunner, poller: JobPoller) -> None:
    cluster(fake)
    fake.replay("22.05/l16_squeue_brief_unknown_job.txt", "22.05/l17_scontrol_show_job_d_unknown_job.txt")
    alloc = Allocation.attach(UNKNOWN_JOB, runner=fake, poller=poller)
    _until(lambda: alloc.state == "GONE")
    with pytest.raises(AllocationError, match="ended"):
        alloc.wait(timeout=1)


def test_a_stopped_controller_is_reported_then_clears(fake: FakeRunner, poller: JobPoller) -> None:
    cluster(fake)
    job_in(fake, "running")
    alloc = Allocation.attach(JOB, runner=fake, poller=poller)
    alloc.wait(timeout=5)
    controller_down(fake)
    _until(lambda: alloc.error is not None)
    assert "not responding" in (alloc.error or "") and alloc.state == "RUNNING"
    job_in(fake, "running")
    _until(lambda: alloc.error is None)
    assert alloc.running
    alloc.forget()


def test_a_step_streams_what_srun_printed(fake: FakeRunner, poller: JobPoller) -> None:
    cluster(fake)
    job_in(fake, "running")
    alloc = Allocation.attach(JOB, runner=fake, poller=poller)
    alloc.wait(timeout=5)
    seen: list[tuple[str, str]] = []
    result = alloc.srun(["hostname"], on_output=lambda stream, line: seen.append((stream, line)))
    assert result.returncode == 0 and seen == [("stdout", "vm")]
    assert fake.called(["srun", ...]) == [["srun", f"--jobid={JOB}", "--overlap", "hostname"]]
    alloc.forget()


def test_a_replayed_allocation_starts_no_guardian(
    fake: FakeRunner, poller: JobPoller, monkeypatch: pytest.MonkeyPatch
) -> None:
    # a guardian process would outlive the test and try to cancel a recorded job on no cluster
    from slurmlab.slurm.allocation import release as allocation_release

    def no_guardian() -> None:
        raise AssertionError("a FakeRunner allocation must not start the guardian")

    monkeypatch.setattr(allocation_release, "get_guardian", no_guardian)
    cluster(fake)
    job_in(fake, "running")
    fake.on(SALLOC, reply=granted_salloc())
    alloc = Allocation.submit(
        ["--gpus=2", "-t", "10"], runner=fake, poller=poller, name=NAME
    )  # released at exit
    alloc.wait(timeout=5)
    alloc.cancel()
    assert ["scancel", JOB] in fake.history


def test_leaving_a_with_block_releases_the_allocation_and_its_state_says_so(
    fake: FakeRunner, poller: JobPoller
) -> None:
    cluster(fake)
    job_in(fake, "running")
    fake.on(SALLOC, reply=granted_salloc())
    with _submit(fake, poller, validate=False) as alloc:
        alloc.wait(timeout=5)
        assert alloc.running
    assert ["scancel", JOB] in fake.history
    # at once, not at the next poll: Slurm's record of the job says CANCELLED from the moment scancel returns
    assert alloc.state == "CANCELLED" and alloc.ended and not alloc.running
    job_in(fake, "cancelled")
    alloc.wait("ENDED", timeout=5)
    assert alloc.state == "CANCELLED"
