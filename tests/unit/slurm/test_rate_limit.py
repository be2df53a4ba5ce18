"""A rate-limiting controller (issue 27, point 3), on what Slurm 24.11 and 26.05 printed under
``SlurmctldParameters=rl_enable`` (``scripts/record_rate_limit.py``: a bucket of 3 requests, 1 more a second).

Measured there: a refused client sleeps a second and asks again until let through, exits 0 with the right answer
and says so only with ``-v``. So the pollers must read a slow answer as a reason to ask less often (said once),
and a command slurmlab stops at its timeout as an error that names the rate limit, never as an answer. The
pollers run on a simulated clock that each Slurm call moves on by the seconds the recorded call took.
"""

from __future__ import annotations

import asyncio
import logging
from pathlib import Path
from typing import Any

import pytest

from slurmlab.core.slurm.squeue_brief import JobBrief
from slurmlab.errors import JobNotFoundError, SlurmTimeoutError
from slurmlab.server.poller import ClusterPoller
from slurmlab.server.worker import PollOutcome
from slurmlab.slurm.failures import (
    CONTROLLER_HINT,
    RATE_LIMIT_HINT,
    classify_failure,
    rate_limited,
    timed_out,
)
from slurmlab.slurm.poller import JobPoller, JobUpdate
from slurmlab.slurm.runner import Runner
from slurmlab.slurm.stall import asks_controller, down_words
from slurmlab.slurm.throttle import CALM_NOTE, RATE_LIMITED_NOTE, SLOW_NOTE, Backoff, controller_rate_limits
from slurmlab.testing.recordings import golden_dir, listed_commands, recorded

VERSIONS = ("24.11", "26.05")


def _recorded_versions() -> list[str]:
    return [v for v in VERSIONS if (golden_dir() / v / "rate_limit" / "commands.txt").is_file()]


def _seconds(version: str) -> dict[str, float]:
    """name -> the seconds the recorded command took (commands.txt's fourth column, ``s=``)."""
    out: dict[str, float] = {}
    for line in (golden_dir() / version / "rate_limit" / "commands.txt").read_text().splitlines():
        parts = line.split("\t")
        if len(parts) >= 4 and parts[3].startswith("s="):
            out[parts[0]] = float(parts[3][2:])
    return out


_VERSION_PARAMS: list[Any] = [*_recorded_versions()] or [
    pytest.param("none", marks=pytest.mark.skip("no recording"))
]


@pytest.fixture(params=_VERSION_PARAMS)
def version(request: pytest.FixtureRequest) -> str:
    return str(request.param)


# ---- what the clients print ---------------------------------------------------------------------------------
@pytest.mark.parametrize("command", ["squeue", "scontrol", "srun", "salloc", "scancel"])
def test_a_throttled_client_names_the_rate_limit_only_with_v(version: str, command: str) -> None:
    took = _seconds(version)
    verbose = recorded(f"{version}/rate_limit/{command}_v.txt")
    assert verbose.returncode == 0
    if took[f"{command}_v.txt"] >= 1.0:  # held back (a -v run that found a token at once says nothing of it)
        assert rate_limited(verbose.stderr), verbose.stderr
    # the same command without -v, held back a second or more: exit 0, not a word
    burst = [
        n for n in listed_commands(golden_dir() / version / "rate_limit") if n.startswith(f"{command}_par")
    ]
    slow = [n for n in burst if took[n] >= 1.0]
    assert slow, f"no {command} of the burst was held back"
    for name in slow:
        reply = recorded(f"{version}/rate_limit/{name}")
        assert reply.returncode == 0, (name, reply.stderr)
        assert not rate_limited(reply.stderr)


def test_sacct_is_never_held_back(version: str) -> None:
    """sacct asks slurmdbd, which has no rate limit: the burst answered at once."""
    took = _seconds(version)
    assert max(s for n, s in took.items() if n.startswith("sacct_")) < 1.0


def test_a_throttled_answer_is_the_right_answer(version: str) -> None:
    """squeue's burst: the first answered at once, the others slept seconds; all list the same jobs."""
    took = _seconds(version)
    quick = recorded(f"{version}/rate_limit/squeue_seq1.txt").stdout
    assert quick.strip()
    for k in range(2, 7):
        name = f"squeue_seq{k}.txt"
        assert took[name] >= 1.0, name  # held back by the limit
        assert recorded(f"{version}/rate_limit/{name}").stdout == quick


