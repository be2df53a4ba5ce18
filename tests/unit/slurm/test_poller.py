"""The shared poller's own logic (sharing, detail-on-change, back-off, stop) with injected fetchers.

The Slurm side of the poller is exercised against the real sandbox in tests/integration/slurm.
"""

from __future__ import annotations

import threading
import time
from collections.abc import Callable
from typing import Any

from slurmlab.core.slurm.squeue_brief import JobBrief
from slurmlab.errors import ControllerDownError, JobNotFoundError
from slurmlab.slurm.poller import JobPoller, JobUpdate


class Cluster:
    """A scripted state source that counts calls."""

    def __init__(self) -> None:
        self.states: dict[str, JobBrief] = {}
        self.brief_calls: list[list[str]] = []
        self.detail_calls: list[str] = []
        self.down = False
        self.lock = threading.Lock()

    def brief(self, ids: Any, runner: Any) -> dict[str, JobBrief]:
        with self.lock:
            self.brief_calls.append(list(ids))
            if self.down:
                raise ControllerDownError("the Slurm controller is not responding")
            return {i: self.states[i] for i in ids if i in self.states}

    def detail(self, job_id: str, runner: Any) -> Any:
        with self.lock:
            self.detail_calls.append(job_id)
            if job_id not in self.states:
                raise JobNotFoundError("gone")
            return ("detail", self.states[job_id].state)


def _poller(c: Cluster, **kw: Any) -> JobPoller:
    return JobPoller(runner=object(), fetch_brief=c.brief, fetch_detail=c.detail, **kw)  # type: ignore[arg-type]


def _until(pred: Any, timeout: float = 5.0) -> bool:
    end = time.monotonic() + timeout
    while time.monotonic() < end:
        if pred():
            return True
        time.sleep(0.02)
    return False


def test_watchers_share_one_call_per_round_and_detail_only_on_change(
    make_brief: Callable[..., JobBrief],
) -> None:
    c = Cluster()
    c.states = {"1": make_brief(1, "PENDING", "Resources"), "2": make_brief(2, "RUNNING")}
    p = _poller(c, interval=0.1)
    got: dict[str, list[JobUpdate]] = {"1": [], "2": [], "1b": []}
    p.watch(1, got["1"].append)
    p.watch("1", got["1b"].append)
    p.watch(2, got["2"].append)
    assert _until(lambda: len(c.brief_calls) >= 5)
    # every round asks for all watched jobs in ONE call
    assert all(sorted(call) == ["1", "2"] for call in c.brief_calls[2:])
    # unchanged jobs are not fetched again
    assert sorted(c.detail_calls) == ["1", "2"]
    assert len(got["1"]) == 1 and len(got["1b"]) == 1
    # a ticking field (time left) is not a change
    c.states["2"] = make_brief(2, "RUNNING", time_left=99)
    time.sleep(0.35)
    assert c.detail_calls.count("2") == 1
    c.states["1"] = make_brief(1, "RUNNING")
    assert _until(lambda: len(got["1"]) == 2)
    assert got["1"][-1].brief.state == "RUNNING" and got["1"][-1].detail == ("detail", "RUNNING")
    p.stop()


def test_a_change_reaches_watchers_within_about_one_interval(make_brief: Callable[..., JobBrief]) -> None:
    c = Cluster()
    c.states = {"7": make_brief(7, "PENDING")}
    p = _poller(c, interval=0.2)
    seen: list[tuple[float, str]] = []
    p.watch(7, lambda u: seen.append((time.monotonic(), u.brief.state)))
    assert _until(lambda: len(seen) == 1)
    t0 = time.monotonic()
    c.states["7"] = make_brief(7, "RUNNING")
    assert _until(lambda: len(seen) == 2)
    assert seen[-1][0] - t0 < 0.2 * 2.5
    p.stop()


def test_backs_off_when_quiet_and_resets_on_poke(make_brief: Callable[..., JobBrief]) -> None:
    # only a job that has ended is watched: nothing is expected of it, so the poller asks less often
    # (a pending or running one keeps the base interval: tests/unit/slurm/test_poller_intervals.py)
    c = Cluster()
    c.states = {"1": make_brief(1, "COMPLETED")}
    p = _poller(c, interval=0.05, max_interval=0.4, quiet_after=0.2)
    p.watch(1, lambda u: None)
    assert _until(lambda: p.current_interval >= 0.4, timeout=5)
    p.poke()
    assert p.current_interval == 0.05
    p.stop()


def test_stops_when_nothing_is_watched(make_brief: Callable[..., JobBrief]) -> None:
    c = Cluster()
    c.states = {"1": make_brief(1, "RUNNING")}
    p = _poller(c, interval=0.05)
    w = p.watch(1, lambda u: None)
    assert _until(lambda: p.running)
    w.cancel()
    assert _until(lambda: not p.running)
    calls = len(c.brief_calls)
    time.sleep(0.2)
    assert len(c.brief_calls) == calls


