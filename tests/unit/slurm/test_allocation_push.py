"""Issue 27, point 1: an allocation that lives with its kernel is held by its salloc, which hears Slurm's pushes
(grant, revocation, time limit, node failure); the controller is not polled for it, so an idle RUNNING allocation
with its panel costs Slurm at most one call a minute.

The salloc lines are what a held salloc printed on the sandbox (``data/held_salloc/<version>/``, recorded with
``salloc … cat`` as :func:`slurmlab.slurm.allocation.salloc.holding_argv` runs it); the squeue, scontrol and sstat
answers are the same session's. The poller is driven round by round on a simulated clock (no thread), so "a
minute" takes no time: the assertions count the runner's calls.
"""

from __future__ import annotations

import json
import time
from collections import Counter
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest

from slurmlab.slurm.allocation import Allocation
from slurmlab.slurm.allocation.salloc import SallocProcess
from slurmlab.slurm.allocation.sampler import UsageSampler
from slurmlab.slurm.poller import JobPoller
from slurmlab.testing import FakeRunner, Reply, recorded

DATA = Path(__file__).parent / "data" / "held_salloc"
VERSIONS = sorted(p.name for p in DATA.iterdir() if p.is_dir())


class Clock:
    def __init__(self) -> None:
        self.now = 5000.0

    def __call__(self) -> float:
        return self.now


def _session(version: str) -> dict[str, Any]:
    session: dict[str, Any] = json.loads((DATA / version / "session.json").read_text())
    return session


def _lines(lines: list[str]) -> str:
    return "".join(f"{line}\n" for line in lines)


def _script(fake: FakeRunner, version: str, *, after: list[str] | None = None) -> dict[str, Any]:
    """The recorded session on ``fake``: the held salloc (granted at once; ``after``: what it printed once its
    pipe closed or the job was revoked), and every query's recorded answer."""
    s = _session(version)
    held = Reply(stderr=_lines(s["granted_lines"])).held(after=Reply(stderr=_lines(after or [])))
    fake.on(["salloc", ...], reply=held)
    fake.on(["scancel", ...], reply=recorded("22.05/l11_scancel.txt"))  # what scancel printed: nothing
    for call in s["calls"]:
        fake.on(call["argv"], stdout=call["stdout"], stderr=call["stderr"], returncode=call["rc"])
    return s


def _manual(p: JobPoller) -> JobPoller:
    """The poller without its thread: a poke only asks the next round to read every job; the test drives the
    rounds."""

    def poke() -> None:
        with p._lock:
            p._poll_all = True

    p.poke = poke  # type: ignore[method-assign]
    return p


def _until(check: Callable[[], object], seconds: float = 10.0) -> None:
    deadline = time.monotonic() + seconds
    while not check():
        assert time.monotonic() < deadline, "condition not reached"
        time.sleep(0.01)


@pytest.mark.parametrize("version", VERSIONS)
def test_an_idle_running_allocation_makes_at_most_one_slurm_call_a_minute(
    fake: FakeRunner, version: str
) -> None:
    _script(fake, version)
    clock = Clock()
    # the shared poller's own cadences (get_poller): a round a second, node checks every 5 s
    poller = _manual(JobPoller(fake, clock=clock))
    alloc = Allocation.submit(["--gpus=1", "-t", "10"], runner=fake, poller=poller, validate=False)
    alloc.wait(timeout=10)
    # the first round reads the new job once (its brief and detail: the panel's nodes and GPUs)
    clock.now += poller.step()
    assert alloc.running and alloc.nodes
    start, calls_at = clock.now, [(clock.now, len(fake.history))]
    while clock.now < start + 600:  # ten quiet minutes
        clock.now += poller.step()
        calls_at.append((clock.now, len(fake.history)))
    per_minute = []
    for minute in range(10):
        lo, hi = start + 60 * minute, start + 60 * (minute + 1)
        before = max((n for t, n in calls_at if t <= lo), default=calls_at[0][1])
        after = max(n for t, n in calls_at if t <= hi)
        per_minute.append(after - before)
    made = Counter(" ".join(argv[:2]) for argv in fake.history[calls_at[0][1] :])
    assert max(per_minute) <= 1, f"Slurm calls per minute of an idle allocation: {per_minute} ({made})"
    assert sum(per_minute) >= 1  # the slow check still runs: a lost push would not go unseen for ever
    assert alloc.state == "RUNNING" and alloc._salloc is not None and alloc._salloc.holding
    alloc.cancel()


