"""A rate-limiting controller (issue 27, point 3), on what Slurm 24.11 and 26.05 printed under
``SlurmctldParameters=rl_enable`` (``scripts/record_rate_limit.py``: a bucket of 3 requests, 1 more a second).

Measured there: a refused client sleeps a second and asks again until let through, exits 0 with the right answer
and says so only with ``-v``. So the pollers must read a slow answer as a reason to ask less often (said once),
and a command slurmlab stops at its timeout as an error that names the rate limit, never as an answer. The
pollers run on a simulated clock that each Slurm call moves on by the seconds the recorded call took.
"""

from __future__ import annotations

import asyncio
import json
import logging
from pathlib import Path
from typing import Any

import pytest

from slurmlab.core.slurm.squeue_brief import JobBrief
from slurmlab.errors import ControllerDownError, JobNotFoundError, SlurmError, SlurmTimeoutError
from slurmlab.server.poller import ClusterPoller
from slurmlab.server.worker import PollOutcome
from slurmlab.slurm.failures import (
    CONTROLLER_HINT,
    RATE_LIMIT_HINT,
    classify_failure,
    rate_limited,
    timed_out,
)
from slurmlab.slurm.job_queries import alist_jobs, list_jobs
from slurmlab.slurm.poller import JobPoller, JobUpdate
from slurmlab.slurm.runner import Runner
from slurmlab.slurm.stall import asks_controller, down_words
from slurmlab.slurm.throttle import (
    CALM_FOR_S,
    CALM_NOTE,
    RATE_LIMITED_NOTE,
    SLOW_NOTE,
    Backoff,
    controller_rate_limits,
)
from slurmlab.testing import FakeRunner
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
def test_the_backoff_doubles_on_slow_answers_and_comes_back_after_quick_ones(sim: Any) -> None:
    b = Backoff(clock=sim)
    assert b.answered(0.02) is None and b.stretch(1.0) == 1.0
    assert b.answered(3.02) == SLOW_NOTE
    assert [b.answered(3.0), b.answered(2.0), b.answered(5.0)] == [None, None, None]  # said once
    assert b.stretch(1.0) == 8.0  # capped
    assert (
        b.answered(1.0, "squeue: RPC rate limited 2 time(s). Sleeping then trying again.")
        == RATE_LIMITED_NOTE
    )
    notes = []
    for _ in range(12):  # 3 quick ones halve it: 8, 4, 2, 1; a round every 8 s, then 4, 2, 1
        notes.append(b.answered(0.02))
        sim.now += b.stretch(1.0)
    assert b.stretch(1.0) == 1.0
    assert notes.count(CALM_NOTE) == 0 and b.in_episode  # 42 s of quick answers: the episode goes on
    while (note := b.answered(0.02)) is None:
        sim.now += 1.0
    assert note == CALM_NOTE and not b.in_episode and b.words(1.0) is None


class ThrottledSqueue:
    """The watched job RUNNING, each squeue taking the seconds a recorded one took (the clock moves on by them);
    ``stopped``: squeue runs past slurmlab's timeout and is stopped, its -v words in its stderr."""

    def __init__(self, clock: Any, takes: list[float], stopped_stderr: str = "") -> None:
        self.clock, self.takes, self.stopped_stderr = clock, list(takes), stopped_stderr
        self.stopped = False
        self.calls = 0

    def brief(self, ids: Any, runner: Any) -> dict[str, JobBrief]:
        self.calls += 1
        if self.stopped:
            self.clock.now += 30.0
            raise timed_out(["squeue", "-h", "-t", "all", "-j", ",".join(ids)], 30, self.stopped_stderr)
        self.clock.now += self.takes.pop(0) if self.takes else 0.02
        return {i: self.clock.brief(int(i), "RUNNING") for i in ids}

    def detail(self, job_id: str, runner: Any) -> Any:
        if self.stopped:
            raise timed_out(["scontrol", "show", "job", job_id], 30, self.stopped_stderr)
        return None


