"""The waits the shared poller chooses (issue 14, point 2): no back-off while a watched job is pending or
running, however long it has been quiet; back-off only when every watched job has ended, or while the
controller fails.

The loop is driven round by round (``JobPoller.step``) on a simulated clock, so "a quiet minute" takes no
time and nothing here depends on the machine's speed: the assertions are on the chosen intervals and on
the argv the poller ran.
"""

from __future__ import annotations

from typing import Any

import pytest

from slurmlab.core.slurm.squeue_brief import BRIEF_FORMAT, JobBrief
from slurmlab.errors import ControllerDownError, JobNotFoundError
from slurmlab.slurm.poller import JobPoller, JobUpdate
from slurmlab.testing import FakeRunner


class Source:
    """Scripted brief states (``sim.brief``); ``down`` makes every squeue fail as a dead controller does."""

    def __init__(self, sim: Any, **states: str) -> None:
        self.states = {jid: sim.brief(int(jid.lstrip("j")), s) for jid, s in states.items()}
        self.down = False

    def brief(self, ids: Any, runner: Any) -> dict[str, JobBrief]:
        if self.down:
            raise ControllerDownError("the Slurm controller is not responding")
        return {i: self.states[i] for i in ids if i in self.states}

    def detail(self, job_id: str, runner: Any) -> Any:
        if job_id not in self.states:
            raise JobNotFoundError("gone")
        return ("detail", self.states[job_id].state)


def _poller(sim: Any, src: Source) -> JobPoller:
    """The poller of ``src`` on the simulated clock (the ``sim`` fixture: tests/unit/slurm/conftest.py)."""
    return sim.poller(fetch_brief=src.brief, fetch_detail=src.detail, quiet_after=60.0)  # type: ignore[no-any-return]


@pytest.mark.parametrize("state", ["PENDING", "RUNNING", "CONFIGURING", "SUSPENDED", "COMPLETING"])
def test_a_pending_or_running_job_keeps_the_base_interval_after_a_quiet_minute(sim: Any, state: str) -> None:
    src = Source(sim, **{"7": state})
    p = _poller(sim, src)
    p.watch(7, lambda u: None)  # registration only: the rounds are driven here
    waits = sim.run_for(p, 300)
    assert len(waits) >= 250  # five quiet minutes, a round a second
    assert max(waits) == 1.0 and max(p.intervals) == 1.0


def test_a_change_after_a_quiet_minute_is_seen_at_the_next_round(sim: Any) -> None:
    src = Source(sim, **{"7": "PENDING"})
    p = _poller(sim, src)
    seen: list[JobUpdate] = []
    p.watch(7, seen.append)
    sim.run_for(p, 90)
    src.states["7"] = sim.brief(7, "RUNNING")
    wait_before = p.current_interval
    p.step()
    assert seen[-1].brief is not None and seen[-1].brief.state == "RUNNING"
    assert wait_before <= 1.0  # the change waited at most one base interval to be asked about


def test_only_ended_jobs_watched_backs_off_to_the_ceiling_and_a_poke_resets(sim: Any) -> None:
    src = Source(sim, **{"7": "COMPLETED", "8": "CANCELLED"})
    p = _poller(sim, src)
    p.watch(7, lambda u: None)
    p.watch(8, lambda u: None)
    waits = sim.run_for(p, 300)
    assert waits[0] == 1.0 and max(waits) == 10.0  # nothing more is expected of them
    JobPoller.poke(p)
    p.stop()
    assert p.current_interval == 1.0


def test_one_active_job_among_ended_ones_keeps_the_base_interval(sim: Any) -> None:
    src = Source(sim, **{"7": "COMPLETED", "8": "PENDING"})
    p = _poller(sim, src)
    for jid in (7, 8):
        p.watch(jid, lambda u: None)
    assert max(sim.run_for(p, 200)) == 1.0
    src.states["8"] = sim.brief(8, "COMPLETED")
    assert max(sim.run_for(p, 200)) == 10.0  # now both have ended


def test_a_job_slurm_has_forgotten_lets_the_poller_back_off(sim: Any) -> None:
    src = Source(sim, **{"7": "RUNNING"})
    p = _poller(sim, src)
    ups: list[JobUpdate] = []
    p.watch(7, ups.append)
    sim.run_for(p, 10)
    del src.states["7"]
    waits = sim.run_for(p, 300)
    assert ups[-1].gone and max(waits) == 10.0


def test_a_failing_controller_is_asked_less_often_and_recovery_resets(sim: Any) -> None:
    src = Source(sim, **{"7": "RUNNING"})
    p = _poller(sim, src)
    p.watch(7, lambda u: None)
    sim.run_for(p, 5)
    src.down = True
    waits = sim.run_for(p, 60)
    assert waits[:4] == [2.0, 4.0, 8.0, 10.0] and max(waits) == 10.0
    src.down = False
    assert p.step() == 1.0  # the first good answer after failures is a change: back to the base interval


def test_round_hooks_run_after_each_round_and_a_raising_hook_does_not_stop_polling(sim: Any) -> None:
    src = Source(sim, **{"7": "RUNNING"})
    p = JobPoller(
        runner=object(),  # type: ignore[arg-type]
        fetch_brief=src.brief,
        fetch_detail=src.detail,
        interval=0.01,
    )
    calls: list[int] = []

    def bad() -> None:
        raise RuntimeError("boom")

    p.add_round_hook(lambda: calls.append(p.polls))
    p.add_round_hook(bad)
    p.watch(7, lambda u: None)
    import time

    end = time.monotonic() + 5
    while len(calls) < 3 and time.monotonic() < end:
        time.sleep(0.01)
    p.stop()
    assert len(calls) >= 3 and calls == sorted(calls)  # after every round, in order


def test_against_recorded_slurm_output_one_brief_squeue_per_round_and_detail_only_on_change(sim: Any) -> None:
    """The real queries (argv through the one Runner, recorded 24.11 output): a quiet minute of a pending
    job costs one brief squeue a second; its start is fetched in detail at the next round."""
    fake = FakeRunner()
    fake.replay(
        "24.11/00_sinfo_version.txt",
        "24.11/l02_squeue_brief_pending.txt",
        "24.11/l02_scontrol_json_show_job_d_pending.json",
    )
    p = sim.poller(fake, quiet_after=60.0)
    seen: list[JobUpdate] = []
    p.watch(18, seen.append)
    waits = sim.run_for(p, 75)
    assert max(waits) == 1.0
    squeues = [a for a in fake.history if a[0] == "squeue"]
    assert len(squeues) == len(waits)
    assert all(a == ["squeue", "-h", "-t", "all", "-j", "18", "-o", BRIEF_FORMAT] for a in squeues)
    details = [a for a in fake.history if a[0] == "scontrol" and "job" in a]
    assert (
        len(details) == 1
        and seen[-1].error is None
        and seen[-1].brief is not None
        and seen[-1].brief.state == "PENDING"
    )
    fake.replay(
        "24.11/l06_squeue_brief_running.txt",
        "24.11/l06_scontrol_json_show_job_d_running.json",
        "24.11/l07_sinfo_node_states.txt",
    )
    p.step()
    assert seen[-1].error is None and seen[-1].brief is not None and seen[-1].brief.state == "RUNNING"
    assert seen[-1].detail is not None
    assert len([a for a in fake.history if a[0] == "scontrol" and "job" in a]) == 2
    fake.close()