@pytest.mark.parametrize("version", VERSIONS)
def test_a_scancel_from_outside_is_pushed_to_the_allocation_without_a_poll(
    fake: FakeRunner, version: str
) -> None:
    s = _session(version)
    _script(fake, version, after=s["revoked_lines"])
    clock = Clock()
    poller = _manual(JobPoller(fake, clock=clock))
    alloc = Allocation.submit(["--gpus=1", "-t", "10"], runner=fake, poller=poller, validate=False)
    alloc.wait(timeout=10)
    clock.now += poller.step()
    seen: list[str] = []
    alloc.subscribe(lambda a: seen.append(a.state))
    polls = poller.polls
    fake.release()  # the held salloc goes on: the revocation slurmctld pushed, as salloc printed it
    alloc.wait("ENDED", timeout=10)
    assert seen[0] == "CANCELLED" and poller.polls == polls  # known from salloc, before any poll
    _until(lambda: alloc._salloc is not None and alloc._salloc.returncode is not None)


def test_a_pending_held_allocation_is_read_every_round_for_its_reason_and_expected_start(
    fake: FakeRunner,
) -> None:
    """Slurm pushes a pending job's grant, not its reason or its expected start: while it pends, a held
    allocation is polled at the base rate like any job (the panel's "Expected start" within seconds), and its
    grant, pushed, is read at once with its nodes and GPUs. The recorded life of job 19 (22.05): pending for
    Resources, then granted 2 GPUs on node1."""
    from fake_slurm import JOB, job_in, pending_salloc

    fake.replay("22.05/00_sinfo_version.txt", "22.05/l07_sinfo_node_states.txt")
    job_in(fake, "pending")
    fake.on(["salloc", ...], reply=pending_salloc())  # held: pending until released, then granted
    clock = Clock()
    poller = _manual(JobPoller(fake, clock=clock))
    alloc = Allocation.submit(["--gpus=2", "-t", "10"], runner=fake, poller=poller, validate=False)
    assert alloc.state == "PENDING" and alloc.release_at_exit and poller.is_pushed(JOB)
    squeue: list[Any] = ["squeue", ..., JOB, ...]
    start = clock.now
    while clock.now < start + 10:  # ten simulated seconds: a round each second, the poller's own cadence
        clock.now += poller.step()
    assert len(fake.called(squeue)) >= 9, "a pending pushed job must be read about once a second"
    assert alloc.reason == "Resources" and alloc.state == "PENDING"

    job_in(fake, "running")
    polls = poller.polls
    fake.release()  # salloc: "Granted job allocation 19", pushed by slurmctld
    _until(lambda: alloc.state == "RUNNING")  # from the push, before any poll
    # the panel turns RUNNING with the nodes and GPU indices, read with the news (no poll round needed)
    assert alloc.nodes == ["node1"] and sum(len(g) for g in alloc.gpus.values()) == 2
    assert poller.polls == polls and not alloc.error and not fake.unscripted


