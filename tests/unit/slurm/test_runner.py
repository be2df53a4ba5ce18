"""The one runner: argv only, timeouts, errors mapped from Slurm's own messages."""

from __future__ import annotations

import asyncio
import os
import shutil
import socket
import subprocess
import sys
import tempfile
import threading
import time
from collections.abc import Iterator
from pathlib import Path

import pytest
from shared_paths import REPO, list_shared

from slurmlab.errors import (
    ControllerDownError,
    JobNotFoundError,
    MungeError,
    SlurmError,
    SlurmNotFoundError,
    SlurmTimeoutError,
)
from slurmlab.sandbox.processes import alive
from slurmlab.slurm import runner as runner_mod
from slurmlab.slurm.runner import Runner, classify_failure, munge_socket, probe_munge


def test_rejects_a_shell_string() -> None:
    with pytest.raises(TypeError, match="argv"):
        Runner().run("squeue -h")  # type: ignore[arg-type]


def test_missing_command_names_the_install() -> None:
    with pytest.raises(SlurmNotFoundError) as info:
        Runner().run(["squeue-not-installed-xyz"])
    assert "apt-get install slurm-client" in str(info.value)


def test_timeout_kills_and_says_controller_not_responding() -> None:
    with pytest.raises(SlurmTimeoutError) as info:
        Runner(timeout=0.3).run([sys.executable, "-c", "import time; time.sleep(5)"])
    assert "not responding" in str(info.value)
    assert isinstance(info.value, ControllerDownError)


def test_async_twin_same_errors_and_output() -> None:
    r = Runner(timeout=0.3)
    res = asyncio.run(r.arun([sys.executable, "-c", "print('hi')"], timeout=10))
    assert res.stdout.strip() == "hi" and res.ok
    with pytest.raises(SlurmTimeoutError):
        asyncio.run(r.arun([sys.executable, "-c", "import time; time.sleep(5)"]))
    with pytest.raises(SlurmError) as info:
        asyncio.run(r.arun([sys.executable, "-c", "import sys; sys.exit('squeue: error: boom')"], timeout=10))
    assert "boom" in str(info.value) and info.value.returncode == 1


def test_env_carries_slurm_conf_and_cluster(tmp_path) -> None:  # type: ignore[no-untyped-def]
    conf = tmp_path / "slurm.conf"
    conf.write_text("ClusterName=c1\n")
    r = Runner(slurm_conf=str(conf), cluster="c1", env={"A": "1"})
    code = "import os; print(os.environ['SLURM_CONF'], os.environ['SLURM_CLUSTERS'], os.environ['A'])"
    assert r.run([sys.executable, "-c", code]).stdout.split() == [str(conf), "c1", "1"]


@pytest.mark.parametrize(
    "stderr, kind",
    [
        (
            "squeue: error: Munge decode failed: Socket communication error\n"
            "slurm_load_jobs error: Protocol authentication error",
            MungeError,
        ),
        ("slurm_load_jobs error: Unable to contact slurm controller (connect failure)", ControllerDownError),
        ("squeue: error: slurm_receive_msg: Socket timed out on send/recv operation", ControllerDownError),
        ("slurm_load_jobs error: Invalid job id specified", JobNotFoundError),
        ("scancel: error: Kill job error on job id 99: Invalid job id specified", JobNotFoundError),
        ("salloc: error: Unable to allocate resources: Connection timed out", SlurmError),
    ],
)
def test_classify_known_messages(stderr: str, kind: type) -> None:
    err = classify_failure(["squeue"], 1, stderr)
    assert type(err) is kind
    assert stderr.splitlines()[-1] in str(err)  # Slurm's own words are always shown


# refusals recorded from the sandbox on every Slurm version, and the shared real-cluster ones when present
FIXTURE_STDERR = (
    sorted((REPO / "tests" / "data" / "slurm").glob("*/e*.stderr"))
    + list_shared("slurm", "22.05", pattern="e*.stderr")
    + list_shared("slurm", "24.11", pattern="e*.stderr")
)


