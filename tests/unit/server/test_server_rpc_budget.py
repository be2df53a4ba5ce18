"""What the server's poller asks Slurm in a minute (issue 27), counted on the runner's calls, not timed.

The poller runs on a simulated clock: a sidebar's round every 5 s (status, nodes, my queue: what sidebar.ts
asks), the poller's timer at its own interval, and every Slurm command it runs goes to a FakeRunner replaying
the recorded 22.05 cluster. Each command costs slurmctld the RPCs ``sdiag`` counted for it on the sandbox
(benchmarks/bench_rpc.py measures the same minute there).
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Sequence
from typing import Any

import pytest
from fake_slurm import OWNER_UID, cluster

from slurmlab.server.data import ClusterSource
from slurmlab.server.poller import (
    DEFAULT_CLUSTER_INTERVAL,
    DEFAULT_IDLE_AFTER,
    DEFAULT_INTERVAL,
    ClusterPoller,
    own_listing_is_whole,
)
from slurmlab.server.worker import PollWorker
from slurmlab.testing import FakeRunner

SIDEBAR_EVERY = 5  # sidebar.ts DEFAULT_REFRESH_S
# RPCs to slurmctld of each kind of command, as sdiag counted them on the 22.05 sandbox (squeue: JOB_INFO +
# PARTITION_INFO, with -u, --me or -j A,B too; sinfo -N: NODE_INFO + PARTITION_INFO; scontrol show job ID and
# squeue -j ID: FED_INFO + JOB_INFO_SINGLE)
RPCS = {"my jobs": 2, "all jobs": 2, "nodes": 2, "one job": 2, "one node": 2}
# the kinds that sdiag counts as a whole-queue REQUEST_JOB_INFO on 22.05 (the listing issue 27 allows once a minute)
WHOLE_QUEUE = ("my jobs", "all jobs")


def kind(argv: Sequence[str]) -> str:
    """Which listing a command is, as the controller sees it."""
    if argv[0] == "sinfo":
        return "version" if "--version" in argv else "nodes"  # sinfo --version asks nothing
    if argv[0] == "squeue":
        if "-u" in argv:
            return "my jobs"
        return "one job" if "-j" in argv else "all jobs"
    if argv[0] == "scontrol" and "job" in argv:
        return "one job" if len([a for a in argv if a.isdigit()]) == 1 else "all jobs"
    if argv[0] == "scontrol" and "node" in argv:
        return "one node" if argv[-1] not in ("node", "-d", "nodes") else "nodes"
    return " ".join(argv[:2])


class Clock:
    def __init__(self) -> None:
        self.now = 1000.0

    def __call__(self) -> float:
        return self.now


@pytest.fixture
def viewer(monkeypatch: pytest.MonkeyPatch) -> None:
    from slurmlab.slurm import identity

    monkeypatch.setattr(identity, "current_uid", lambda: OWNER_UID)


def _poller(fake: FakeRunner, clock: Clock) -> ClusterPoller:
    return ClusterPoller(ClusterSource(fake, user="root", worker=PollWorker("thread")), clock=clock)


async def _minute(
    poller: ClusterPoller, clock: Clock, fake: FakeRunner, *, sidebar: bool, tick: float = DEFAULT_INTERVAL
) -> Counter[str]:
    """One simulated minute, second by second: the timer's ticks, and a sidebar round every 5 s when open.
    The Slurm commands run in it, by kind."""
    before = len(fake.history)
    for second in range(60):
        clock.now += 1
        if sidebar and second % SIDEBAR_EVERY == 0:
            await poller.ensure_data()  # status
            await poller.ensure_data(whole=True)  # nodes (the GPU map)
            await poller.ensure_data()  # queue?scope=mine
        if second % int(tick) == 0:
            await poller._tick()
    return Counter(kind(a) for a in fake.history[before:])


def test_the_defaults_fit_the_budget_of_one_sidebar() -> None:
    """<= 6 RPCs a minute (sdiag: every squeue 2, sinfo 2): 1 whole poll (squeue + sinfo), and no own listing
    between (on 22.05, 24.11 and 26.05 it is a whole-queue listing too: the own jobs come from the whole one;
    24.11's and 26.05's sidebar rows in make bench counted 2 job listings a minute before)."""
    whole_per_minute = 60 / DEFAULT_CLUSTER_INTERVAL
    assert own_listing_is_whole("22.05.11") and own_listing_is_whole("22.05")
    assert own_listing_is_whole("24.11.5") and own_listing_is_whole("26.05.0")
    assert not own_listing_is_whole("27.05.1") and not own_listing_is_whole(None)
    assert (RPCS["all jobs"] + RPCS["nodes"]) * whole_per_minute <= 6
    assert whole_per_minute <= 1
    assert DEFAULT_IDLE_AFTER < 60


async def test_one_open_sidebar_costs_a_few_cheap_listings_a_minute(
    fake_runner: FakeRunner, viewer: None
) -> None:
    clock = Clock()
    cluster(fake_runner)
    poller = _poller(fake_runner, clock)
    await _minute(
        poller, clock, fake_runner, sidebar=True
    )  # the first minute fetches every job's detail once
    for _ in range(3):
        calls = await _minute(poller, clock, fake_runner, sidebar=True)
        assert calls["all jobs"] <= 1, calls  # the whole queue at most once a minute
        assert calls["nodes"] <= 1, calls
        # on 22.05 an own listing is a whole-queue JOB_INFO too (sdiag): at most one of either in a minute
        assert sum(calls[k] for k in WHOLE_QUEUE) <= 1, calls
        assert sum(RPCS[k] * n for k, n in calls.items()) <= 6, calls
        assert set(calls) <= {"my jobs", "all jobs", "nodes"}, calls
    # what the sidebar saw is all there (the map and both scopes)
    assert {"nodes", "queue:all", "queue:mine", "status"} <= set(poller.cache.keys())
    assert poller.failure is None


async def test_a_hidden_or_closed_sidebar_asks_slurm_nothing(fake_runner: FakeRunner, viewer: None) -> None:
    clock = Clock()
    cluster(fake_runner)
    poller = _poller(fake_runner, clock)
    await _minute(poller, clock, fake_runner, sidebar=True)
    # the tab is hidden (Lumino's standby): no request reaches the server; its timer keeps ticking
    settling = await _minute(poller, clock, fake_runner, sidebar=False)
    # at most the ticks within idle_after (30 s) of the last request: two polls, one of them whole
    assert settling["my jobs"] <= 2 and settling["all jobs"] <= 1, settling
    for _ in range(3):
        assert await _minute(poller, clock, fake_runner, sidebar=False) == Counter()
    # shown again: the first request gets fresh data at once, not data a minute old
    before = len(fake_runner.history)
    clock.now += 1
    await poller.ensure_data(whole=True)
    assert Counter(kind(a) for a in fake_runner.history[before:]) == Counter({"all jobs": 1, "nodes": 1})


async def test_a_client_of_my_jobs_only_never_lists_the_whole_cluster(
    fake_runner: FakeRunner, viewer: None
) -> None:
    """The queue view on "my jobs" (no GPU map open): the whole-cluster listings stop once nobody asks for them."""
    clock = Clock()
    cluster(fake_runner)
    poller = _poller(fake_runner, clock)
    await _minute(poller, clock, fake_runner, sidebar=True)
    for _ in range(3):
        for second in range(60):
            clock.now += 1
            if second % SIDEBAR_EVERY == 0:
                await poller.ensure_data()
            if second % int(DEFAULT_INTERVAL) == 0:
                await poller._tick()
    before = len(fake_runner.history)
    for second in range(60):
        clock.now += 1
        if second % SIDEBAR_EVERY == 0:
            await poller.ensure_data()
        if second % int(DEFAULT_INTERVAL) == 0:
            await poller._tick()
    calls = Counter(kind(a) for a in fake_runner.history[before:])
    # the own listing alone, once a minute on 22.05 (where it costs a whole-queue JOB_INFO: at most one a minute)
    assert calls == Counter({"my jobs": 60 // int(DEFAULT_CLUSTER_INTERVAL)}), calls


async def test_no_job_is_mine_for_a_viewer_who_owns_none(
    fake_runner: FakeRunner, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Viewed by a uid that owns none of the recorded jobs (all root's), no job of the whole listing is marked
    mine, and the own listing is empty."""
    from slurmlab.slurm import identity

    monkeypatch.setattr(identity, "current_uid", lambda: 4321)
    clock = Clock()
    cluster(fake_runner)  # root's jobs, seen by uid 4321
    poller = _poller(fake_runner, clock)
    await poller.ensure_data(whole=True)
    everyone, mine = poller.cache.get("queue:all"), poller.cache.get("queue:mine")
    assert everyone is not None and mine is not None
    assert everyone.payload["jobs"] and not any(j["mine"] for j in everyone.payload["jobs"])
    assert mine.payload["jobs"] == []
    await poller.refresh(whole=False)  # the own listing: squeue -u 4321
    mine = poller.cache.get("queue:mine")
    assert mine is not None and mine.payload["jobs"] == []
    assert fake_runner.history[-1][:6] == ["squeue", "-h", "-t", "all", "-u", "4321"]


