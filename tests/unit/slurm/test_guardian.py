"""The guardian and the exit hooks, with stand-in Slurm commands that record their argv.

The real kernels and the real Slurm are in tests/integration/slurm/test_kernel_ends.py; here the
protocol, the scope of what is cancelled, forks, signals and the error hints run in milliseconds.
"""

from __future__ import annotations

import getpass
import multiprocessing
import os
import signal
import subprocess
import sys
import textwrap
import time
from pathlib import Path
from typing import Any

import pytest

from slurmlab.errors import AllocationError, ControllerDownError
from slurmlab.slurm.guardian import Guardian, cancel_entries, read_entries
from slurmlab.slurm.runner import Runner

REPO = Path(__file__).resolve().parents[3]


def _fake_slurm(tmp_path: Path, scripts: dict[str, str], conf_text: str = "# stand-in\n") -> Runner:
    """A Runner whose PATH starts with stand-ins; every call is appended to calls.log."""
    bin_dir = tmp_path / "bin"
    bin_dir.mkdir()
    log = tmp_path / "calls.log"
    for name, body in scripts.items():
        path = bin_dir / name
        path.write_text(f'#!/bin/sh\necho "{name} $* conf=$SLURM_CONF" >> {log}\n{body}\n')
        path.chmod(0o755)
    conf = tmp_path / "slurm.conf"
    conf.write_text(conf_text)
    return Runner(slurm_conf=str(conf), env={"PATH": f"{bin_dir}:{os.environ['PATH']}"}, timeout=10)


class FakeClock:
    """The guardian's sense of time, moved only by its own sleeps: waits are exact and cost nothing."""

    def __init__(self) -> None:
        self.now = 0.0
        self.sleeps: list[float] = []

    def __call__(self) -> float:
        return self.now

    def sleep(self, seconds: float) -> None:
        self.sleeps.append(seconds)
        self.now += seconds


def _calls(tmp_path: Path) -> list[str]:
    log = tmp_path / "calls.log"
    return log.read_text().splitlines() if log.exists() else []


def _wait_exit(proc: Any, timeout: float = 15) -> int:
    deadline = time.monotonic() + timeout
    while proc.poll() is None and time.monotonic() < deadline:
        time.sleep(0.05)
    assert proc.poll() is not None, "the guardian did not exit"
    return int(proc.returncode)


def test_cancels_what_is_registered_and_nothing_dropped(tmp_path: Path) -> None:
    runner = _fake_slurm(tmp_path, {"scancel": "exit 0"})
    g = Guardian()
    g.guard("a", runner, job_id="101", name="slurmlab-a", tag="slurmlab:h:1:a")
    g.guard("b", runner, job_id="102")
    g.guard("c", runner, job_id="103")
    g.drop("b")  # released or detached by the kernel
    proc = g._proc
    assert proc is not None
    time.sleep(0.3)
    assert proc.poll() is None  # it waits while the kernel lives
    g._close()  # the kernel is gone: its write end closes, however it died
    assert _wait_exit(proc) == 0
    me = getpass.getuser()
    calls = sorted(_calls(tmp_path))
    assert calls == [
        f"scancel --user={me} 101 conf={runner.slurm_conf}",
        f"scancel --user={me} 103 conf={runner.slurm_conf}",
    ]


def test_a_job_without_id_yet_is_found_by_name_and_exact_tag(tmp_path: Path) -> None:
    tag = "slurmlab:h:1:abcd"
    runner = _fake_slurm(
        tmp_path,
        {
            "scancel": "exit 0",
            # the same user's other jobs of that name: another tag, a tag that only starts the same
            "squeue": f"printf '7|slurmlab:h:2:ffff\\n8|{tag}\\n9|{tag}x\\n'",
        },
    )
    clock = FakeClock()
    left = cancel_entries(
        [
            {
                "job": None,
                "name": "slurmlab-abcd",
                "tag": tag,
                "conf": runner.slurm_conf,
                "env": dict(runner.env),
            }
        ],
        sleep=clock.sleep,
        clock=clock,
    )
    assert left == []
    cancelled = [c.split()[2] for c in _calls(tmp_path) if c.startswith("scancel")]
    assert cancelled == ["8"]  # once, however often the lookups see it


# ---- a job whose id the kernel never learnt (issue 25, point 4) --------------------------------------
_DOWN = "echo 'squeue: error: Unable to contact slurm controller (connect failure)' >&2; exit 1"