def _kernel_poller(src: ThrottledSqueue, sim: Any, runner: Any = None) -> JobPoller:
    """The poller of ``src`` on the simulated clock (the ``sim`` fixture: tests/unit/slurm/conftest.py)."""
    return sim.poller(runner, fetch_brief=src.brief, fetch_detail=src.detail)  # type: ignore[no-any-return]


def test_the_kernel_poller_asks_less_often_while_squeue_is_throttled_and_says_so_once(
    version: str, caplog: pytest.LogCaptureFixture, sim: Any
) -> None:
    took = _seconds(version)
    # squeue as recorded: once at once, five held back, then the bucket full again
    takes = [took[f"squeue_seq{k}.txt"] for k in range(1, 7)] + [0.02] * 60
    src = ThrottledSqueue(sim, takes)
    poller = _kernel_poller(src, sim)
    updates: list[JobUpdate] = []
    poller.watch("7", updates.append)
    caplog.set_level(logging.WARNING, logger="slurmlab.slurm.poller")
    waits = []
    for _ in range(66):
        waits.append(poller.step())
        sim.now += waits[-1]
    assert waits[0] == 1.0  # quick: the usual second
    assert max(waits[1:6]) == 8.0 and waits[1] == 2.0  # held back: 2, 4, 8 s
    assert waits[-1] == 1.0  # quick again: back to the usual rate
    said = [r.getMessage() for r in caplog.records]
    assert sum(SLOW_NOTE in m for m in said) == 1, said
    assert sum(CALM_NOTE in m for m in said) == 1, said
    assert all(u.error is None and not u.gone for u in updates)
    assert updates[-1].brief is not None and updates[-1].brief.state == "RUNNING"


class Said(logging.Handler):
    """The notes a poller logs, each with the simulated time it was said at."""

    def __init__(self, sim: Any, logger: str) -> None:
        super().__init__(logging.WARNING)
        self.sim, self.notes = sim, list[tuple[float, str]]()
        self.logger = logging.getLogger(logger)

    def emit(self, record: logging.LogRecord) -> None:
        self.notes.append((self.sim.now, record.getMessage()))

    def __enter__(self) -> Said:
        self.logger.addHandler(self)
        return self

    def __exit__(self, *exc: object) -> None:
        self.logger.removeHandler(self)

    def count(self, note: str) -> int:
        return sum(note in m for _, m in self.notes)

    def at(self, note: str) -> float:
        return next(t for t, m in self.notes if note in m)


def _alternating(version: str) -> list[float]:
    """squeue's seconds under a steady load whose bucket refills now and then: each recorded held-back squeue
    (``squeue_seq2``-``6``) followed by three quick ones (``squeue_seq1``), as the 24.11 root saw them."""
    took = _seconds(version)
    quick = took["squeue_seq1.txt"]
    assert quick < 1.0
    return [t for k in range(2, 7) for t in (took[f"squeue_seq{k}.txt"], quick, quick, quick)]


def test_slow_and_quick_answers_by_turns_are_one_episode_said_once_and_ended_after_a_quiet_minute(
    version: str, tmp_path: Path, sim: Any
) -> None:
    """Hysteresis: the factor comes back to 1 after three quick answers, but the episode (its note, the panel's
    line) ends only after the answers have stayed quick for CALM_FOR_S; before, every refill of the bucket said
    "answers quickly again" and the next held-back squeue "rate-limiting" again."""
    took = _seconds(version)
    turns = _alternating(version)
    src = ThrottledSqueue(sim, [*turns, *[took["squeue_seq1.txt"]] * 120])
    poller = _kernel_poller(src, sim, Runner(slurm_conf=_conf(tmp_path, "SlurmctldParameters=rl_enable\n")))
    poller.watch("7", lambda u: None)
    last_slow_at, words = 0.0, []
    with Said(sim, "slurmlab.slurm.poller") as said:
        for _ in range(len(turns) + 120):
            slow = bool(src.takes) and src.takes[0] >= 1.0
            wait = poller.step()
            last_slow_at = sim.now if slow else last_slow_at  # when the held-back answer came
            words.append((sim.now, poller.slow_words))
            sim.now += wait
    assert said.count(RATE_LIMITED_NOTE) == 1, said.notes
    assert said.count(CALM_NOTE) == 1, said.notes
    assert said.at(CALM_NOTE) - last_slow_at >= CALM_FOR_S
    # the panel's line stays from the first held-back answer to the end of the episode, and goes with it
    during = [w for t, w in words if said.at(RATE_LIMITED_NOTE) <= t < said.at(CALM_NOTE)]
    assert during and all(w and w.startswith("Slurm is rate-limiting this user's queries") for w in during)
    assert all(w is None for t, w in words if t >= said.at(CALM_NOTE))