def test_a_stopped_throttled_command_names_the_rate_limit_not_a_dead_controller(version: str) -> None:
    said = recorded(f"{version}/rate_limit/squeue_v.txt").stderr
    err = timed_out(["squeue", "-v", "--me"], 5, said)
    assert isinstance(err, SlurmTimeoutError)
    assert "rate-limiting your requests" in err.message
    assert "not responding" not in err.message
    assert err.hint == RATE_LIMIT_HINT
    # with nothing said (no -v), it stays what it was: the controller did not answer in time
    plain = timed_out(["squeue", "--me"], 5, "")
    assert "not responding" in plain.message and plain.hint != RATE_LIMIT_HINT


def test_a_failure_after_a_throttle_keeps_its_own_cause() -> None:
    """The rate-limit line beside a real refusal: the refusal decides the error, the limit only the hint left."""
    line = "squeue: RPC rate limited 1 time(s). Sleeping then trying again.\n"
    gone = classify_failure(
        ["squeue", "-j", "9"], 1, line + "slurm_load_jobs error: Invalid job id specified"
    )
    assert isinstance(gone, JobNotFoundError)
    other = classify_failure(["squeue"], 1, line + "squeue: error: something else")
    assert other.hint == RATE_LIMIT_HINT
    assert classify_failure(["squeue"], 1, "slurm_load_jobs error: Socket timed out").hint == CONTROLLER_HINT


# ---- the back-off --------------------------------------------------------------------------------------------
def test_the_backoff_doubles_on_slow_answers_and_comes_back_after_quick_ones() -> None:
    b = Backoff()
    assert b.answered(0.02) is None and b.stretch(1.0) == 1.0
    assert b.answered(3.02) == SLOW_NOTE
    assert [b.answered(3.0), b.answered(2.0), b.answered(5.0)] == [None, None, None]  # said once
    assert b.stretch(1.0) == 8.0  # capped
    assert (
        b.answered(1.0, "squeue: RPC rate limited 2 time(s). Sleeping then trying again.")
        == RATE_LIMITED_NOTE
    )
    notes = [b.answered(0.02) for _ in range(12)]  # 3 quick ones halve it: 8, 4, 2, 1
    assert b.stretch(1.0) == 1.0
    assert notes.count(CALM_NOTE) == 1 and notes[-1] is None


class Clock:
    def __init__(self) -> None:
        self.now = 1000.0

    def __call__(self) -> float:
        return self.now


def _brief(job_id: int, state: str) -> JobBrief:
    return JobBrief(
        display_id=str(job_id),
        job_id=job_id,
        array_job_id=None,
        array_task=None,
        state=state,
        reason=None,
        start_time=None,
        end_time=None,
        time_limit=None,
        time_left=0,
        time_used=None,
        num_nodes=None,
        nodelist="",
        nodes=(),
        partition=None,
        user=None,
        tres_per_node=(),
    )


class ThrottledSqueue:
    """The watched job RUNNING, each squeue taking the seconds a recorded one took (the clock moves on by them);
    ``stopped``: squeue runs past slurmlab's timeout and is stopped, its -v words in its stderr."""

    def __init__(self, clock: Clock, takes: list[float], stopped_stderr: str = "") -> None:
        self.clock, self.takes, self.stopped_stderr = clock, list(takes), stopped_stderr
        self.stopped = False
        self.calls = 0

    def brief(self, ids: Any, runner: Any) -> dict[str, JobBrief]:
        self.calls += 1
        if self.stopped:
            self.clock.now += 30.0
            raise timed_out(["squeue", "-h", "-t", "all", "-j", ",".join(ids)], 30, self.stopped_stderr)
        self.clock.now += self.takes.pop(0) if self.takes else 0.02
        return {i: _brief(int(i), "RUNNING") for i in ids}

    def detail(self, job_id: str, runner: Any) -> Any:
        if self.stopped:
            raise timed_out(["scontrol", "show", "job", job_id], 30, self.stopped_stderr)
        return None