def _counting_squeue(tmp_path: Path, body: str) -> str:
    """A stand-in squeue that knows how often it was called ($n, from 1) before running ``body``."""
    count = tmp_path / "squeue.count"
    return f"n=$(cat {count} 2>/dev/null || echo 0); n=$((n+1)); echo $n > {count}\n{body}"


def _stand_in_salloc() -> subprocess.Popen[bytes]:
    """A process named salloc that, like salloc blocked in its request to a frozen controller, outlives SIGINT."""
    return subprocess.Popen(["bash", "-c", "trap '' INT; exec -a salloc sleep 60"])


def _search(runner: Runner, clock: FakeClock, **entry: object) -> list[Any]:
    return cancel_entries(
        [
            {
                "job": None,
                "name": "slurmlab-abcd",
                "tag": "slurmlab:h:1:abcd",
                "conf": runner.slurm_conf,
                "env": dict(runner.env),
                **entry,
            }
        ],
        sleep=clock.sleep,
        clock=clock,
    )


def test_a_job_the_controller_creates_while_salloc_waits_is_found_and_cancelled(tmp_path: Path) -> None:
    """The kernel died while salloc waited for a frozen controller: the first lookups find nothing, the job
    appears once the controller reads the request; the guardian keeps looking while salloc lives."""
    salloc = _stand_in_salloc()
    (tmp_path / "salloc.pid").write_text(str(salloc.pid))
    try:
        runner = _fake_slurm(
            tmp_path,
            {
                "scancel": "exit 0",
                "squeue": _counting_squeue(
                    tmp_path,
                    (
                        # the third lookup: the controller has read the request (job 8), and salloc, answered, exits
                        f'if [ "$n" -ge 3 ]; then kill $(cat {tmp_path}/salloc.pid); printf "8|slurmlab:h:1:abcd\\n"; fi'
                    ),
                ),
            },
        )
        clock = FakeClock()
        assert _search(runner, clock, salloc_pid=salloc.pid) == []
    finally:
        salloc.kill()
        salloc.wait()
    calls = _calls(tmp_path)
    assert [c.split()[2] for c in calls if c.startswith("scancel")] == ["8"]
    lookups = [c for c in calls if c.startswith("squeue")]
    assert all(c.split()[1:6] == ["-h", "-u", getpass.getuser(), "-n", "slurmlab-abcd"] for c in lookups)
    # a modest back-off: a handful of calls, and done within the grace after salloc's end
    assert 3 <= len(lookups) <= 10, lookups
    assert clock.now < 60


def test_a_job_created_after_salloc_gave_up_is_found_once_the_controller_answers(tmp_path: Path) -> None:
    """salloc timed out and is gone; the controller, frozen, reads its request only when it resumes, and its
    first answers come before the job exists: the guardian believes "no such job" only after a grace."""
    runner = _fake_slurm(
        tmp_path,
        {
            "scancel": "exit 0",
            "squeue": _counting_squeue(
                tmp_path,
                (
                    f'if [ "$n" -le 3 ]; then {_DOWN}; fi\n'
                    'if [ "$n" -ge 5 ]; then printf "9|slurmlab:h:1:abcd\\n"; fi'
                ),
            ),
        },
    )
    clock = FakeClock()
    assert _search(runner, clock) == []
    assert [c.split()[2] for c in _calls(tmp_path) if c.startswith("scancel")] == ["9"]


def test_a_job_never_created_costs_a_few_lookups_then_the_guardian_ends(tmp_path: Path) -> None:
    runner = _fake_slurm(tmp_path, {"scancel": "exit 0", "squeue": "exit 0"})
    clock = FakeClock()
    assert _search(runner, clock, salloc_pid=None) == []
    lookups = [c for c in _calls(tmp_path) if c.startswith("squeue")]
    assert 2 <= len(lookups) <= 6 and clock.now <= 30, (lookups, clock.now)
    assert not [c for c in _calls(tmp_path) if c.startswith("scancel")]


def test_the_search_gives_up_when_the_controller_never_answers(tmp_path: Path) -> None:
    entry_runner = _fake_slurm(tmp_path, {"scancel": "exit 0", "squeue": _DOWN})
    clock = FakeClock()
    left = cancel_entries(
        [
            {
                "job": None,
                "name": "slurmlab-abcd",
                "tag": "slurmlab:h:1:abcd",
                "conf": entry_runner.slurm_conf,
                "env": dict(entry_runner.env),
            }
        ],
        give_up_after=120,
        sleep=clock.sleep,
        clock=clock,
    )
    assert len(left) == 1 and clock.now <= 120
    assert len([c for c in _calls(tmp_path) if c.startswith("squeue")]) <= 20


