"""``why()`` of a pending allocation gathered from what a real Slurm 22.05 printed (the doctor's recording: job 16
waits for 8 GPUs behind jobs 14 and 15, job 17 is held): the reason in words, the blockers, the limit with
usage and cap (or the names alone without accounting), the changes `sbatch --test-only` says start sooner; and
``resubmit`` cancelling the old job only once the new one was accepted."""

from __future__ import annotations

from collections.abc import Iterator
from types import SimpleNamespace
from typing import Any

import pytest

from slurmlab.core.diagnosis.findings import Verdict
from slurmlab.errors import AllocationError, ControllerDownError
from slurmlab.slurm import allocation_why
from slurmlab.slurm.allocation import Allocation
from slurmlab.slurm.allocation_why import resubmit, why
from slurmlab.testing import ANY, FakeRunner
from tests.unit.core.diagnosis.fake_cluster import cluster, read


@pytest.fixture
def fake() -> Iterator[FakeRunner]:
    runner = cluster()
    yield runner
    runner.close()


def test_a_job_pending_for_resources_says_why_who_holds_it_and_what_starts_sooner(fake: FakeRunner) -> None:
    got = why("16", fake)
    assert got.pending and got.job_id == "16"
    assert [f.check for f in got.findings] == ["job.pending", "job.blockers", "job.alternatives"]
    pending = got.finding("job.pending")
    assert pending is not None and "(Resources)" in pending.evidence and "expects it to start" in pending.details[0]
    held = got.finding("job.blockers")
    assert held is not None and {d.split()[1] for d in held.details} == {"14", "15"}
    assert all(" ends " in d for d in held.details)
    assert got.sooner and got.sooner[0].variant.kind == "gpus" and "--gpus=4" in got.sooner[0].variant.options
    assert all(a.answer.starts is not None for a in got.sooner)
    assert any(a.answer.refused for a in got.rest)  # the refused variants are kept, with Slurm's words
    assert "would start" in got.text() and "slurmlab-why" in got._repr_html_()
    assert not any(argv[0] == "sacctmgr" for argv in fake.history)  # no limit: accounting is not asked


def test_without_alternatives_no_test_only_runs(fake: FakeRunner) -> None:
    got = why("16", fake, alternatives=False)
    assert got.sooner == () and got.finding("job.alternatives") is None
    assert not any(argv[:2] == ["sbatch", "--test-only"] for argv in fake.history)


def test_a_held_job_says_scontrol_release_and_tries_nothing_else(fake: FakeRunner) -> None:
    got = why("17", fake)
    held = got.finding("job.held")
    assert held is not None and held.verdict is Verdict.FAIL and "`scontrol release 17`" in held.fix
    assert [f.check for f in got.findings] == ["job.held"]
    assert not any(argv[0] == "sbatch" for argv in fake.history)


def test_a_running_job_no_longer_waits(fake: FakeRunner) -> None:
    got = why("14", fake)
    assert not got.pending and got.state == "RUNNING" and got.findings[0].check == "job.state"


def _over_limit(fake: FakeRunner, reason: str = "QOSMaxGRESPerUser") -> None:
    text = read("show_job_d_pending.txt").replace("Reason=Resources", f"Reason={reason}")
    fake.on(["scontrol", "show", "job", "-d", "16"], stdout=text)
    fake.on(["squeue", "-h", "-j", "16", "-o", "%u|%a|%q"], stdout="alice|research|normal\n")
    fake.on(["squeue", "-h", "-t", "RUNNING,COMPLETING", "-o", "%i|%u|%a|%q"],
            stdout="14|alice|research|normal\n15|bob|research|normal\ngarbage line\n")


def test_a_qos_limit_is_named_with_the_users_usage_and_the_cap(fake: FakeRunner) -> None:
    _over_limit(fake)
    fake.on(["sacctmgr", "-nP", "show", "qos", "where", "name=normal", ANY], stdout="normal||||gres/gpu=4||||\n")
    got = why("16", fake, alternatives=False)
    limit = got.finding("job.limit")
    assert limit is not None, got.text()
    # job 14 (alice's) holds 4 GPUs; job 15 is bob's and does not count towards alice's cap
    assert limit.evidence == "QOS normal limit MaxTRESPU: 4 GPU(s) in use of 4 GPU(s) allowed"
    assert "this job asks for 8 GPU(s)" in limit.details and "can never start" in limit.fix