def test_a_poll_that_read_the_job_pending_before_its_pushed_grant_brings_back_no_pending(
    fake: FakeRunner,
) -> None:
    """The grant reaches salloc while the poller's squeue is in flight: that round's answer (PENDING, the first
    the poller saw) is older than the push, and must not turn the panel back to PENDING; the job is read again
    at the next round, not at the slow check."""
    from fake_slurm import job_in, pending_salloc

    fake.replay("22.05/00_sinfo_version.txt", "22.05/l07_sinfo_node_states.txt")
    job_in(fake, "pending")
    fake.on(["salloc", ...], reply=pending_salloc())
    clock = Clock()
    poller = _manual(JobPoller(fake, clock=clock))
    alloc = Allocation.submit(["--gpus=2", "-t", "10"], runner=fake, poller=poller, validate=False)
    fake.release()  # granted before the poller's first answer came back
    _until(lambda: alloc.state == "RUNNING")
    seen: list[str] = []
    alloc.subscribe(lambda a: seen.append(a.state))
    clock.now += poller.step()  # its squeue and scontrol answered as the job was: pending
    assert alloc.state == "RUNNING" and "PENDING" not in seen, seen
    job_in(fake, "running")
    granted_at = read_at = clock.now
    while not alloc.gpus and clock.now < granted_at + 600:
        read_at = clock.now
        clock.now += poller.step()
    assert read_at - granted_at <= poller.interval, "the granted job was read again only at the slow check"
    assert alloc.nodes == ["node1"] and sum(len(g) for g in alloc.gpus.values()) == 2
    assert not alloc.error and not fake.unscripted


_DETAIL_DOWN = {  # what a controller that did not answer printed for the detail query, per version
    "22.05": "22.05/l20_scontrol_show_job_d_controller_down.txt",  # rc 1: "Unable to contact slurm controller"
    "24.11": "24.11/l24_scontrol_json_show_job_d_controller_down.json",  # rc 0, no job in the answer
    "26.05": "26.05/l24_scontrol_json_show_job_d_controller_down.json",
}


@pytest.mark.parametrize("version", VERSIONS)
def test_a_granted_job_is_read_again_until_its_detail_has_its_nodes_then_left_quiet(
    fake: FakeRunner, version: str
) -> None:
    """Right after the grant the panel needs the job's nodes and GPU indices, which only its detail has: when the
    first ``scontrol show job`` of the granted job fails (a controller that did not answer), the next round asks
    again instead of waiting for the five-minute check; once the detail has its nodes the job is quiet."""
    s = _script(fake, version)
    detail_argv = next(c["argv"] for c in s["calls"] if c["argv"][:1] == ["scontrol"] and "job" in c["argv"])
    good = next(c for c in s["calls"] if c["argv"] == detail_argv)
    down = recorded(_DETAIL_DOWN[version])
    fake.on(detail_argv, reply=down).then(stdout=good["stdout"], stderr=good["stderr"], returncode=good["rc"])
    fake.replay(f"{version}/l21_scontrol_ping_controller_down.txt")  # asked when the JSON answer has no job
    clock = Clock()
    poller = _manual(JobPoller(fake, clock=clock))
    alloc = Allocation.submit(["--gpus=1", "-t", "10"], runner=fake, poller=poller, validate=False)
    _until(lambda: alloc.state == "RUNNING")  # granted at once, as salloc said (no wait(): a panel's view)
    failed_at = clock.now
    clock.now += poller.step()  # the first read: the detail query finds no answer
    assert not alloc.gpus, alloc.error
    assert alloc.error is not None and "not responding" in alloc.error and not fake.unscripted
    read_at = failed_at
    while not alloc.gpus and clock.now < failed_at + 600:
        read_at = clock.now
        clock.now += poller.step()
    assert read_at - failed_at <= poller.interval, "the detail was read again only at the slow check"
    assert alloc.gpus and alloc.job is not None and alloc.job.nodes, alloc.error
    assert len(fake.called(detail_argv)) == 2
    before = len(fake.history)
    start = clock.now
    while clock.now < start + 60:
        clock.now += poller.step()
    assert len(fake.history) - before <= 1, fake.history[before:]
    alloc.cancel()