# ---- jobs the kernel released shortly before it died (issue 25, point 7) -----------------------------
def test_released_jobs_are_checked_once_and_only_those_back_are_cancelled(tmp_path: Path) -> None:
    runner = _fake_slurm(
        tmp_path,
        {
            "scancel": "exit 0",
            # 71 came back (its cancel lost); 72 is another job of this user with the id a restart reused
            "squeue": "printf '71|RUNNING|slurmlab:h:1:a\\n72|RUNNING|slurmlab:h:1:other\\n'",
        },
    )
    now = time.time()
    base = {"conf": runner.slurm_conf, "env": dict(runner.env)}
    entries = [
        {**base, "job": "71", "tag": "slurmlab:h:1:a", "released": now - 20},
        {**base, "job": "72", "tag": "slurmlab:h:1:b", "released": now - 20},
        {**base, "job": "73", "tag": "slurmlab:h:1:c", "released": now - 3600},
    ]  # saved by Slurm long ago
    clock = FakeClock()
    assert cancel_entries(entries, sleep=clock.sleep, clock=clock) == []
    calls = _calls(tmp_path)
    assert [c.split()[:6] for c in calls if c.startswith("squeue")] == [
        [
            "squeue",
            "-h",
            "-u",
            getpass.getuser(),
            "-t",
            "PENDING,CONFIGURING,RUNNING,SUSPENDED,REQUEUED,RESIZING",
        ]
    ]
    assert [c.split()[2] for c in calls if c.startswith("scancel")] == ["71"]


def test_retries_while_the_controller_is_down_then_cancels(tmp_path: Path) -> None:
    count = tmp_path / "count"
    runner = _fake_slurm(
        tmp_path,
        {
            "scancel": textwrap.dedent(f"""\
        n=$(cat {count} 2>/dev/null || echo 0); echo $((n+1)) > {count}
        if [ "$n" -lt 2 ]; then echo 'scancel: error: Unable to contact slurm controller (connect failure)' >&2; exit 1; fi
        exit 0""")
        },
    )
    clock = FakeClock()
    entry = {"job": "55", "conf": runner.slurm_conf, "env": dict(runner.env)}
    assert cancel_entries([entry], sleep=clock.sleep, clock=clock) == []
    assert len(_calls(tmp_path)) == 3 and clock.sleeps == [1.0, 2.0]
    # and it gives up in the end instead of waiting for ever
    count.write_text("-1000\n")
    assert cancel_entries([entry], give_up_after=3.0, sleep=clock.sleep, clock=clock) == [entry]


def test_a_cluster_whose_configuration_is_gone_is_not_waited_for(tmp_path: Path) -> None:
    # a sandbox stopped and removed before the kernel's guardian got to it: no controller will come back
    runner = _fake_slurm(
        tmp_path, {"scancel": "echo 'scancel: error: Unable to contact slurm controller' >&2; exit 1"}
    )
    Path(str(runner.slurm_conf)).unlink()
    clock = FakeClock()
    entry = {"job": "56", "conf": runner.slurm_conf, "env": dict(runner.env)}
    assert cancel_entries([entry], sleep=clock.sleep, clock=clock) == []
    assert _calls(tmp_path) == [] and clock.sleeps == []


def test_a_sandbox_taken_down_is_not_waited_for_before_or_during_the_retries(tmp_path: Path) -> None:
    """A sandbox taken down on purpose keeps its slurm.conf and hardware file and removes its state file: its
    slurmctld saved the cancel as it stopped and its jobs ended with it, so there is nothing to retry for (the
    guardians of the demo's kernels waited GIVE_UP_AFTER for it, left behind in the Slurm roots)."""
    from slurmlab.core.gpu.hardware_profile import HARDWARE_FILE

    runner = _fake_slurm(
        tmp_path, {"squeue": "echo 'squeue: error: Unable to contact slurm controller' >&2; exit 1"}
    )
    folder = Path(str(runner.slurm_conf)).parent
    (folder / HARDWARE_FILE).write_text("{}")
    state = folder / "state.json"
    entry = {
        "job": "57",
        "tag": "slurmlab:h:1:a",
        "released": time.time() - 5,
        "conf": runner.slurm_conf,
        "env": dict(runner.env),
    }
    clock = FakeClock()
    assert cancel_entries([entry], sleep=clock.sleep, clock=clock) == []  # already down: not asked at all
    assert _calls(tmp_path) == [] and clock.sleeps == []

    state.write_text("{}")  # running (or crashed: the state file stays), then taken down during the retries

    def sleep(seconds: float) -> None:
        clock.sleep(seconds)
        if len(clock.sleeps) == 2:
            state.unlink()

    assert cancel_entries([entry], sleep=sleep, clock=clock) == []
    assert len(_calls(tmp_path)) == 2 and clock.now < 10  # the squeue twice, not GIVE_UP_AFTER of retries