@pytest.mark.parametrize(("stdout", "stderr", "code", "said"), [
    ("", "sacctmgr: error: Problem talking to the database: Connection refused\n", 1, "Connection refused"),
    ("normal|gres/gpu=4\n", "", 0, "sacctmgr output"),  # garbage of another width
])
def test_without_accounting_the_limit_is_named_alone(fake: FakeRunner, stdout: str, stderr: str, code: int,
                                                     said: str) -> None:
    _over_limit(fake)
    fake.on(["sacctmgr", ...], stdout=stdout, stderr=stderr, returncode=code)
    limit = why("16", fake, alternatives=False).finding("job.limit")
    assert limit is not None and "QOSMaxGRESPerUser" in limit.evidence and "usage and cap unknown" in limit.evidence
    assert said in limit.evidence and "\n" not in limit.evidence


def test_a_down_controller_is_one_clear_error() -> None:
    down = cluster(controller_up=False)
    down.on(["scontrol", "show", "job", "-d", "16"], stderr="slurm_load_jobs error: Unable to contact slurm "
            "controller (connect failure)\n", returncode=1)
    try:
        with pytest.raises(ControllerDownError):
            why("16", down)
    finally:
        down.close()


# ---- resubmit: the new request first, the old cancelled only once Slurm accepted it ----------------------------

class _Old(SimpleNamespace):
    def cancel(self) -> None:
        self.cancelled = True


def _old(fake: FakeRunner) -> Any:
    return _Old(job_id="16", runner=fake, poller=None, release_at_exit=False, ended=False, state="PENDING",
                cancelled=False, replaced_by=None)


def test_resubmit_switches_only_once_the_new_job_is_accepted(fake: FakeRunner,
                                                             monkeypatch: pytest.MonkeyPatch) -> None:
    asked: list[list[str]] = []
    new = object()

    def accepted(options: list[str], **kw: object) -> object:
        asked.append(options)
        return new

    monkeypatch.setattr(Allocation, "submit", accepted)
    old = _old(fake)
    assert resubmit(old, gpus=4, minutes=10) is new and old.cancelled and old.replaced_by is new
    assert "--gpus=4" in asked[0] and asked[0][asked[0].index("-t") + 1] == "10" and "-p" in asked[0]
    best = why("16", fake).sooner[0]
    old2 = _old(fake)
    assert allocation_why.resubmit(old2, best) is new and asked[-1] == list(best.variant.options)
    # the request's own --signal, --gpu-bind and name go with the switch: the job record does not hold them
    named: list[dict[str, object]] = []
    monkeypatch.setattr(Allocation, "submit", lambda options, **kw: named.append(kw) or accepted(options))
    old4 = _old(fake)
    old4.request_argv, old4.name = ("--gpus=2", "--signal=USR1@60", "--gpu-bind", "closest", "-t", "20"), "train"
    assert resubmit(old4, best) is new
    assert asked[-1] == [*best.variant.options, "--signal=USR1@60", "--gpu-bind", "closest"]
    assert named[-1]["name"] == "train"
    monkeypatch.setattr(Allocation, "submit", accepted)

    def refused(options: list[str], **kw: object) -> object:
        raise AllocationError("salloc: error: Job submit/allocate failed: Invalid qos specification")

    monkeypatch.setattr(Allocation, "submit", refused)
    old3 = _old(fake)
    with pytest.raises(AllocationError, match="Invalid qos"):
        resubmit(old3, best)
    assert not old3.cancelled and old3.replaced_by is None


def test_resubmit_needs_a_change_and_a_live_allocation(fake: FakeRunner) -> None:
    with pytest.raises(AllocationError, match="needs an alternative or a change"):
        resubmit(_old(fake))
    ended = _old(fake)
    ended.ended, ended.state = True, "CANCELLED"
    with pytest.raises(AllocationError, match="has ended"):
        resubmit(ended, gpus=1)