@pytest.mark.parametrize("path", FIXTURE_STDERR, ids=lambda p: f"{p.parent.name}/{p.name}")
def test_recorded_refusals_are_plain_slurm_errors_with_slurms_message(path) -> None:  # type: ignore[no-untyped-def]
    text = path.read_text()
    err = classify_failure(["salloc"], 1, text)
    # a refused request is not a controller outage, and the message is Slurm's own
    assert not isinstance(err, ControllerDownError | MungeError)
    words = ("error", "aborted", "fatal", "unrecognized")
    last_error = [ln for ln in text.splitlines() if any(w in ln for w in words)][-1]
    assert last_error.strip() in str(err)


def test_node_configuration_refusal_gets_a_next_step() -> None:
    err = classify_failure(
        ["salloc"],
        1,
        "salloc: error: Job submit/allocate failed: Requested node configuration is not available",
    )
    assert err.hint and "sinfo" in err.hint


def test_pyslurm_backend_is_opt_in_and_names_what_is_missing(monkeypatch: pytest.MonkeyPatch) -> None:
    from slurmlab.errors import MissingExtraError
    from slurmlab.slurm import pyslurm_backend, queries

    monkeypatch.delenv("SLURMLAB_BACKEND", raising=False)
    assert not pyslurm_backend.selected()
    monkeypatch.setenv("SLURMLAB_BACKEND", "pyslurm")
    assert pyslurm_backend.selected()
    monkeypatch.setitem(sys.modules, "pyslurm", None)  # not importable here (needs Slurm 25.11)
    with pytest.raises(MissingExtraError) as info:
        queries.brief_states(["1"], Runner())
    assert "pyslurm" in str(info.value)


def test_a_missing_slurm_conf_fails_at_once_with_the_fix() -> None:
    t0 = time.monotonic()
    with pytest.raises(SlurmError) as info:
        Runner(slurm_conf="/nonexistent/slurm.conf", timeout=30).run(["sinfo", "--version"])
    assert time.monotonic() - t0 < 1  # Slurm itself would retry for 60 s
    assert "/nonexistent/slurm.conf" in str(info.value) and "sandbox" in str(info.value)


# ---- munge: a stopped or frozen munged is named quickly ----------------------------------------------------
SLOW = [sys.executable, "-c", "import time; time.sleep(20)"]


@pytest.fixture
def short_dir() -> Iterator[Path]:
    # unix socket paths must fit in 108 bytes: pytest's tmp_path can be longer
    path = Path(tempfile.mkdtemp(prefix="slr-", dir="/tmp"))
    yield path
    shutil.rmtree(path, ignore_errors=True)


def conf_with_socket(folder: Path, sock: Path, *, sandbox: bool) -> Path:
    conf = folder / "slurm.conf"
    head = "# slurmlab sandbox, profile seed, for Slurm 22.05\n" if sandbox else "# site config\n"
    conf.write_text(head + "ClusterName=c\nAuthType=auth/munge\nAuthInfo=socket=" + str(sock) + "\n")
    return conf


def test_munge_socket_is_read_from_the_configuration(tmp_path: Path) -> None:
    conf = tmp_path / "slurm.conf"
    conf.write_text("AuthType = auth/munge  # comment\nAuthInfo=ttl=60,socket=/x/munged.sock\n")
    assert munge_socket(str(conf)) == "/x/munged.sock"
    conf.write_text("ClusterName=c\n#AuthInfo=socket=/commented/out\n")
    assert munge_socket(str(conf)) == runner_mod.DEFAULT_MUNGE_SOCKET
    conf.write_text("AuthType=auth/slurm\nAuthInfo=socket=/x/munged.sock\n")
    assert munge_socket(str(conf)) is None  # Slurm's own auth: munge is not involved
    assert munge_socket(str(tmp_path / "missing.conf")) is None