def test_controller_down_is_reported_once_then_recovery(make_brief: Callable[..., JobBrief]) -> None:
    c = Cluster()
    c.states = {"1": make_brief(1, "RUNNING")}
    p = _poller(c, interval=0.05, max_interval=0.1)
    ups: list[JobUpdate] = []
    p.watch(1, ups.append)
    assert _until(lambda: len(ups) == 1)
    c.down = True
    assert _until(lambda: len(c.brief_calls) > 6)
    errors = [u for u in ups if u.error]
    assert len(errors) == 1 and "not responding" in str(errors[0].error)
    c.down = False
    assert _until(lambda: ups[-1].error is None and ups[-1].brief is not None)
    p.stop()


def test_a_purged_job_is_reported_gone(make_brief: Callable[..., JobBrief]) -> None:
    c = Cluster()
    c.states = {"1": make_brief(1, "RUNNING")}
    p = _poller(c, interval=0.05)
    ups: list[JobUpdate] = []
    p.watch(1, ups.append)
    assert _until(lambda: len(ups) == 1)
    del c.states["1"]
    assert _until(lambda: ups[-1].gone)
    p.stop()


def test_a_failing_watcher_does_not_stop_the_others(make_brief: Callable[..., JobBrief]) -> None:
    c = Cluster()
    c.states = {"1": make_brief(1, "RUNNING")}
    p = _poller(c, interval=0.05)

    def bad(u: JobUpdate) -> None:
        raise RuntimeError("boom")

    good: list[JobUpdate] = []
    p.watch(1, bad)
    p.watch(1, good.append)
    assert _until(lambda: len(good) == 1)
    p.stop()


def test_each_cluster_has_its_own_shared_poller() -> None:
    from slurmlab.slurm.poller import get_poller
    from slurmlab.slurm.runner import Runner

    a1, a2 = Runner(slurm_conf="/tmp/a/slurm.conf"), Runner(slurm_conf="/tmp/a/slurm.conf")
    b = Runner(slurm_conf="/tmp/b/slurm.conf")
    assert get_poller(a1) is get_poller(a2)  # one cluster, one poller
    assert get_poller(a1) is not get_poller(b)  # job ids of two clusters never mix
    assert get_poller(b).runner is b


# ---- hostile ids, rounds that raise, node trouble (issue 10, points 3 and 7) ----------------------
def test_a_watch_of_something_that_is_not_a_job_id_is_refused_and_never_polled() -> None:
    import pytest

    from slurmlab.errors import RequestError

    c = Cluster()
    p = _poller(c, interval=0.05)
    for bad in ("-v", "0", "1\n", "1;2", "", " 5", "5 ", "--all"):
        with pytest.raises(RequestError):
            p.watch(bad, lambda u: None)
    assert p.watched() == [] and c.brief_calls == []
    p.stop()


def test_the_thread_outlives_any_exception_and_watchers_hear_it(make_brief: Callable[..., JobBrief]) -> None:
    from slurmlab.errors import ParseError, SlurmlabError

    c = Cluster()
    c.states = {"3": make_brief(3, "RUNNING")}
    failures: list[BaseException] = [
        ParseError("squeue output", "garbage"),
        TypeError("a parser bug"),
        RecursionError("deep"),
    ]
    real_brief = c.brief

    def brief(ids: Any, runner: Any) -> dict[str, JobBrief]:
        if failures:
            raise failures.pop(0)
        return real_brief(ids, runner)

    p = JobPoller(
        runner=object(),
        fetch_brief=brief,
        fetch_detail=c.detail,  # type: ignore[arg-type]
        interval=0.02,
        max_interval=0.05,
    )
    seen: list[JobUpdate] = []
    p.watch(3, seen.append)
    assert _until(lambda: any(u.brief is not None for u in seen), timeout=5)
    errors = [u.error for u in seen if u.error is not None]
    # each distinct failure reached the watcher as a SlurmlabError, never as the raw exception
    assert len(errors) == 3 and all(isinstance(e, SlurmlabError) for e in errors)
    assert "a parser bug" in str(errors[1]) and "report" in str(errors[1])
    assert p.running
    p.stop()