def test_the_interval_settings_reach_the_poller() -> None:
    poller = ClusterPoller(ClusterSource(FakeRunner(), user="x"), interval=30, cluster_interval=10)
    assert poller.cluster_interval == 30  # never more often than the own listing it includes
    with pytest.raises(ValueError, match="cluster poll interval"):
        ClusterPoller(ClusterSource(FakeRunner(), user="x"), cluster_interval=0)


async def test_own_jobs_stay_current_between_whole_polls_where_the_own_listing_is_cheap(
    fake_runner: FakeRunner, viewer: None
) -> None:
    """On a release whose own listing is not known to be a whole-queue one (one after the last measured), the own
    jobs are listed every interval between the whole polls (the rule applies only where sdiag counted it)."""
    clock = Clock()
    cluster(fake_runner)
    poller = _poller(fake_runner, clock)
    await _minute(poller, clock, fake_runner, sidebar=True)
    poller.version = "27.05.1"  # as the next poll's version would say
    poller.source.worker.poll = _keeping_version(poller.source.worker.poll, "27.05.1")  # type: ignore[method-assign]
    await _minute(poller, clock, fake_runner, sidebar=True)
    calls = await _minute(poller, clock, fake_runner, sidebar=True)
    assert calls["my jobs"] >= 1 and calls["all jobs"] <= 1, calls


def _keeping_version(poll: Any, version: str) -> Any:
    """The worker's poll, its outcome saying Slurm ``version`` (the recordings are 22.05's)."""
    from dataclasses import replace

    async def poll_as(*args: Any, **kwargs: Any) -> Any:
        return replace(await poll(*args, **kwargs), version=version)

    return poll_as
