"""A release that sticks (issue 25, point 7): slurmctld saves a cancel only with its periodic state save, so one
killed before then brings the job back RUNNING. The allocation follows its released job until Slurm has saved the
cancel, cancels it again if it comes back and shows what happened; ``find_leftovers`` lists such a job; the guardian
keeps released entries and looks at them once more when the kernel dies.

Slurm's commands are stand-ins that print what a real squeue prints for ``-o '%i|%T|%k'`` and record their argv;
the live case (a real slurmctld killed after a cancel) is tests/integration/faults/test_sandbox_faults.py.
"""

from __future__ import annotations

import getpass
import os
import signal
import socket
import subprocess
import sys
import textwrap
import threading
import time
from collections.abc import Callable, Iterator
from datetime import datetime, timezone
from pathlib import Path
from typing import Any

import pytest

from slurmlab.core.slurm.models import Job
from slurmlab.core.slurm.squeue_brief import JobBrief
from slurmlab.slurm.allocation import Allocation
from slurmlab.slurm.allocation import release as allocation_release
from slurmlab.slurm.allocation.release import ReleaseFollower
from slurmlab.slurm.guardian import RELEASE_SETTLE
from slurmlab.slurm.poller import JobUpdate
from slurmlab.slurm.runner import Runner
from slurmlab.widgets.panel import panel_html

REPO = Path(__file__).resolve().parents[3]
TAG = "slurmlab:h:1:abcd1234"
LIVE = "PENDING,CONFIGURING,RUNNING,SUSPENDED,REQUEUED,RESIZING"


def _stand_ins(tmp_path: Path) -> Runner:
    """squeue prints the file squeue.out (empty: none of the user's jobs lives); scancel succeeds; both log."""
    bin_dir = tmp_path / "bin"
    bin_dir.mkdir()
    log, out = tmp_path / "calls.log", tmp_path / "squeue.out"
    out.write_text("")
    for name, body in {"scancel": "exit 0", "squeue": f"cat {out}"}.items():
        path = bin_dir / name
        path.write_text(f'#!/bin/sh\necho "{name} $*" >> {log}\n{body}\n')
        path.chmod(0o755)
    conf = tmp_path / "slurm.conf"
    conf.write_text("# stand-in\n")
    return Runner(slurm_conf=str(conf), env={"PATH": f"{bin_dir}:{os.environ['PATH']}"}, timeout=10)


def _calls(tmp_path: Path, command: str) -> list[str]:
    log = tmp_path / "calls.log"
    return [c for c in (log.read_text().splitlines() if log.exists() else []) if c.startswith(command)]


class FakeClock:
    def __init__(self) -> None:
        self.now = 1000.0

    def __call__(self) -> float:
        return self.now


class _Watch:
    def __init__(self, poller: _Poller, job_id: str) -> None:
        self.poller, self.job_id, self.active = poller, job_id, True

    def cancel(self) -> None:
        self.active = False


class _Poller:
    """Records what the allocation asks of the shared poller; the test hands the updates over itself."""

    slow_words = None  # not held back by a rate limit

    def __init__(self) -> None:
        self.watches: list[_Watch] = []
        self.pokes = 0

    def is_pushed(self, job_id: str) -> bool:
        return False  # polled: no salloc of this process hears of the job

    def watch(self, job_id: str, callback: Any) -> _Watch:
        self.watches.append(_Watch(self, job_id))
        return self.watches[-1]

    def poke(self) -> None:
        self.pokes += 1

    def active(self) -> list[str]:
        return [w.job_id for w in self.watches if w.active]


def _brief(state: str) -> JobBrief:
    return JobBrief(
        display_id="401",
        job_id=401,
        array_job_id=None,
        array_task=None,
        state=state,
        reason=None,
        start_time=None,
        end_time=None,
        time_limit=None,
        time_left=None,
        time_used=None,
        num_nodes=1,
        nodelist="node1",
        nodes=("node1",),
        partition=None,
        user=None,
        tres_per_node=(),
    )


@pytest.fixture
def follower(monkeypatch: pytest.MonkeyPatch) -> Iterator[ReleaseFollower]:
    """This process's follower, driven by hand: its thread waits an hour between rounds, its clock is the test's."""
    mine = ReleaseFollower(interval=3600, clock=FakeClock())
    monkeypatch.setattr(allocation_release.LIVE, "follower", mine)
    yield mine
    mine.stop()