def test_probe_names_a_stopped_munged(short_dir: Path) -> None:
    missing = short_dir / "gone.sock"
    problem = probe_munge(str(missing))
    assert problem is not None and problem.kind == "stopped" and str(missing) in problem.detail
    # a socket file left by a killed munged refuses connections
    left = short_dir / "left.sock"
    s = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
    s.bind(str(left))
    s.close()
    problem = probe_munge(str(left))
    assert problem is not None and problem.kind == "stopped" and "refused" in problem.detail.lower()


class SilentMunged:
    """A socket that accepts connections and never answers: what clients see of a SIGSTOP'd munged."""

    def __init__(self, path: Path) -> None:
        self.sock = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
        self.sock.bind(str(path))
        self.sock.listen(16)
        self.held: list[socket.socket] = []
        self.thread = threading.Thread(target=self._accept, daemon=True)
        self.thread.start()

    def _accept(self) -> None:
        while True:
            try:
                conn, _ = self.sock.accept()
            except OSError:
                return
            self.held.append(conn)

    def close(self) -> None:
        self.sock.close()
        for c in self.held:
            c.close()


@pytest.fixture
def silent_munged(short_dir: Path) -> Iterator[Path]:
    if shutil.which("munge") is None:
        pytest.skip("munge's client is not installed (apt-get install munge)")
    path = short_dir / "frozen.sock"
    server = SilentMunged(path)
    yield path
    server.close()


def test_probe_names_a_frozen_munged_within_its_timeout(silent_munged: Path) -> None:
    t0 = time.monotonic()
    problem = probe_munge(str(silent_munged), timeout=0.5)
    assert time.monotonic() - t0 < 5
    assert problem is not None and problem.kind == "frozen" and "does not answer" in problem.detail


@pytest.mark.parametrize("sandbox", [True, False], ids=["sandbox", "cluster"])
def test_a_command_stuck_on_a_stopped_munged_fails_fast_with_one_fitting_hint(
    short_dir: Path, sandbox: bool
) -> None:
    conf = conf_with_socket(short_dir, short_dir / "gone.sock", sandbox=sandbox)
    r = Runner(slurm_conf=str(conf), timeout=20, munge_probe_after=0.3)
    t0 = time.monotonic()
    with pytest.raises(MungeError) as info:
        r.run(SLOW)
    assert time.monotonic() - t0 < 5  # not the 20 s timeout
    err = info.value
    assert "munge" in err.message and "not running" in err.message and "controller" not in str(err)
    assert err.hint is not None and str(err).count("->") == 1
    if sandbox:
        assert err.hint == f"bring munged back, keeping every job: slurmlab sandbox restart --dir {short_dir}"
    else:
        assert "admins" in err.hint and "sandbox" not in err.hint


def test_a_command_stuck_on_a_frozen_munged_fails_fast_sync_and_async(
    monkeypatch: pytest.MonkeyPatch, short_dir: Path, silent_munged: Path
) -> None:
    monkeypatch.setattr(runner_mod, "MUNGE_PROBE_TIMEOUT", 0.5)
    conf = conf_with_socket(short_dir, silent_munged, sandbox=True)
    r = Runner(slurm_conf=str(conf), timeout=20, munge_probe_after=0.3)
    for call in (lambda: r.run(SLOW), lambda: asyncio.run(r.arun(SLOW))):
        t0 = time.monotonic()
        with pytest.raises(MungeError) as info:
            call()
        assert time.monotonic() - t0 < 6
        assert "frozen" in info.value.message and "sandbox restart" in str(info.value.hint)