def test_an_idle_allocations_usage_sampler_asks_sstat_rarely_until_a_step_starts(
    fake: FakeRunner, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The panel's usage sampler on the sandbox, whose GPUs are files (so it reads sstat, as it did when this was
    recorded): sstat says no step runs (an idle allocation); then it asks only every idle_interval (here scaled: a
    base interval of 10 ms stands for 2 s, so 0.3 s for a minute)."""
    from slurmlab.slurm.allocation import sampler as sampler_module

    monkeypatch.setattr(
        sampler_module, "sandbox_hardware", lambda runner: object()
    )  # the sandbox's hardware file
    version = VERSIONS[0]
    s = _script(fake, version)
    poller = _manual(JobPoller(fake, clock=Clock()))
    alloc = Allocation.submit(["--gpus=1", "-t", "10"], runner=fake, poller=poller, validate=False)
    alloc.wait(timeout=10)
    sstat = [c["argv"] for c in s["calls"] if c["argv"][0] == "sstat"]
    assert sstat and "No steps running" in next(c["stderr"] for c in s["calls"] if c["argv"][0] == "sstat")
    sampler = UsageSampler(alloc, interval=0.01)  # idle: every 1.5 s; eager for 0.03 s after a start
    sampler.start()
    time.sleep(0.05)  # past the first looks
    before = len(fake.called(sstat[0]))
    time.sleep(0.6)  # two scaled minutes
    idle_calls = len(fake.called(sstat[0])) - before
    assert idle_calls <= 1, f"{idle_calls} sstat calls in two scaled minutes of an idle allocation"
    alloc._notify()  # what a step's start says (Allocation.srun / launch): the sampler looks again at once
    _until(lambda: len(fake.called(sstat[0])) > before + idle_calls)
    sampler.stop()
    alloc.cancel()


@pytest.mark.parametrize("version", VERSIONS)
@pytest.mark.parametrize(
    ("part", "kinds"),
    [
        ("granted_later_lines", ["granted"]),
        ("revoked_lines", ["revoked"]),
        ("timeout_lines", ["timeout"]),
    ],
)
def test_each_push_a_held_salloc_printed_is_read_as_what_it_says(
    fake: FakeRunner, version: str, part: str, kinds: list[str]
) -> None:
    s = _session(version)
    before = s["pending_lines"] if part == "granted_later_lines" else s["granted_lines"]
    if part == "timeout_lines":
        before = s["timeout_granted_lines"]
    fake.on(["salloc", ...], stderr=_lines(before + s[part]))
    pushed: list[tuple[str, str]] = []
    ended: list[int] = []
    SallocProcess(
        fake,
        ["salloc", "--no-shell", "--gpus=1"],
        on_job_id=lambda job, state: None,
        on_error=lambda message: None,
        on_exit=ended.append,
        on_stuck=lambda exc: None,
        answered=lambda: True,
        on_push=lambda kind, what: pushed.append((kind, what)),
        hold=True,
    ).start()
    _until(lambda: ended)
    assert [k for k, _ in pushed] == kinds, (s[part], pushed)
    assert {what for _, what in pushed} <= {s["job1"], s["job2"], s["job3"]}


def test_a_push_about_another_job_is_not_this_ones(fake: FakeRunner) -> None:
    s = _session(VERSIONS[0])
    other = str(int(s["job1"]) + 1000)
    revoked_other = [line.replace(s["job1"], other) for line in s["revoked_lines"]]
    fake.on(["salloc", ...], stderr=_lines(s["granted_lines"] + revoked_other))
    pushed: list[str] = []
    ended: list[int] = []
    SallocProcess(
        fake,
        ["salloc", "--no-shell"],
        on_job_id=lambda job, state: None,
        on_error=lambda message: None,
        on_exit=ended.append,
        on_stuck=lambda exc: None,
        answered=lambda: True,
        on_push=lambda kind, what: pushed.append(kind),
        hold=True,
    ).start()
    _until(lambda: ended)
    assert "revoked" not in pushed