def test_a_stopped_throttled_poll_is_an_error_naming_the_limit_never_a_gone_job(
    version: str, sim: Any
) -> None:
    said = recorded(f"{version}/rate_limit/squeue_v.txt").stderr
    src = ThrottledSqueue(sim, [], stopped_stderr=said)
    poller = _kernel_poller(src, sim)
    updates: list[JobUpdate] = []
    poller.watch("7", updates.append)
    poller.step()
    assert updates[-1].brief is not None and updates[-1].brief.state == "RUNNING"
    src.stopped = True
    for _ in range(3):
        sim.now += poller.step()
    assert not any(u.gone for u in updates)
    errors = [u.error for u in updates if u.error is not None]
    assert errors and all("rate-limiting your requests" in str(e) for e in errors)
    src.stopped = False
    poller.step()
    assert updates[-1].error is None and updates[-1].brief is not None
    assert updates[-1].brief.state == "RUNNING" and not updates[-1].gone


class SlowSource:
    """A server poll source whose polls take ``seconds`` on the simulated clock (a throttled squeue each; a list:
    each poll the next of them, the last one for ever)."""

    user = "user"

    def __init__(self, clock: Any, seconds: float | list[float]) -> None:
        self.clock, self.polls = clock, 0
        self.seconds = list(seconds) if isinstance(seconds, list) else [seconds]

    async def poll(self, version: str | None, whole: bool) -> PollOutcome:
        self.polls += 1
        self.clock.now += self.seconds.pop(0) if len(self.seconds) > 1 else self.seconds[0]
        return PollOutcome("24.11.5")


def _server_minutes(source: SlowSource, clock: Any, minutes: int) -> ClusterPoller:
    """An open sidebar's server poller, ``minutes`` of simulated time (its polls: ``source.polls``)."""
    # every 30 s, whole or own (on 24.11, as on 22.05, an own listing costs a whole one, so the own jobs come every
    # cluster_interval: the same here, the back-off being what is looked at)
    poller = ClusterPoller(source, clock=clock, interval=30.0, cluster_interval=30.0)  # type: ignore[arg-type]

    async def run() -> None:
        for second in range(60 * minutes):
            clock.now += 1
            if second % 5 == 0:
                await poller.ensure_data()  # an open sidebar asks every 5 s
            if second % 30 == 0:
                await poller._tick()

    asyncio.run(run())
    return poller


def test_the_server_poller_asks_less_often_while_its_polls_are_slow(
    caplog: pytest.LogCaptureFixture, sim: Any
) -> None:
    caplog.set_level(logging.WARNING, logger="slurmlab.server")
    quick_source, slow_source = (
        SlowSource(sim, 0.05),
        SlowSource(sim, 3.05),
    )  # three squeue held back 1 s each
    _server_minutes(quick_source, sim, 10)
    _server_minutes(slow_source, sim, 10)
    quick, slow = quick_source.polls, slow_source.polls
    assert quick >= 19  # every 30 s
    assert slow <= quick / 3, (slow, quick)
    notes = [r.getMessage() for r in caplog.records if SLOW_NOTE in r.getMessage()]
    assert len(notes) == 1, notes