def test_a_slow_command_with_munge_answering_runs_to_its_end(
    monkeypatch: pytest.MonkeyPatch, short_dir: Path
) -> None:
    conf = conf_with_socket(short_dir, short_dir / "munged.sock", sandbox=True)
    probes: list[str] = []
    monkeypatch.setattr(runner_mod, "probe_munge", lambda path, timeout: probes.append(path))
    r = Runner(slurm_conf=str(conf), timeout=20, munge_probe_after=0.2)
    slow_ok = [sys.executable, "-c", "import sys, time; time.sleep(0.8); print(sys.stdin.read())"]
    assert r.run(slow_ok, input="given").stdout.strip() == "given"  # the input is sent once, output kept
    assert probes == [str(short_dir / "munged.sock")]
    assert asyncio.run(r.arun(slow_ok, input="again")).stdout.strip() == "again"
    assert len(probes) == 2
    # the normal path never probes
    probes.clear()
    assert r.run([sys.executable, "-c", "print('quick')"]).stdout.strip() == "quick"
    assert probes == []
    # a controller that does not answer while munge does is still a timeout
    with pytest.raises(SlurmTimeoutError):
        Runner(slurm_conf=str(conf), timeout=0.6, munge_probe_after=0.1).run(SLOW)


def test_a_refused_munge_credential_gets_the_hint_of_its_cause(short_dir: Path) -> None:
    conf = conf_with_socket(short_dir, short_dir / "munged.sock", sandbox=True)
    r = Runner(slurm_conf=str(conf))
    denied = (
        'squeue: error: Munge encode failed: Failed to access "/x/munged.sock": Permission denied '
        "(Did you start munged?)\nslurm_load_jobs error: Protocol authentication error"
    )
    fail = [sys.executable, "-c", f"import sys; sys.stderr.write({denied!r}); sys.exit(1)"]
    with pytest.raises(MungeError) as info:
        r.run(fail)
    assert "--admit" in str(info.value.hint) and str(info.value).count("->") == 1
    assert "Permission denied" in str(info.value)  # Slurm's own words stay
    with pytest.raises(MungeError) as ainfo:
        asyncio.run(r.arun(fail))
    assert ainfo.value.hint == info.value.hint
    gone = "slurm_load_jobs error: Protocol authentication error"
    with pytest.raises(MungeError) as info2:
        r.run([sys.executable, "-c", f"import sys; sys.stderr.write({gone!r}); sys.exit(1)"])
    assert "sandbox restart" in str(info2.value.hint)


def test_a_step_larger_than_its_allocation_gets_a_next_step() -> None:
    # Slurm's words for `srun --jobid=J -n4` in a 2-task allocation
    err = classify_failure(
        ["srun"], 1, "srun: error: Unable to create step for job 5: More processors requested than permitted"
    )
    assert "More processors requested than permitted" in str(err)
    assert err.hint and "fewer tasks" in err.hint and "%salloc" in err.hint


# ---- every path to Slurm gets the same probe and words (issue 25, points 5 and 9) ------------------------
def _after_because(message: str) -> str:
    """A stall message without the command and the seconds it waited: what every path says alike."""
    return message.split(" because ", 1)[1]


def test_a_step_stuck_on_a_frozen_munged_ends_within_seconds_in_the_runners_words(
    monkeypatch: pytest.MonkeyPatch, short_dir: Path, silent_munged: Path
) -> None:
    """%srun sat out a whole munged freeze (45 s of 45 s) and said only Slurm's 'Unexpected missing socket
    error': streamed steps skipped the runner's probe. A step that has printed nothing while munged does not
    answer is ended, with the words run() uses."""
    from slurmlab.slurm.steps import RunningStep, stream_step

    monkeypatch.setattr(runner_mod, "MUNGE_PROBE_TIMEOUT", 0.5)
    conf = conf_with_socket(short_dir, silent_munged, sandbox=True)
    r = Runner(slurm_conf=str(conf), timeout=20, munge_probe_after=0.3)
    with pytest.raises(MungeError) as ran:
        r.run(SLOW)
    seen: list[str] = []
    t0 = time.monotonic()
    with pytest.raises(MungeError) as streamed:
        stream_step(r, SLOW, lambda stream, line: seen.append(line), None)
    assert time.monotonic() - t0 < 6, "the step waited for munged instead of the probe"
    assert seen == []
    launched = RunningStep(SLOW, r.popen(SLOW), r)  # a step started beside others (Allocation.launch)
    t0 = time.monotonic()
    with pytest.raises(MungeError) as waited:
        launched.wait(timeout=20)
    assert time.monotonic() - t0 < 6 and launched.proc.returncode is not None
    for err in (streamed.value, waited.value):
        assert "frozen" in err.message and err.message.startswith(f"{SLOW[0]} got no answer in ")
        assert _after_because(err.message) == _after_because(ran.value.message)
        assert (
            err.hint
            == ran.value.hint
            == f"bring munged back, keeping every job: slurmlab sandbox restart --dir {short_dir}"
        )