def _running(tmp_path: Path) -> tuple[Allocation, _Poller]:
    poller = _Poller()
    alloc = Allocation(
        "401",
        runner=_stand_ins(tmp_path),
        poller=poller,
        tag=TAG,  # type: ignore[arg-type]
        release_at_exit=False,
    )
    alloc._start_watch()
    alloc._on_update(JobUpdate("401", brief=_brief("RUNNING")))
    return alloc, poller


def test_a_job_a_restart_brought_back_is_cancelled_again_and_the_view_says_so(
    tmp_path: Path, follower: ReleaseFollower
) -> None:
    alloc, poller = _running(tmp_path)
    clock = follower.clock
    assert isinstance(clock, FakeClock)
    alloc.cancel()
    assert _calls(tmp_path, "scancel") == ["scancel 401"]
    alloc._on_update(JobUpdate("401", brief=_brief("CANCELLED")))
    assert alloc.ended and alloc.following_release and not alloc.settled
    assert follower.following() == ["401"] and poller.active() == []  # the poller no longer asks

    # slurmctld killed before its periodic save, restarted: the job is RUNNING again
    (tmp_path / "squeue.out").write_text(f"401|RUNNING|{TAG}\n")
    clock.now += 10
    follower.check_once()
    me = getpass.getuser()
    assert _calls(tmp_path, "squeue") == [f"squeue -h -u {me} -t {LIVE} -o %i|%T|%k"]
    assert _calls(tmp_path, "scancel") == ["scancel 401", f"scancel --user={me} 401"]
    assert alloc.state == "RUNNING" and not alloc.ended  # Slurm's truth, not the CANCELLED it said before
    note = alloc.note or ""
    assert "job 401 came back RUNNING after the Slurm controller restarted" in note
    assert "was lost" in note and "slurmlab cancelled it again at" in note
    assert note in panel_html(alloc) and note in alloc.summary()
    assert poller.active() == ["401"]  # the shared poller follows it again: the new cancel will show

    # the poller sees the second cancel; Slurm saves it in time: the job is looked at until then, not after
    (tmp_path / "squeue.out").write_text("")
    alloc._on_update(JobUpdate("401", brief=_brief("CANCELLED")))
    assert alloc.state == "CANCELLED" and note in panel_html(alloc)  # what happened stays said
    clock.now += 300
    follower.check_once()
    assert alloc.following_release and follower.following() == ["401"]  # 300 s after the second cancel
    clock.now += 40
    follower.check_once()
    assert not alloc.following_release and alloc.settled and follower.following() == []
    assert len(_calls(tmp_path, "squeue")) == 3 and len(_calls(tmp_path, "scancel")) == 2


def test_one_squeue_per_round_follows_every_released_job_of_a_cluster(
    tmp_path: Path, follower: ReleaseFollower
) -> None:
    runner, poller = _stand_ins(tmp_path), _Poller()
    allocs = [
        Allocation(
            str(j),
            runner=runner,
            poller=poller,
            tag=f"slurmlab:h:1:{j}",  # type: ignore[arg-type]
            release_at_exit=False,
        )
        for j in (401, 402, 403)
    ]
    for alloc in allocs:
        alloc.cancel()
    follower.check_once()
    follower.check_once()
    assert follower.rounds == 2 and len(_calls(tmp_path, "squeue")) == 2
    assert sorted(follower.following()) == ["401", "402", "403"]


class _NoThread:
    """Stands for the follower's thread: the test runs its loop itself, on the simulated clock."""

    def ensure_running(self) -> None: ...

    def stop(self, wake: object, timeout: float) -> None: ...


class _SimulatedWait:
    """The follower's wake event on a simulated clock: a wait moves the clock on by its timeout, and the loop is
    told to stop once the clock reaches ``until``. ``rounds_at`` records the clock at each squeue."""

    def __init__(
        self, clock: FakeClock, until: float, stop: threading.Event, squeues: Callable[[], int]
    ) -> None:
        self.clock, self.until, self.stop, self.squeues = clock, until, stop, squeues
        self.rounds_at: list[float] = []
        self._seen = squeues()

    def _note_rounds(self) -> None:
        now = self.squeues()
        self.rounds_at += [self.clock.now] * (now - self._seen)
        self._seen = now

    def wait(self, timeout: float | None = None) -> bool:
        self._note_rounds()
        self.clock.now = min(self.clock.now + (timeout or 0.0), self.until)
        if self.clock.now >= self.until:
            self.stop.set()
        return False

    def set(self) -> None: ...

    def clear(self) -> None: ...