def _kernel_poller(src: ThrottledSqueue, clock: Clock) -> JobPoller:
    """The poller without its thread: the test drives the rounds (``watch`` would start the thread)."""
    poller = JobPoller(
        runner=object(),  # type: ignore[arg-type]
        fetch_brief=src.brief,
        fetch_detail=src.detail,
        clock=clock,
        interval=1.0,
        max_interval=10.0,
    )
    poller.poke = lambda: None  # type: ignore[method-assign]
    return poller


def test_the_kernel_poller_asks_less_often_while_squeue_is_throttled_and_says_so_once(
    version: str, caplog: pytest.LogCaptureFixture
) -> None:
    took = _seconds(version)
    # squeue as recorded: once at once, five held back, then the bucket full again
    takes = [took[f"squeue_seq{k}.txt"] for k in range(1, 7)] + [0.02] * 12
    clock = Clock()
    src = ThrottledSqueue(clock, takes)
    poller = _kernel_poller(src, clock)
    updates: list[JobUpdate] = []
    poller.watch("7", updates.append)
    caplog.set_level(logging.WARNING, logger="slurmlab.slurm.poller")
    waits = []
    for _ in range(18):
        waits.append(poller.step())
        clock.now += waits[-1]
    assert waits[0] == 1.0  # quick: the usual second
    assert max(waits[1:6]) == 8.0 and waits[1] == 2.0  # held back: 2, 4, 8 s
    assert waits[-1] == 1.0  # quick again: back to the usual rate
    said = [r.getMessage() for r in caplog.records]
    assert sum(SLOW_NOTE in m for m in said) == 1, said
    assert sum(CALM_NOTE in m for m in said) == 1, said
    assert all(u.error is None and not u.gone for u in updates)
    assert updates[-1].brief is not None and updates[-1].brief.state == "RUNNING"


def test_a_stopped_throttled_poll_is_an_error_naming_the_limit_never_a_gone_job(version: str) -> None:
    said = recorded(f"{version}/rate_limit/squeue_v.txt").stderr
    clock = Clock()
    src = ThrottledSqueue(clock, [], stopped_stderr=said)
    poller = _kernel_poller(src, clock)
    updates: list[JobUpdate] = []
    poller.watch("7", updates.append)
    poller.step()
    assert updates[-1].brief is not None and updates[-1].brief.state == "RUNNING"
    src.stopped = True
    for _ in range(3):
        clock.now += poller.step()
    assert not any(u.gone for u in updates)
    errors = [u.error for u in updates if u.error is not None]
    assert errors and all("rate-limiting your requests" in str(e) for e in errors)
    src.stopped = False
    poller.step()
    assert updates[-1].error is None and updates[-1].brief is not None
    assert updates[-1].brief.state == "RUNNING" and not updates[-1].gone


class SlowSource:
    """A server poll source whose polls take ``seconds`` on the simulated clock (a throttled squeue each)."""

    user = "user"

    def __init__(self, clock: Clock, seconds: float) -> None:
        self.clock, self.seconds, self.polls = clock, seconds, 0

    async def poll(self, version: str | None, whole: bool) -> PollOutcome:
        self.polls += 1
        self.clock.now += self.seconds
        return PollOutcome("24.11.5")


def _server_minutes(source: SlowSource, clock: Clock, minutes: int) -> int:
    poller = ClusterPoller(source, clock=clock, interval=30.0)  # type: ignore[arg-type]

    async def run() -> None:
        for second in range(60 * minutes):
            clock.now += 1
            if second % 5 == 0:
                await poller.ensure_data()  # an open sidebar asks every 5 s
            if second % 30 == 0:
                await poller._tick()

    asyncio.run(run())
    return source.polls


def test_the_server_poller_asks_less_often_while_its_polls_are_slow(caplog: pytest.LogCaptureFixture) -> None:
    caplog.set_level(logging.WARNING, logger="slurmlab.server")
    clock = Clock()
    quick = _server_minutes(SlowSource(clock, 0.05), clock, 10)
    clock = Clock()
    slow = _server_minutes(SlowSource(clock, 3.05), clock, 10)  # three squeue held back a second each
    assert quick >= 19  # every 30 s
    assert slow <= quick / 3, (slow, quick)
    notes = [r.getMessage() for r in caplog.records if SLOW_NOTE in r.getMessage()]
    assert len(notes) == 1, notes