def test_a_step_that_has_answered_is_left_to_run_while_munged_is_probed(
    monkeypatch: pytest.MonkeyPatch, short_dir: Path, silent_munged: Path
) -> None:
    """The probe is for a step that has not started: one that printed runs to its end (no probe, no kill)."""
    from slurmlab.slurm.steps import stream_step

    probes: list[str] = []
    monkeypatch.setattr(runner_mod, "probe_munge", lambda path, timeout: probes.append(path))
    conf = conf_with_socket(short_dir, silent_munged, sandbox=True)
    r = Runner(slurm_conf=str(conf), timeout=20, munge_probe_after=0.3)
    talks = [
        sys.executable,
        "-c",
        "import time; print('started', flush=True); time.sleep(1.2); print('done')",
    ]
    seen: list[str] = []
    result = stream_step(r, talks, lambda stream, line: seen.append(line), None)
    assert result.returncode == 0 and seen == ["started", "done"] and result.failure is None
    assert probes == []


# what `scontrol ping` and `squeue` do against a killed slurmctld: the ping answers at once (recorded), squeue
# retries its connection for about 18 s (22.05, seen); stand-ins on PATH play both
PING_DOWN = (REPO / "tests/data/slurm/22.05/l21_scontrol_ping_controller_down.txt").read_text()
PING_UP = (REPO / "tests/data/slurm/22.05/s23_scontrol_ping.txt").read_text()


def stand_ins(
    folder: Path, ping: str, *, ping_rc: int = 1, ping_sleeps: float = 0.0, squeue_sleeps: float = 8.0
) -> tuple[dict[str, str], Path]:
    """A PATH with a stand-in ``scontrol`` (prints ``ping``, logs each call) and slow ``squeue``/``sacct``."""
    tools = folder / "bin"
    tools.mkdir()
    log = folder / "pings.log"
    (tools / "scontrol").write_text(
        f"#!{sys.executable}\nimport sys, time\nopen({str(log)!r}, 'a').write(' '.join(sys.argv[1:]) + '\\n')\n"
        f"time.sleep({ping_sleeps})\nsys.stdout.write({ping!r})\nsys.exit({ping_rc})\n"
    )
    slow = f"#!{sys.executable}\nimport time\ntime.sleep({squeue_sleeps})\nprint('JOBID')\n"
    for name in ("squeue", "sacct"):
        (tools / name).write_text(slow)
    for tool in tools.iterdir():
        tool.chmod(0o755)
    return {"PATH": f"{tools}{os.pathsep}{os.environ.get('PATH', '')}"}, log


def auth_slurm_conf(folder: Path, *, sandbox: bool) -> Path:
    """A configuration without munge (AuthType=auth/slurm), so only the controller is asked about."""
    conf = folder / "slurm.conf"
    head = "# slurmlab sandbox, profile seed, for Slurm 22.05\n" if sandbox else "# site config\n"
    conf.write_text(head + "ClusterName=c\nAuthType=auth/slurm\n")
    return conf


def pings(log: Path) -> int:
    return len(log.read_text().splitlines()) if log.exists() else 0