def test_the_minute_after_cancelling_many_allocations_costs_two_squeues(tmp_path: Path) -> None:
    """The follower's cost (issue 27): 51 allocations cancelled within 5 s, then the follower's own loop on a
    simulated clock. A round looks at every job; the first comes within FIRST_CHECK of the first cancel, the
    next FOLLOW_INTERVAL later, and the follow ends once RELEASE_SETTLE has passed since the last cancel. The
    old cadence (a round every 10 s) made 6 squeues in that minute and 33 in all."""
    clock = FakeClock()
    follower = ReleaseFollower(clock=clock)  # the defaults: the cadence a kernel has
    follower._loop = _NoThread()  # type: ignore[assignment]
    runner, poller = _stand_ins(tmp_path), _Poller()
    start = clock.now
    with pytest.MonkeyPatch.context() as mp:
        mp.setattr(allocation_release.LIVE, "follower", follower)
        for j in range(501, 552):
            alloc = Allocation(
                str(j),
                runner=runner,
                poller=poller,  # type: ignore[arg-type]
                tag=f"slurmlab:h:1:{j}",
                release_at_exit=False,
            )
            alloc.cancel()
            clock.now += 0.1
    assert len(_calls(tmp_path, "scancel")) == 51 and len(follower.following()) == 51

    def squeues() -> int:
        return len(_calls(tmp_path, "squeue"))

    stop = threading.Event()
    wake = _SimulatedWait(clock, start + 60, stop, squeues)
    follower._wake = wake  # type: ignore[assignment]
    follower._run(stop)
    wake._note_rounds()
    assert squeues() == 2, f"squeues at {[t - start for t in wake.rounds_at]} s after the first cancel"
    first = wake.rounds_at[0] - start
    assert first <= allocation_release.FIRST_CHECK  # soon after the first cancel, once for all of them
    assert wake.rounds_at[1] - wake.rounds_at[0] == allocation_release.FOLLOW_INTERVAL
    assert len(follower.following()) == 51  # answered, but too soon after the cancels to be saved

    # on to the end: the follow stops by itself once Slurm has saved the last cancel
    stop = threading.Event()
    wake = _SimulatedWait(clock, start + 3600, stop, squeues)
    follower._wake = wake  # type: ignore[assignment]
    follower._run(stop)
    assert (
        follower.following() == [] and clock.now < start + 3600
    )  # it ended for want of jobs, not at the hour
    last_cancel = start + 5.0
    assert clock.now - last_cancel >= RELEASE_SETTLE
    assert squeues() <= 13


def test_another_job_with_the_released_id_is_left_alone(tmp_path: Path, follower: ReleaseFollower) -> None:
    """A restart that lost the job itself can hand its id to a new job of the same user: not the one released."""
    alloc, _ = _running(tmp_path)
    alloc.cancel()
    alloc._on_update(JobUpdate("401", brief=_brief("CANCELLED")))
    (tmp_path / "squeue.out").write_text("401|RUNNING|slurmlab:h:2:ffff0000\n")
    follower.check_once()
    assert (
        _calls(tmp_path, "scancel") == ["scancel 401"] and alloc.note is None and alloc.state == "CANCELLED"
    )


def test_a_controller_that_does_not_answer_settles_nothing(tmp_path: Path, follower: ReleaseFollower) -> None:
    alloc, _ = _running(tmp_path)
    alloc.cancel()
    alloc._on_update(JobUpdate("401", brief=_brief("CANCELLED")))
    squeue = tmp_path / "bin" / "squeue"
    squeue.write_text(
        squeue.read_text().replace(
            "cat ",
            "echo 'squeue: error: Unable to contact slurm controller (connect failure)' >&2; exit 1; cat ",
        )
    )
    clock = follower.clock
    assert isinstance(clock, FakeClock)
    clock.now += 1000  # long past the settle time, but every look failed: the crash may be now
    follower.check_once()
    assert alloc.following_release
    squeue.write_text(squeue.read_text().replace("exit 1; ", ""))
    follower.check_once()
    assert not alloc.following_release