# ---- the runner's check of a command that does not answer ----------------------------------------------------
def test_a_refused_ping_says_down_at_once(version: str) -> None:
    """What the runner's stall check would read: a ping refused by the limit prints DOWN, exit 1, in milliseconds
    (the words of a dead controller), while one let through says UP."""
    took = _seconds(version)
    pings = [n for n in listed_commands(golden_dir() / version / "rate_limit") if n.startswith("ping_par")]
    downs = [n for n in pings if down_words(recorded(f"{version}/rate_limit/{n}").stdout)]
    assert downs, "no ping of the burst was refused"
    for name in downs:
        reply = recorded(f"{version}/rate_limit/{name}")
        assert reply.returncode == 1 and took[name] < 1.0 and "is DOWN" in reply.stdout
    assert any(down_words(recorded(f"{version}/rate_limit/{n}").stdout) is None for n in pings)


def _conf(tmp_path: Path, text: str) -> str:
    path = tmp_path / "slurm.conf"
    path.write_text(text)
    return str(path)


@pytest.mark.parametrize(
    ("line", "limits"),
    [
        ("SlurmctldParameters=rl_enable,rl_bucket_size=3,rl_refill_rate=1", True),
        ("slurmctldparameters = enable_configless,RL_ENABLE  # per-user limit", True),
        ("SlurmctldParameters=enable_configless", False),
        ("#SlurmctldParameters=rl_enable", False),
        ("SlurmctldParameters=rl_enable_not", False),
        ("SchedulerParameters=rl_enable", False),
    ],
)
def test_the_sites_limit_is_read_from_its_slurm_conf(tmp_path: Path, line: str, limits: bool) -> None:
    conf = _conf(tmp_path, f"ClusterName=c\n{line}\nNodeName=n1 CPUs=4\n")
    assert controller_rate_limits(conf) is limits
    assert controller_rate_limits(str(tmp_path / "missing.conf")) is False


def test_no_ping_judges_a_command_waiting_on_a_rate_limiting_controller(tmp_path: Path) -> None:
    """Where slurm.conf turns the limit on, the runner's stall check asks no ping (which a refused user's
    ``scontrol ping`` answers DOWN): the waiting command is held back, not facing a dead controller; its own
    timeout still bounds it."""
    limited = _conf(tmp_path, "SlurmctldParameters=rl_enable\n")
    assert not asks_controller(["squeue", "-h", "-j", "7"], {"SLURM_CONF": limited})
    plain = str(tmp_path / "plain.conf")
    Path(plain).write_text("ClusterName=c\n")
    assert asks_controller(["squeue", "-h", "-j", "7"], {"SLURM_CONF": plain})


def test_the_kernel_poller_names_the_rate_limit_where_the_site_turns_it_on(
    tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    clock = Clock()
    src = ThrottledSqueue(clock, [0.02, 3.02, 3.01])
    poller = JobPoller(
        runner=Runner(slurm_conf=_conf(tmp_path, "SlurmctldParameters=rl_enable\n")),
        fetch_brief=src.brief,
        fetch_detail=src.detail,
        clock=clock,
    )
    poller.poke = lambda: None  # type: ignore[method-assign]
    poller.watch("7", lambda u: None)
    caplog.set_level(logging.WARNING, logger="slurmlab.slurm.poller")
    for _ in range(3):
        clock.now += poller.step()
    assert [r.getMessage() for r in caplog.records] == [f"slurmlab: {RATE_LIMITED_NOTE}"]


def test_the_server_poller_names_the_rate_limit_where_the_site_turns_it_on(
    tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    caplog.set_level(logging.WARNING, logger="slurmlab.server")
    clock = Clock()
    source = SlowSource(clock, 3.05)
    source.runner = Runner(slurm_conf=_conf(tmp_path, "SlurmctldParameters=rl_enable,rl_refill_rate=1\n"))  # type: ignore[attr-defined]
    _server_minutes(source, clock, 3)
    said = [r.getMessage() for r in caplog.records if "controller" in r.getMessage()]
    assert said == [f"slurmlab: {RATE_LIMITED_NOTE}"], said