@pytest.mark.parametrize("sandbox", [True, False], ids=["sandbox", "cluster"])
def test_a_query_to_a_dead_controller_fails_within_seconds_with_the_pings_words(
    short_dir: Path, sandbox: bool
) -> None:
    """The panel needed 18 s to notice a dead controller (squeue -j retries that long); `scontrol ping` says DOWN
    in milliseconds. A controller query that has not answered in 2 s gets one ping, and DOWN ends it."""
    env, log = stand_ins(short_dir, PING_DOWN)
    r = Runner(
        slurm_conf=str(auth_slurm_conf(short_dir, sandbox=sandbox)),
        env=env,
        timeout=20,
        munge_probe_after=0.3,
    )
    for call in (lambda: r.run(["squeue", "-h", "-j", "5"]), lambda: asyncio.run(r.arun(["squeue", "-h"]))):
        t0 = time.monotonic()
        with pytest.raises(ControllerDownError) as info:
            call()
        assert time.monotonic() - t0 < 5, "the query waited out squeue's own retries"
        err = info.value
        assert not isinstance(err, SlurmTimeoutError)
        assert (
            err.message.startswith("squeue got no answer in ")
            and "controller is not responding" in err.message
        )
        assert (
            "(`scontrol ping` says: Slurmctld(primary) at vm is DOWN)" in err.message
            and "***" not in err.message
        )
        if sandbox:
            assert (
                err.hint
                == f"bring slurmctld back, keeping every job: slurmlab sandbox restart --dir {short_dir}"
            )
        else:
            assert err.hint is not None and "scontrol ping" in err.hint and "--dir" not in err.hint
    assert pings(log) == 2 and log.read_text().split("\n")[0] == "ping"