def test_an_unreadable_job_detail_is_that_jobs_error_only(make_brief: Callable[..., JobBrief]) -> None:
    from slurmlab.errors import ParseError

    c = Cluster()
    c.states = {"1": make_brief(1, "RUNNING"), "2": make_brief(2, "RUNNING")}

    def detail(job_id: str, runner: Any) -> Any:
        if job_id == "1":
            raise ParseError("scontrol job record", "JobId=1 JobName=x\n   UserId=a(1)\n   UserId=b(2)")
        return c.detail(job_id, runner)

    p = JobPoller(
        runner=object(),
        fetch_brief=c.brief,
        fetch_detail=detail,  # type: ignore[arg-type]
        interval=0.05,
    )
    got: dict[str, list[JobUpdate]] = {"1": [], "2": []}
    p.watch(1, got["1"].append)
    p.watch(2, got["2"].append)
    assert _until(lambda: got["1"] and got["2"])
    assert isinstance(got["1"][0].error, ParseError) and got["1"][0].brief.state == "RUNNING"
    assert got["2"][0].error is None and got["2"][0].detail == ("detail", "RUNNING")
    p.stop()


def test_a_running_jobs_node_that_stops_responding_reaches_its_watchers(
    make_brief: Callable[..., JobBrief],
) -> None:
    states = {"node1": "mixed", "node2": "idle"}
    node_calls: list[list[str]] = []

    def nodes(names: Any, runner: Any) -> dict[str, str]:
        node_calls.append(list(names))
        return {n: states[n] for n in names}

    briefs = {"4": make_brief(4, "RUNNING", nodes=("node1",)), "5": make_brief(5, "PENDING")}
    p = JobPoller(
        runner=object(),
        fetch_brief=lambda ids, r: {i: briefs[i] for i in ids},  # type: ignore[arg-type]
        fetch_detail=lambda jid, r: ("detail", jid),
        fetch_nodes=nodes,
        interval=0.02,
        node_check_interval=0.05,
    )
    seen: list[JobUpdate] = []
    p.watch(4, seen.append)
    p.watch(5, lambda u: None)
    assert _until(lambda: len(seen) >= 1)
    assert seen[-1].node_alerts == ()
    states["node1"] = "mixed*"  # slurmd stopped answering
    assert _until(lambda: seen[-1].node_alerts == (("node1", "mixed*"),))
    states["node1"] = "mixed"
    assert _until(lambda: seen[-1].node_alerts == ())
    # only the running job's nodes are asked about, in one call
    assert node_calls and all(call == ["node1"] for call in node_calls)
    p.stop()


def test_slurms_first_expected_start_of_a_pending_job_reaches_watchers_at_once(
    make_brief: Callable[..., JobBrief],
) -> None:
    """Issue 13, point 8: the start time squeue's %S gives a pending job once backfill has computed it is a
    change of its own (state and reason stay PENDING/Resources): delivered within about one interval, with
    the detail fetched again (the panel reads both)."""
    from dataclasses import replace
    from datetime import datetime, timezone

    c = Cluster()
    c.states = {"8": make_brief(8, "PENDING", "Resources")}
    p = _poller(c, interval=0.1)
    seen: list[JobUpdate] = []
    p.watch(8, seen.append)
    assert _until(lambda: len(seen) == 1) and seen[0].brief.start_time is None
    start = datetime(2026, 12, 1, 14, 5, tzinfo=timezone.utc)
    t0 = time.monotonic()
    c.states["8"] = replace(c.states["8"], start_time=start)
    assert _until(lambda: len(seen) == 2)
    assert time.monotonic() - t0 < 0.1 * 3
    assert seen[-1].brief.start_time == start and c.detail_calls.count("8") == 2
    p.stop()


def test_a_poke_after_a_stop_cut_short_gets_a_thread_that_polls(make_brief: Callable[..., JobBrief]) -> None:
    # stop() waits at most 5 s for a poll in progress (and Ctrl-C can cut it shorter); the thread told to stop
    # finishes its slow poll alone, and a poke meanwhile must get a poller that runs, not one that is ending
    c = Cluster()
    c.states = {"1": make_brief(1, "RUNNING")}
    gate, first = threading.Event(), threading.Event()
    calls = 0

    def slow_first(ids: Any, runner: Any) -> dict[str, JobBrief]:
        nonlocal calls
        calls += 1
        if calls == 1:
            first.set()
            gate.wait(10)  # a controller slow to answer this one round
        return c.brief(ids, runner)

    p = JobPoller(runner=object(), fetch_brief=slow_first, fetch_detail=c.detail, interval=0.05)  # type: ignore[arg-type]
    p.watch(1, lambda u: None)
    assert first.wait(5)
    stopping = threading.Thread(target=p.stop, daemon=True)
    stopping.start()
    time.sleep(0.1)  # stop() is waiting for the round in progress
    p.poke()  # the next cell needs the poller again
    assert _until(lambda: calls >= 3), "the new thread does not poll while the old one is stuck in its round"
    gate.set()
    stopping.join(5)
    assert not stopping.is_alive()
    seen = calls
    assert _until(lambda: calls >= seen + 3), "the poller stopped with the old thread"
    assert p.running
    p.stop()
    assert not p.running