def test_a_copied_configuration_whose_sandbox_is_gone_is_not_waited_for(tmp_path: Path) -> None:
    # a copy of a sandbox's slurm.conf outlives the sandbox: the munge folder it names is gone with it
    runner = _fake_slurm(
        tmp_path, {"squeue": "echo 'squeue: error: Unable to contact slurm controller' >&2; exit 1"}
    )
    conf = Path(str(runner.slurm_conf))
    conf.write_text(conf.read_text() + f"AuthInfo=socket={tmp_path}/gone-sandbox/munge/munged.sock\n")
    entry = {
        "job": "58",
        "tag": "slurmlab:h:1:a",
        "released": time.time() - 5,
        "conf": str(conf),
        "env": dict(runner.env),
    }
    clock = FakeClock()
    assert cancel_entries([entry], sleep=clock.sleep, clock=clock) == []
    assert _calls(tmp_path) == [] and clock.sleeps == []


def test_a_job_that_already_ended_is_not_an_error(tmp_path: Path) -> None:
    runner = _fake_slurm(
        tmp_path,
        {
            "scancel": "echo 'scancel: error: Kill job error on job id 9: Job/step already completing or completed' >&2; exit 1"
        },
    )
    assert cancel_entries([{"job": "9", "conf": runner.slurm_conf, "env": dict(runner.env)}]) == []


def test_lines_that_are_not_messages_are_ignored() -> None:
    lines = [
        b'{"op":"guard","key":"k","job":"1"}\n',
        b"garbage\n",
        b"[1,2]\n",
        b'{"op":"guard"}\n',
        b'{"op":"guard","key":"j","job":"2"}\n',
        b'{"op":"drop","key":"j"}\n',
        b"\xff\xfe\n",
    ]
    assert list(read_entries(lines)) == ["k"]


# the fork is the subject: a kernel's fork (multiprocessing's default before 3.14) must not hold the guardian's
# pipe open. Python 3.12+ warns about forking a threaded process; that warning is not this test's finding
@pytest.mark.filterwarnings("ignore:This process .* is multi-threaded, use of fork:DeprecationWarning")
def test_a_forked_child_does_not_keep_the_guardian_waiting(tmp_path: Path) -> None:
    runner = _fake_slurm(tmp_path, {"scancel": "exit 0"})
    g = Guardian()
    g.guard("a", runner, job_id="201")
    child = multiprocessing.get_context("fork").Process(target=time.sleep, args=(20,))
    child.start()
    try:
        proc = g._proc
        assert proc is not None
        g._close()
        assert _wait_exit(proc, 10) == 0  # well before the child ends
        assert child.is_alive()
    finally:
        child.kill()
        child.join()
    assert [c.split()[2] for c in _calls(tmp_path)] == ["201"]


KERNEL = textwrap.dedent("""
    import os, sys, time
    from slurmlab.slurm.guardian import get_guardian
    from slurmlab.slurm.runner import Runner
    runner = Runner(slurm_conf=sys.argv[1], env={"PATH": sys.argv[2]})
    get_guardian().guard("k", runner, job_id="301")
    get_guardian().guard("d", runner, job_id="302")
    get_guardian().drop("d")
    print(get_guardian().pid, flush=True)
    time.sleep(60)
""")


def test_killing_the_kernel_and_its_process_group_cancels_through_the_guardian(tmp_path: Path) -> None:
    runner = _fake_slurm(tmp_path, {"scancel": "exit 0"})
    kernel = subprocess.Popen(
        [sys.executable, "-c", KERNEL, str(runner.slurm_conf), runner.env["PATH"]],
        stdout=subprocess.PIPE,
        text=True,
        start_new_session=True,
        cwd=REPO,
        env={**os.environ, "PYTHONPATH": str(REPO)},
    )
    assert kernel.stdout is not None
    guardian_pid = int(kernel.stdout.readline())
    os.killpg(kernel.pid, signal.SIGKILL)  # a forced restart kills the whole group
    kernel.wait()
    deadline = time.monotonic() + 15
    while not _calls(tmp_path) and time.monotonic() < deadline:
        time.sleep(0.05)
    assert [c.split()[2] for c in _calls(tmp_path)] == ["301"]
    while os.path.exists(f"/proc/{guardian_pid}") and time.monotonic() < deadline:
        if Path(f"/proc/{guardian_pid}/stat").read_text().rsplit(")", 1)[1].split()[0] == "Z":
            break
        time.sleep(0.05)
    else:
        assert not os.path.exists(f"/proc/{guardian_pid}"), "the guardian outlived its work"