def test_the_controller_is_pinged_only_for_a_slow_controller_query(
    short_dir: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """No ping while queries answer in time, none for slurmdbd's commands or another cluster's; a controller
    that answers the ping (UP) or does not answer it in time (busy, frozen) leaves the query to its own end."""
    conf = str(auth_slurm_conf(short_dir, sandbox=True))
    env, log = stand_ins(short_dir, PING_DOWN, squeue_sleeps=0.8)
    r = Runner(slurm_conf=conf, env=env, timeout=20, munge_probe_after=0.3)
    assert r.run([sys.executable, "-c", "print('quick')"]).ok and pings(log) == 0
    assert (
        r.run(["sacct"]).stdout.strip() == "JOBID" and pings(log) == 0
    )  # slurmdbd's: the ping proves nothing
    other = Runner(slurm_conf=conf, env=env, cluster="other", timeout=20, munge_probe_after=0.3)
    assert other.run(["squeue"]).ok and pings(log) == 0  # scontrol ping asks this configuration's controllers
    up_dir = short_dir / "up"
    up_dir.mkdir()
    env, log = stand_ins(up_dir, PING_UP, ping_rc=0, squeue_sleeps=0.8)
    r = Runner(slurm_conf=conf, env=env, timeout=20, munge_probe_after=0.3)
    calls = r.calls
    assert r.run(["squeue"]).stdout.strip() == "JOBID" and pings(log) == 1
    assert r.calls == calls + 2  # the ping counts as a call (an RPC), the query too
    from slurmlab.slurm import stall

    monkeypatch.setattr(stall, "STALL_PING_TIMEOUT", 0.3)
    hung_dir = short_dir / "hung"
    hung_dir.mkdir()
    env, log = stand_ins(hung_dir, PING_DOWN, ping_sleeps=5, squeue_sleeps=8)
    with pytest.raises(SlurmTimeoutError):
        Runner(slurm_conf=conf, env=env, timeout=1.5, munge_probe_after=0.3).run(["squeue"])
    assert pings(log) == 1


@pytest.mark.parametrize("version", ["22.05", "24.11", "26.05"])
def test_down_words_read_the_recorded_ping_of_every_version(version: str) -> None:
    from slurmlab.slurm.stall import down_words

    folder = REPO / "tests/data/slurm" / version
    assert (
        down_words((folder / "l21_scontrol_ping_controller_down.txt").read_text())
        == "Slurmctld(primary) at vm is DOWN"
    )
    assert down_words((folder / "s23_scontrol_ping.txt").read_text()) is None
    # with a backup: one UP answers every query (the lines as 22.05 prints them, one per controller)
    assert down_words("Slurmctld(primary) at vm is DOWN\nSlurmctld(backup) at vm2 is UP\n") is None
    assert down_words("") is None and down_words("scontrol: error: something else") is None


def _sleeping_squeue(short_dir: Path, command: str = "squeue") -> tuple[Path, Path]:
    """A folder with a ``command`` (squeue) that writes its pid to the file returned and sleeps a minute."""
    tools = short_dir / "bin"
    tools.mkdir(exist_ok=True)
    pid_file = short_dir / f"{command}.pid"
    (tools / command).write_text(
        f"#!{sys.executable}\nimport os, time\nopen({str(pid_file)!r}, 'w').write(str(os.getpid()))\n"
        "time.sleep(60)\n"
    )
    (tools / command).chmod(0o755)
    return tools, pid_file


def test_a_command_a_background_thread_waits_for_does_not_outlive_the_process(short_dir: Path) -> None:
    """A poll round in a daemon thread can be waiting for a Slurm command (a dead controller: squeue retries for
    18 s) when the kernel exits; the interpreter stops waiting for that thread, and the command must go too."""
    tools, pid_file = _sleeping_squeue(short_dir)
    program = (
        "import os, sys, threading, time\n"
        "from slurmlab.slurm.runner import Runner\n"
        f"r = Runner(env={{'PATH': {str(tools)!r} + os.pathsep + os.environ['PATH']}}, timeout=50,"
        " munge_probe_after=0)\n"
        "threading.Thread(target=r.run, args=(['squeue', '-h'],), daemon=True).start()\n"
        f"while not os.path.exists({str(pid_file)!r}):\n"
        "    time.sleep(0.05)\n"
    )
    done = subprocess.run([sys.executable, "-c", program], timeout=30, capture_output=True, text=True)
    assert done.returncode == 0, done.stderr
    pid = int(pid_file.read_text())
    deadline = time.monotonic() + 5
    while time.monotonic() < deadline and alive(pid):
        time.sleep(0.05)
    assert not alive(pid), "the squeue of a daemon thread outlived the Python process that started it"


def test_a_command_a_daemon_thread_starts_while_the_process_exits_is_killed(short_dir: Path) -> None:
    """A daemon thread runs on while the atexit handlers do: a command it starts after the runner's own handler
    killed what was running (its next ping of a dead controller) would outlive the process (a leftover
    ``scontrol ping`` failed a CI stage). Here an atexit handler that runs after the runner's starts one."""
    tools, pid_file = _sleeping_squeue(short_dir)
    program = (
        "import atexit, os, sys, threading, time\n"
        "def late():\n"  # registered before the runner's handler: runs after it
        f"    r = Runner(env={{'PATH': {str(tools)!r} + os.pathsep + os.environ['PATH']}}, timeout=50,"
        " munge_probe_after=0)\n"
        "    threading.Thread(target=r.run, args=(['squeue', '-h'],), daemon=True).start()\n"
        "    deadline = time.monotonic() + 5\n"
        f"    while not os.path.exists({str(pid_file)!r}) and time.monotonic() < deadline:\n"
        "        time.sleep(0.05)\n"
        "atexit.register(late)\n"
        "from slurmlab.slurm.runner import Runner\n"
    )
    done = subprocess.run([sys.executable, "-c", program], timeout=30, capture_output=True, text=True)
    assert done.returncode == 0, done.stderr
    if not pid_file.exists():
        return  # killed before its first line ran: nothing outlived the process
    pid = int(pid_file.read_text())
    deadline = time.monotonic() + 5
    while time.monotonic() < deadline and alive(pid):
        time.sleep(0.05)
    assert not alive(pid), "a command started by a daemon thread during exit outlived the Python process"


def test_the_ping_of_a_stalled_command_in_a_daemon_thread_does_not_outlive_the_process(
    short_dir: Path,
) -> None:
    """A command that waits past the munge probe's time has the controller pinged (``scontrol ping``) from the
    thread that waits: when that is a poll round's daemon thread and the process exits meanwhile, the ping goes
    too (a leftover ``scontrol ping`` failed the 26.05 root's CI stage)."""
    tools, _ = _sleeping_squeue(short_dir)
    _, ping_pid_file = _sleeping_squeue(short_dir, "scontrol")
    conf = short_dir / "slurm.conf"
    conf.write_text("AuthType=auth/slurm\n")  # no munge to probe first: the stall goes straight to the ping
    program = (
        "import os, sys, threading, time\n"
        "from slurmlab.slurm.runner import Runner\n"
        f"r = Runner(env={{'PATH': {str(tools)!r} + os.pathsep + os.environ['PATH']}}, timeout=50,"
        f" munge_probe_after=0.2, slurm_conf={str(conf)!r})\n"
        "threading.Thread(target=r.run, args=(['squeue', '-h'],), daemon=True).start()\n"
        "deadline = time.monotonic() + 20\n"
        f"while not os.path.exists({str(ping_pid_file)!r}) and time.monotonic() < deadline:\n"
        "    time.sleep(0.05)\n"
    )
    done = subprocess.run([sys.executable, "-c", program], timeout=60, capture_output=True, text=True)
    assert done.returncode == 0, done.stderr
    assert ping_pid_file.exists(), "the stalled squeue was never followed by a ping"
    pid = int(ping_pid_file.read_text())
    deadline = time.monotonic() + 5
    while time.monotonic() < deadline and alive(pid):
        time.sleep(0.05)
    assert not alive(pid), "the controller's ping started by a daemon thread outlived the Python process"


def test_the_munge_probe_of_a_stalled_command_in_a_daemon_thread_does_not_outlive_the_process(
    short_dir: Path,
) -> None:
    """A command that waits past the munge probe's time has munged asked for a credential (``munge -n``) from
    the thread that waits: when that is a poll round's daemon thread and the process exits meanwhile, the probe
    goes too (slurmlab.slurm.children), as the controller's ping does."""
    tools, _ = _sleeping_squeue(short_dir)
    _, munge_pid_file = _sleeping_squeue(short_dir, "munge")
    socket_path = short_dir / "munge.socket"
    conf = short_dir / "slurm.conf"
    conf.write_text(f"AuthType=auth/munge\nAuthInfo=socket={socket_path}\n")
    with socket.socket(socket.AF_UNIX, socket.SOCK_STREAM) as listening:  # a munged that takes connections
        listening.bind(str(socket_path))
        listening.listen(8)
        program = (
            "import os, sys, threading, time\n"
            "from slurmlab.slurm.runner import Runner\n"
            f"r = Runner(timeout=50, munge_probe_after=0.2, slurm_conf={str(conf)!r})\n"
            "threading.Thread(target=r.run, args=(['squeue', '-h'],), daemon=True).start()\n"
            "deadline = time.monotonic() + 20\n"
            f"while not os.path.exists({str(munge_pid_file)!r}) and time.monotonic() < deadline:\n"
            "    time.sleep(0.05)\n"
        )
        env = {**os.environ, "PATH": f"{tools}{os.pathsep}{os.environ['PATH']}"}  # the probe's munge too
        done = subprocess.run(
            [sys.executable, "-c", program], timeout=60, capture_output=True, text=True, env=env
        )
    assert done.returncode == 0, done.stderr
    assert munge_pid_file.exists(), "the stalled squeue was never followed by a munge probe"
    pid = int(munge_pid_file.read_text())
    deadline = time.monotonic() + 5
    while time.monotonic() < deadline and alive(pid):
        time.sleep(0.05)
    assert not alive(pid), "the munge probe started by a daemon thread outlived the Python process"