def test_a_cancel_before_the_first_round_keeps_the_job_released_in_the_guardians_list(
    tmp_path: Path, follower: ReleaseFollower, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The guardian is told "released", not "drop": a kernel killed now still has its job looked at."""
    told: list[tuple[str, str]] = []

    class Guardian:
        def guard(self, key: str, runner: Runner, **_: object) -> None:
            told.append(("guard", key))

        def released(self, key: str) -> None:
            told.append(("released", key))

        def drop(self, key: str) -> None:
            told.append(("drop", key))

    monkeypatch.setattr(allocation_release, "get_guardian", lambda: Guardian())
    alloc, _ = _running(tmp_path)
    alloc.release_at_exit = True
    alloc.cancel()
    assert told == [("released", alloc._guard_key)]
    alloc._on_update(JobUpdate("401", brief=_brief("CANCELLED")))
    clock = follower.clock
    assert isinstance(clock, FakeClock)
    clock.now += 400
    follower.check_once()
    assert told[-1] == ("drop", alloc._guard_key)  # Slurm has saved the cancel: nothing more to check


# ---- a submission given up before salloc said the job's id ---------------------------------------
def test_a_job_made_after_its_submission_was_given_up_is_cancelled(
    tmp_path: Path, follower: ReleaseFollower
) -> None:
    """salloc's request sat unread in a frozen controller; submit gave up and killed salloc, and the controller
    made the job when it resumed: found by its tag among this user's jobs, and cancelled."""
    alloc = Allocation(
        None,
        runner=_stand_ins(tmp_path),
        poller=_Poller(),
        name="slurmlab-abcd1234",  # type: ignore[arg-type]
        tag=TAG,
        release_at_exit=False,
    )
    alloc.state, alloc.error = (
        "REJECTED",
        "Job submit/allocate failed: Socket timed out on send/recv operation",
    )
    allocation_release.LIVE.follow_given_up(alloc)
    assert follower.following() == [f"tag:{TAG}"]
    (tmp_path / "squeue.out").write_text(f"778|PENDING|slurmlab:h:1:other\n777|RUNNING|{TAG}\n")
    follower.check_once()
    assert _calls(tmp_path, "scancel") == [f"scancel --user={getpass.getuser()} 777"]
    assert "job 777 was made RUNNING after this submission was given up" in (alloc.note or "")
    (tmp_path / "squeue.out").write_text("")
    clock = follower.clock
    assert isinstance(clock, FakeClock)
    clock.now += 400
    follower.check_once()
    assert follower.following() == [] and len(_calls(tmp_path, "scancel")) == 1


@pytest.mark.parametrize(
    "said, may",
    [
        (
            "Job submit/allocate failed: Socket timed out on send/recv operation",
            True,
        ),  # the request may be read later
        ("Job submit/allocate failed: Invalid partition name specified", False),  # refused: no job
        (
            'Munge encode failed: Failed to access "/run/munge/munge.socket.2": No such file or directory',
            False,
        ),
    ],
)
def test_which_given_up_submissions_may_still_make_a_job(said: str, may: bool) -> None:
    from slurmlab.slurm.allocation.salloc import may_still_be_made

    alloc = Allocation(None, runner=object(), poller=_Poller(), release_at_exit=False)  # type: ignore[arg-type]
    assert may_still_be_made(
        alloc
    )  # salloc stopped while it waited: its request may be in the controller's hands
    alloc.state, alloc.error = "REJECTED", said
    assert may_still_be_made(alloc) is may


# ---- find_leftovers ---------------------------------------------------------------------------------
def _job(job_id: int, comment: str, state: str = "RUNNING") -> Job:
    return Job(
        job_id,
        f"slurmlab-{job_id}",
        state,
        nodelist="node1",
        nodes=("node1",),
        start_time=datetime.now(timezone.utc),
        comment=comment,
    )


def test_find_leftovers_lists_a_job_this_kernel_released_that_is_alive_again(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    from slurmlab.slurm import queries
    from slurmlab.slurm.allocation import leftovers as lo

    here = f"slurmlab:{socket.gethostname()}:{os.getpid()}"
    jobs = [
        _job(1, f"{here}::aaaa1111"),  # released by this kernel, RUNNING again: nobody follows it
        _job(2, f"{here}::bbbb2222"),  # this kernel's, never released: it follows it itself
        _job(3, f"{here}::cccc3333", "COMPLETING"),
    ]  # released, its cancel still completing
    by_id = {str(j.job_id): j for j in jobs}
    monkeypatch.setattr(lo, "tagged_jobs", lambda runner=None: [(str(j.job_id), j.comment) for j in jobs])
    monkeypatch.setattr(queries, "job_detail", lambda job_id, runner=None: by_id[job_id])
    assert lo.find_leftovers(runner=object()) == []  # type: ignore[arg-type]
    monkeypatch.setattr(allocation_release.LIVE, "released", {f"{here}::aaaa1111", f"{here}::cccc3333"})
    assert [j.job_id for j in lo.find_leftovers(runner=object())] == [1]  # type: ignore[arg-type]


# ---- the guardian, when the kernel dies after a cancel -----------------------------------------------
KERNEL = textwrap.dedent("""
    import sys, time
    from slurmlab.slurm.allocation import Allocation
    from slurmlab.slurm.guardian import get_guardian
    from slurmlab.slurm.runner import Runner

    class Poller:
        def poke(self): pass

    runner = Runner(slurm_conf=sys.argv[1], env={"PATH": sys.argv[2]})
    a = Allocation("501", runner=runner, poller=Poller(), tag="slurmlab:h:1:kept")
    a._guard()
    a.cancel()
    print(get_guardian().pid, flush=True)
    time.sleep(60)
""")


def test_a_kernel_killed_after_a_cancel_has_its_guardian_cancel_a_job_that_came_back(tmp_path: Path) -> None:
    runner = _stand_ins(tmp_path)
    # what a controller restarted after losing the cancel says: the job lives
    (tmp_path / "squeue.out").write_text("501|RUNNING|slurmlab:h:1:kept\n")
    kernel = subprocess.Popen(
        [sys.executable, "-c", KERNEL, str(runner.slurm_conf), runner.env["PATH"]],
        stdout=subprocess.PIPE,
        text=True,
        start_new_session=True,
        cwd=REPO,
        env={**os.environ, "PYTHONPATH": str(REPO)},
    )
    assert kernel.stdout is not None
    guardian = int(kernel.stdout.readline())
    os.killpg(kernel.pid, signal.SIGKILL)
    kernel.wait()
    deadline = time.monotonic() + 20
    while len(_calls(tmp_path, "scancel")) < 2 and time.monotonic() < deadline:
        time.sleep(0.05)
    me = getpass.getuser()
    assert _calls(tmp_path, "scancel") == ["scancel 501", f"scancel --user={me} 501"]
    assert _calls(tmp_path, "squeue") == [f"squeue -h -u {me} -t {LIVE} -o %i|%T|%k"]
    while os.path.exists(f"/proc/{guardian}") and time.monotonic() < deadline:
        if Path(f"/proc/{guardian}/stat").read_text().rsplit(")", 1)[1].split()[0] == "Z":
            break
        time.sleep(0.05)
    else:
        assert not os.path.exists(f"/proc/{guardian}"), "the guardian outlived its work"


# ---- the live panel --------------------------------------------------------------------------------
class _Updater:
    def __init__(self) -> None:
        self.removed = False

    def add(self, view: object) -> None: ...

    def remove(self, view: object) -> None:
        self.removed = True

    def mark_dirty(self, view: object) -> None: ...


def test_the_panel_keeps_following_a_released_job_until_slurm_has_saved_the_cancel(
    tmp_path: Path, follower: ReleaseFollower
) -> None:
    """The panel used to stop at the first ended state: a job a restart brought back then showed CANCELLED."""
    pytest.importorskip("ipywidgets")
    from slurmlab.widgets.panel import AllocationPanel
    from slurmlab.widgets.panel_ended import EndedSection

    alloc, _ = _running(tmp_path)
    panel = AllocationPanel(alloc, updater=_Updater())  # type: ignore[arg-type]

    def ask(_: Allocation) -> Any:
        raise RuntimeError("no accounting here")  # how it ended is not this test's subject

    panel.ended = EndedSection(lambda: None, ask=ask)
    alloc.cancel()
    alloc._on_update(JobUpdate("401", brief=_brief("CANCELLED")))
    deadline = time.monotonic() + 10
    while panel.ended.computing or panel.ended._job is None:
        panel.render()
        assert time.monotonic() < deadline, "the ended section never answered"
        time.sleep(0.02)
    panel.render()
    assert "data-state='CANCELLED'" in panel.header.value and not panel.updater.removed
    (tmp_path / "squeue.out").write_text(f"401|RUNNING|{TAG}\n")
    follower.check_once()
    panel.render()
    assert "data-state='RUNNING'" in panel.header.value and "came back RUNNING" in panel.body.value
    (tmp_path / "squeue.out").write_text("")
    alloc._on_update(JobUpdate("401", brief=_brief("CANCELLED")))
    clock = follower.clock
    assert isinstance(clock, FakeClock)
    clock.now += 400
    follower.check_once()
    panel.render()
    assert "data-state='CANCELLED'" in panel.header.value and "came back RUNNING" in panel.body.value
    assert panel.updater.removed  # settled: now it may stop