SIGNALLED = textwrap.dedent("""
    import os, signal, sys, time
    from slurmlab.slurm.allocation import Allocation
    from slurmlab.slurm.runner import Runner

    class Poller:
        def poke(self): pass

    mode = sys.argv[3]
    # the disposition each case relies on, whatever this child inherited (under `nohup`, SIGHUP comes ignored)
    signal.signal(signal.SIGHUP, signal.SIG_DFL)
    if mode == "chained":
        signal.signal(signal.SIGHUP, lambda *a: print("previous handler ran", flush=True))
    if mode == "nohup":
        signal.signal(signal.SIGHUP, signal.SIG_IGN)
    runner = Runner(slurm_conf=sys.argv[1], env={"PATH": sys.argv[2]})
    a = Allocation("401", runner=runner, poller=Poller(), tag="slurmlab:h:1:x")
    if mode == "fork":
        import multiprocessing
        ctx = multiprocessing.get_context("fork")
        ready = ctx.Event()

        def work():
            ready.set()
            time.sleep(30)

        child = ctx.Process(target=work)
        child.start()
        # CPython drops a signal that lands between fork() and the child's signal reset: wait until it runs
        ready.wait(10)
        os.kill(child.pid, signal.SIGTERM)  # pool.terminate() does this to its workers
        child.join()
        print("child", child.exitcode, flush=True)
        a.release_at_exit = False  # judged by the child alone
        sys.exit(0)
    os.kill(os.getpid(), signal.SIGTERM if mode == "term" else signal.SIGHUP)
    time.sleep(0.5)
    print("still alive", flush=True)
    a.release_at_exit = False  # what survives here is judged by the handler alone, not atexit
""")


def _signalled(tmp_path: Path, mode: str) -> subprocess.CompletedProcess[str]:
    runner = _fake_slurm(tmp_path, {"scancel": "exit 0"})
    return subprocess.run(
        [sys.executable, "-c", SIGNALLED, str(runner.slurm_conf), runner.env["PATH"], mode],
        capture_output=True,
        text=True,
        timeout=60,
        cwd=REPO,
        env={**os.environ, "PYTHONPATH": str(REPO)},
    )


@pytest.mark.parametrize("mode, signum", [("term", signal.SIGTERM), ("hup", signal.SIGHUP)])
def test_term_and_hup_release_then_die_of_the_signal(tmp_path: Path, mode: str, signum: int) -> None:
    out = _signalled(tmp_path, mode)
    assert out.returncode == -signum, out.stderr
    assert "still alive" not in out.stdout
    assert [c.split()[:2] for c in _calls(tmp_path)] == [["scancel", "401"]]


def test_a_previous_handler_is_chained(tmp_path: Path) -> None:
    chained = _signalled(tmp_path, "chained")
    assert chained.returncode == 0, chained.stderr
    assert "previous handler ran" in chained.stdout and "still alive" in chained.stdout
    assert [c.split()[:2] for c in _calls(tmp_path)] == [["scancel", "401"]]


def test_nohup_keeps_the_allocation(tmp_path: Path) -> None:
    out = _signalled(tmp_path, "nohup")
    assert out.returncode == 0 and "still alive" in out.stdout, out.stderr
    assert _calls(tmp_path) == []


def test_a_forked_child_killed_by_term_releases_nothing_of_its_parent(tmp_path: Path) -> None:
    out = _signalled(tmp_path, "fork")
    assert out.returncode == 0 and f"child -{int(signal.SIGTERM)}" in out.stdout, out.stderr
    assert _calls(tmp_path) == []


# ---- one hint, the one that fits the cause (issue 10, point 8) -------------------------------------
@pytest.fixture(autouse=True)
def _own_follower(monkeypatch: pytest.MonkeyPatch) -> Any:
    """A submission given up is followed for minutes (a job made late is cancelled): here by a follower of this
    test alone, stopped with it, never the session's."""
    from slurmlab.slurm.allocation import release as allocation_release

    follower = allocation_release.ReleaseFollower(interval=3600)
    monkeypatch.setattr(allocation_release.LIVE, "follower", follower)
    yield follower
    follower.stop()