def test_the_server_poller_says_one_episode_for_slow_and_quick_polls_by_turns_and_shows_it_in_its_status(
    version: str, tmp_path: Path, sim: Any
) -> None:
    """The sidebar's side of the hysteresis: polls held back by turns are one episode, said once, shown in the
    status answer the sidebar reads (with the stretched interval), and gone a quiet minute after the last."""
    turns = [t * 3 for t in _alternating(version)]  # a poll is three squeue or so
    source = SlowSource(sim, [*turns, 0.05])
    source.runner = Runner(slurm_conf=_conf(tmp_path, "SlurmctldParameters=rl_enable\n"))  # type: ignore[attr-defined]
    with Said(sim, "slurmlab.server") as said:
        poller = _server_minutes(source, sim, 25)
        assert source.polls > len(turns)  # every recorded turn was polled, and quick ones after
    notes = [(t, m) for t, m in said.notes if "controller" in m]
    assert [m for _, m in notes] == [f"slurmlab: {RATE_LIMITED_NOTE}", f"slurmlab: {CALM_NOTE}"], notes
    status = json.loads(poller.cache.get("status").body)  # type: ignore[union-attr]
    assert status["slow"] is None
    # in the episode: the status the sidebar reads names the limit and the interval kept now
    poller.backoff.answered(9.0, site_limits=True)
    poller._put_status()
    status = json.loads(poller.cache.get("status").body)  # type: ignore[union-attr]
    assert status["slow"] == "Slurm is rate-limiting this user's queries: updates come every 60 s"


def test_the_panel_says_that_slurm_rate_limits_the_updates_and_how_often_they_come(
    version: str, tmp_path: Path, sim: Any
) -> None:
    from slurmlab.slurm.allocation import Allocation
    from slurmlab.widgets.panel import panel_html

    took = _seconds(version)
    held = [took[f"squeue_seq{k}.txt"] for k in range(2, 5)]  # three held back: 2, 4, 8 times the second
    src = ThrottledSqueue(sim, [0.02, *held])
    poller = _kernel_poller(src, sim, Runner(slurm_conf=_conf(tmp_path, "SlurmctldParameters=rl_enable\n")))
    alloc = Allocation("7", runner=object(), poller=poller, release_at_exit=False)  # type: ignore[arg-type]
    alloc._start_watch()  # what attaching does; the rounds are driven here
    sim.now += poller.step()
    assert alloc.state == "RUNNING" and "rate-limiting" not in panel_html(alloc)
    for _ in held:
        sim.now += poller.step()
    assert "Slurm is rate-limiting this user&#x27;s queries: updates come every 8 s" in panel_html(alloc)
    sim.run_for(poller, 2 * CALM_FOR_S)
    assert "rate-limiting" not in panel_html(alloc)


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
    tmp_path: Path, caplog: pytest.LogCaptureFixture, sim: Any
) -> None:
    src = ThrottledSqueue(sim, [0.02, 3.02, 3.01])
    poller = _kernel_poller(src, sim, Runner(slurm_conf=_conf(tmp_path, "SlurmctldParameters=rl_enable\n")))
    poller.watch("7", lambda u: None)
    caplog.set_level(logging.WARNING, logger="slurmlab.slurm.poller")
    for _ in range(3):
        sim.now += poller.step()
    assert [r.getMessage() for r in caplog.records] == [f"slurmlab: {RATE_LIMITED_NOTE}"]


def test_the_server_poller_names_the_rate_limit_where_the_site_turns_it_on(
    tmp_path: Path, caplog: pytest.LogCaptureFixture, sim: Any
) -> None:
    caplog.set_level(logging.WARNING, logger="slurmlab.server")
    source = SlowSource(sim, 3.05)
    source.runner = Runner(slurm_conf=_conf(tmp_path, "SlurmctldParameters=rl_enable,rl_refill_rate=1\n"))  # type: ignore[attr-defined]
    _server_minutes(source, sim, 3)
    said = [r.getMessage() for r in caplog.records if "controller" in r.getMessage()]
    assert said == [f"slurmlab: {RATE_LIMITED_NOTE}"], said


