"""``why()`` of a pending allocation gathered from what a real Slurm 22.05 printed (the doctor's recording: job 16
waits for 8 GPUs behind jobs 14 and 15, job 17 is held): the reason in words, the blockers, the changes
`sbatch --test-only` says start sooner; and ``resubmit`` cancelling the old job only once the new one was
accepted.

Issue 25, point 8 (``tests/data/slurm/22.05/limits``, each scene every command ``why()`` ran, as a real Slurm
answered it): with the user at the QOS GPU cap, ``--test-only`` would start a shorter time or fewer GPUs at
once, yet the cap holds them as it holds the job: they are not offered, the limit is named with the usage, the
cap and what lifts it, and the change offered (QOS debug) ran when taken; an association's MaxJobs likewise;
with slurmdbd down nothing is offered blind; without accounting only the partitions' limits count."""

from __future__ import annotations

from collections.abc import Iterator
from types import SimpleNamespace
from typing import Any

import pytest

from slurmlab.core.diagnosis.findings import Verdict
from slurmlab.errors import AllocationError, ControllerDownError
from slurmlab.slurm.allocation import Allocation
from slurmlab.slurm.allocation.pending import why
from slurmlab.slurm.allocation.switch import resubmit
from slurmlab.testing import FakeRunner, recorded
from tests.unit.core.diagnosis.fake_cluster import cluster
from tests.unit.core.diagnosis.limit_scenes import LIMITS, scene_job, scene_names, scene_running


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
    assert (
        pending is not None
        and "(Resources)" in pending.evidence
        and "expects it to start" in pending.details[0]
    )
    held = got.finding("job.blockers")
    assert held is not None and {d.split()[1] for d in held.details} == {"14", "15"}
    assert all(" ends " in d for d in held.details)
    assert got.sooner and got.sooner[0].variant.kind == "gpus" and "--gpus=4" in got.sooner[0].variant.options
    assert all(a.answer.starts is not None for a in got.sooner)
    assert any(a.answer.refused for a in got.rest)  # the refused variants are kept, with Slurm's words
    assert "would start" in got.text() and "slurmlab-why" in got._repr_html_()
    # the limits: accounting asked once, found off (that sandbox kept none), and nothing more asked for them
    assert [argv[:4] for argv in fake.history if argv[0] == "sacctmgr"] == [
        ["sacctmgr", "-nP", "show", "qos"]
    ]
    assert not any(argv[:2] == ["squeue", "-h"] and "-r" in argv for argv in fake.history)


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


def _scene(prefix: str) -> FakeRunner:
    """A FakeRunner answering every command ``why()`` ran in one recorded scene, as Slurm answered it."""
    fake = FakeRunner()
    fake.replay(*(f"{LIMITS}/{n}" for n in scene_names(prefix)))
    return fake


def _recorded_options(prefix: str) -> list[list[str]]:
    """The options of each `sbatch --test-only … --wrap=true` the scene ran, in order."""
    return [
        list(args[args.index("/dev/null") + 1 : -1])
        for args in scene_names(prefix).values()
        if args[:2] == ("sbatch", "--test-only")
    ]


def _test_only_calls(fake: FakeRunner) -> list[list[str]]:
    return [a for a in fake.history if a[:2] == ["sbatch", "--test-only"]]


def test_at_the_qos_gpu_cap_only_a_change_that_lifts_the_cap_is_offered() -> None:
    with _scene("q") as fake:
        got = why(scene_job("q"), fake)
    # the limit Slurm names is the cause: said right after the reason, before what holds the GPUs
    assert [f.check for f in got.findings] == ["job.pending", "job.limit", "job.blockers", "job.alternatives"]
    limit = got.finding("job.limit")
    assert limit is not None, got.text()
    assert limit.evidence == "QOS normal limit MaxTRESPU: 4 GPU(s) in use of 4 GPU(s) allowed"
    assert "this job asks for 2 GPU(s)" in limit.details
    # which change lifts it: ending the user's own job (4 GPUs), or QOS debug (its own cap, none used there)
    first = scene_running("q")
    assert (
        limit.fix.startswith(f"lifts it: end your job {first}, 4 GPU(s), ends ")
        and f"`%scancel {first}`" in limit.fix
    )
    assert "QOS debug instead of normal (`%salloc --account=research" in limit.fix
    # --test-only would start a shorter time, or 1 GPU, at once (qx01): the cap holds them, they are not offered
    assert [a.variant.kind for a in got.sooner] == ["qos"]
    assert [list(got.sooner[0].variant.options)] == _recorded_options("q")
    held = {a.variant.kind: a for a in got.rest if a.held_by}
    assert {"time", "gpus"} <= set(held) and "account" in held
    assert (
        held["time"]
        .line()
        .endswith(
            "not offered: it would wait for QOS normal MaxTRESPU (per user): 4 GPU(s) "
            "in use + 2 GPU(s) asked > 4 GPU(s) allowed"
        )
    )
    assert len(_test_only_calls(fake)) == 1  # a change the limits hold costs no --test-only call
    assert recorded(f"{LIMITS}/qt01_taken_state.txt").stdout.startswith("RUNNING")  # taken, it ran
    alternatives = got.finding("job.alternatives")
    assert alternatives is not None and "sooner means: before its limit can lift" in alternatives.details


