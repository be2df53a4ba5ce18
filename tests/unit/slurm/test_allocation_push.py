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