class _Poller:
    def poke(self) -> None:
        pass


def _submit(runner: Runner) -> AllocationError:
    from slurmlab.slurm.allocation import Allocation

    with pytest.raises(AllocationError) as info:
        Allocation.submit(
            ["-n1"],
            runner=runner,
            poller=_Poller(),
            validate=False,  # type: ignore[arg-type]
            id_timeout=0.5,
            release_at_exit=False,
        )
    return info.value


def test_a_munge_failure_keeps_one_hint_naming_munge(tmp_path: Path) -> None:
    runner = _fake_slurm(
        tmp_path,
        {
            "salloc": (
                'echo \'salloc: error: Munge encode failed: Failed to access "/run/munge/munge.socket.2": '
                "No such file or directory' >&2; exit 1"
            )
        },
    )
    err = _submit(runner)
    assert "munge" in (err.hint or "").lower()
    assert "dry-run" not in str(err) and str(err).count("->") == 1


def test_a_silent_controller_keeps_the_runners_hint(tmp_path: Path) -> None:
    # munge is not the question here: a stand-in slurm.conf names no munge, else the runner's probe of a stalled
    # salloc asks this machine's own munged, and where none runs (a fresh machine) says "munged is not running"
    runner = _fake_slurm(
        tmp_path,
        {
            "salloc": "sleep 30",
            "squeue": "echo 'squeue: error: Socket timed out on send/recv operation' >&2; exit 1",
        },
        conf_text="# stand-in\nAuthType=auth/slurm\n",
    )
    err = _submit(runner)
    assert isinstance(err.__cause__, ControllerDownError) or "controller" in str(err).lower()
    assert "dry-run" not in str(err) and str(err).count("->") == 1


def test_a_refused_request_gets_a_request_hint(tmp_path: Path) -> None:
    runner = _fake_slurm(
        tmp_path,
        {
            "salloc": (
                "echo 'salloc: error: Job submit/allocate failed: Invalid partition name specified' >&2; exit 1"
            )
        },
    )
    err = _submit(runner)
    assert "Invalid partition name specified" in str(err) and "sinfo" in (err.hint or "")
    assert str(err).count("->") == 1


# salloc after its handler of the job's end reaped its command: it waits for a child that is gone until a signal
# sets its exit flag (deaf to SIGINT once granted, as salloc is); here SIGHUP is written down before it exits
_LOST_ITS_COMMAND = "trap '' INT; trap 'echo hup > \"$0\"; exit 0' HUP; while :; do sleep 0.05; done"


def _lingering_salloc(marker: Path, name: str) -> subprocess.Popen[bytes]:
    # argv[0] salloc, its job's name among its words: as the guardian finds a held salloc in /proc
    return subprocess.Popen(
        ["salloc", "-c", _LOST_ITS_COMMAND, str(marker), f"--job-name={name}"], executable="/bin/bash"
    )


def test_the_salloc_of_a_cancelled_job_that_lingers_is_nudged_and_another_is_not(tmp_path: Path) -> None:
    """salloc 22.05 busy-waited for 20-40 s (100 % of a core) after a killed kernel's job was cancelled, having lost
    its command's exit (measured in the sandbox tests): the guardian ends that with SIGHUP once the job is
    cancelled; a salloc whose pid now names another job is left alone."""
    runner = _fake_slurm(tmp_path, {"scancel": "exit 0"})
    mine = _lingering_salloc(tmp_path / "mine", "slurmlab-a")
    other = _lingering_salloc(tmp_path / "other", "slurmlab-someone-else")
    try:
        g = Guardian()
        g.guard("a", runner, job_id="101", name="slurmlab-a", tag="slurmlab:h:1:a", salloc_pid=mine.pid)
        g.guard("b", runner, job_id="102", name="slurmlab-b", tag="slurmlab:h:1:b", salloc_pid=other.pid)
        proc = g._proc
        assert proc is not None
        g._close()
        assert _wait_exit(proc) == 0
        assert mine.wait(timeout=10) == 0 and (tmp_path / "mine").read_text().strip() == "hup"
        assert other.poll() is None and not (tmp_path / "other").exists()
    finally:
        for p in (mine, other):
            p.kill()
            p.wait()