# ---- an empty answer confirmed under the limit ---------------------------------------------------------------
def _empty_answer_under_the_limit(fake: FakeRunner, version: str, tmp_path: Path, *pings: str) -> None:
    """Slurm ``version`` as recorded: ``scontrol --json show job -d`` printing no jobs (the very answer of a user
    with none; recorded where the controller was down, which prints the same), then ``scontrol ping`` answering
    with the recorded ``rate_limit/ping_*`` files in turn; the site's slurm.conf turns the rate limit on."""
    fake.replay(
        f"{version}/00_sinfo_version.txt",
        f"{version}/l24_scontrol_json_show_job_d_controller_down.json",
        f"{version}/s22_squeue_owners.txt",  # list_jobs asks whose jobs they are
    )
    script = fake.on(["scontrol", "ping"], reply=recorded(f"{version}/rate_limit/{pings[0]}"))
    for name in pings[1:]:
        script.then(recorded(f"{version}/rate_limit/{name}"))
    fake.slurm_conf = _conf(tmp_path, "SlurmctldParameters=rl_enable,rl_bucket_size=3,rl_refill_rate=1\n")


@pytest.fixture
def no_ping_wait(monkeypatch: pytest.MonkeyPatch) -> None:
    """The second ping at once: the second a token takes to come back is the simulated controller's, not ours."""
    from slurmlab.slurm import controller

    monkeypatch.setattr(controller, "RATE_LIMITED_PING_WAIT", 0.0)


@pytest.mark.usefixtures("no_ping_wait")
@pytest.mark.parametrize("how", ["sync", "async"])
def test_a_user_with_no_jobs_is_not_told_the_controller_is_down_by_a_refused_ping(
    fake: FakeRunner, version: str, tmp_path: Path, how: str
) -> None:
    """A refused ping (``ping_seq4``: DOWN, exit 1, 10 ms) is asked once more; the next, let through
    (``ping_par1``: UP), confirms the empty answer: the user has no jobs."""
    _empty_answer_under_the_limit(fake, version, tmp_path, "ping_seq4.txt", "ping_par1.txt")
    jobs = asyncio.run(alist_jobs(fake)) if how == "async" else list_jobs(fake)
    assert list(jobs) == []
    assert len(fake.called(["scontrol", "ping"])) == 2


@pytest.mark.usefixtures("no_ping_wait")
def test_pings_refused_twice_under_the_limit_name_the_limit_never_a_dead_controller(
    fake: FakeRunner, version: str, tmp_path: Path
) -> None:
    """Two refused pings in a row (``ping_seq4``, ``ping_seq5``): the empty answer stays unconfirmed, said as the
    rate limit's doing; neither "not responding" nor "no jobs", and no ControllerDownError (a panel's job would
    read as lost with its controller)."""
    _empty_answer_under_the_limit(fake, version, tmp_path, "ping_seq4.txt", "ping_seq5.txt")
    with pytest.raises(SlurmError) as info:
        list_jobs(fake)
    err = info.value
    assert not isinstance(err, ControllerDownError)
    assert "not responding" not in str(err) and "rl_enable" in str(err) and "is DOWN" in str(err)
    assert err.hint == RATE_LIMIT_HINT
    assert len(fake.called(["scontrol", "ping"])) == 2


def test_without_the_limit_a_down_ping_still_says_the_controller_is_not_responding(
    fake: FakeRunner, version: str, tmp_path: Path
) -> None:
    """Where slurm.conf does not turn the limit on, the same DOWN words mean a dead controller: one ping, as
    before (test_silent_controller has the recordings of a stopped slurmctld)."""
    _empty_answer_under_the_limit(fake, version, tmp_path, "ping_seq4.txt", "ping_par1.txt")
    fake.slurm_conf = _conf(tmp_path, "SlurmctldParameters=enable_configless\n")
    with pytest.raises(ControllerDownError, match="not responding"):
        list_jobs(fake)
    assert len(fake.called(["scontrol", "ping"])) == 1