def test_an_associations_max_jobs_is_lifted_by_another_qos_or_account() -> None:
    with _scene("a") as fake:
        got = why(scene_job("a"), fake)
    limit = got.finding("job.limit")
    assert limit is not None, got.text()
    assert limit.evidence == "association research/root limit MaxJobs: 1 job(s) in use of 1 job(s) allowed"
    assert (
        f"end your job {scene_running('a')}" in limit.fix
        and "account teaching instead of research" in limit.fix
    )
    assert [(a.variant.kind, a.variant.qos, a.variant.account) for a in got.sooner] == [
        ("qos", "debug", None),
        ("account", "normal", "teaching"),
        ("account", "normal", "root"),
    ]
    assert [list(a.variant.options) for a in got.sooner] == _recorded_options("a")
    assert all(a.held_by for a in got.rest)  # every other change waits for the same MaxJobs
    for n in ("at01", "at02", "at03"):  # each one offered was taken for real and ran
        assert recorded(f"{LIMITS}/{n}_taken_state.txt").stdout.startswith("RUNNING")


def test_with_the_accounting_database_down_nothing_is_offered_blind() -> None:
    with _scene("d") as fake:
        got = why(scene_job("d"), fake)
    limit = got.finding("job.limit")
    assert (
        limit is not None
        and "usage and cap unknown" in limit.evidence
        and "Connection refused" in limit.evidence
    )
    assert "QOSMaxGRESPerUser" in limit.evidence and "\n" not in limit.evidence
    assert got.sooner == () and got.rest and all("limits could not be read" in a.held_by[0] for a in got.rest)
    assert _test_only_calls(fake) == []
    alternatives = got.finding("job.alternatives")
    assert alternatives is not None and "could not be checked" in alternatives.details[0]


def test_without_accounting_a_change_is_offered_only_if_it_starts_before_the_job() -> None:
    with _scene("o") as fake:
        got = why(scene_job("o"), fake)
    assert got.finding("job.limit") is None
    # --test-only answered every change, each after the job's own expected start: waiting is the fastest
    assert got.sooner == () and len(got.rest) == 3 and all(a.answer.starts for a in got.rest)
    alternatives = got.finding("job.alternatives")
    assert alternatives is not None and alternatives.verdict is Verdict.OK
    assert "sooner means: before the job's own expected start" in alternatives.details


def test_a_down_controller_is_one_clear_error() -> None:
    down = cluster(controller_up=False)
    down.on(
        ["scontrol", "show", "job", "-d", "16"],
        stderr="slurm_load_jobs error: Unable to contact slurm controller (connect failure)\n",
        returncode=1,
    )
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
    return _Old(
        job_id="16",
        runner=fake,
        poller=None,
        release_at_exit=False,
        ended=False,
        state="PENDING",
        cancelled=False,
        replaced_by=None,
    )


def test_resubmit_switches_only_once_the_new_job_is_accepted(
    fake: FakeRunner, monkeypatch: pytest.MonkeyPatch
) -> None:
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
    assert resubmit(old2, best) is new and asked[-1] == list(best.variant.options)
    # the request's own --signal, --gpu-bind and name go with the switch: the job record does not hold them
    named: list[dict[str, object]] = []
    monkeypatch.setattr(Allocation, "submit", lambda options, **kw: named.append(kw) or accepted(options))
    old4 = _old(fake)
    old4.request_argv, old4.name = (
        ("--gpus=2", "--signal=USR1@60", "--gpu-bind", "closest", "-t", "20"),
        "train",
    )
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


def test_switching_to_another_qos_drops_the_requests_own(monkeypatch: pytest.MonkeyPatch) -> None:
    """The request's own ``-q normal`` would come last and win over the change's ``--qos=debug``: the switch
    would then wait for the very cap it was to avoid."""
    with _scene("q") as fake:
        best = why(scene_job("q"), fake).sooner[0]
    asked: list[list[str]] = []
    monkeypatch.setattr(Allocation, "submit", lambda options, **kw: asked.append(list(options)) or object())
    old = _old(fake)
    old.request_argv = ("--gpus=2", "-q", "normal", "-A", "research", "--signal=USR1@60", "-t", "10")
    resubmit(old, best)
    assert asked[-1] == [*best.variant.options, "--signal=USR1@60"]
    assert asked[-1].count("--qos=debug") == 1 and "normal" not in asked[-1]


def test_a_limit_slurm_names_but_slurmlab_cannot_reproduce_offers_nothing() -> None:
    """A TRES-minutes budget (QOSGrpGRESRunMinutes) is not in the numbers slurmlab reads: a change might wait
    for it as the job does, so none is offered, and none costs a --test-only call."""
    from dataclasses import replace

    from slurmlab.core.slurm.parse_text import parse_scontrol_jobs
    from slurmlab.slurm.pending_alternatives import pending_alternatives

    jid = scene_job("q")
    with _scene("q") as fake:
        job = parse_scontrol_jobs(fake.run(["scontrol", "show", "job", "-d", jid]).stdout)[0]
        sooner, rest = pending_alternatives(replace(job, reason="QOSGrpGRESRunMinutes"), fake)
    assert sooner == [] and rest and all("cannot check" in a.held_by[0] for a in rest)
    assert _test_only_calls(fake) == []
