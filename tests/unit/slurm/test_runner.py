"""The one runner: argv only, timeouts, errors mapped from Slurm's own messages."""

from __future__ import annotations

import asyncio
import shutil
import socket
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
        ("squeue: error: Munge decode failed: Socket communication error\n"
         "slurm_load_jobs error: Protocol authentication error", MungeError),
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
FIXTURE_STDERR = (sorted((REPO / "tests" / "data" / "slurm").glob("*/e*.stderr"))
                  + list_shared("slurm", "22.05", pattern="e*.stderr") + list_shared("slurm", "24.11", pattern="e*.stderr"))


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
        ["salloc"], 1, "salloc: error: Job submit/allocate failed: Requested node configuration is not available"
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
def test_a_command_stuck_on_a_stopped_munged_fails_fast_with_one_fitting_hint(short_dir: Path,
                                                                             sandbox: bool) -> None:
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


def test_a_command_stuck_on_a_frozen_munged_fails_fast_sync_and_async(monkeypatch: pytest.MonkeyPatch,
                                                                     short_dir: Path, silent_munged: Path) -> None:
    monkeypatch.setattr(runner_mod, "MUNGE_PROBE_TIMEOUT", 0.5)
    conf = conf_with_socket(short_dir, silent_munged, sandbox=True)
    r = Runner(slurm_conf=str(conf), timeout=20, munge_probe_after=0.3)
    for call in (lambda: r.run(SLOW), lambda: asyncio.run(r.arun(SLOW))):
        t0 = time.monotonic()
        with pytest.raises(MungeError) as info:
            call()
        assert time.monotonic() - t0 < 6
        assert "frozen" in info.value.message and "sandbox restart" in str(info.value.hint)


def test_a_slow_command_with_munge_answering_runs_to_its_end(monkeypatch: pytest.MonkeyPatch, short_dir: Path) -> None:
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
    denied = ("squeue: error: Munge encode failed: Failed to access \"/x/munged.sock\": Permission denied "
              "(Did you start munged?)\nslurm_load_jobs error: Protocol authentication error")
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
    err = classify_failure(["srun"], 1, "srun: error: Unable to create step for job 5: More processors requested "
                                        "than permitted")
    assert "More processors requested than permitted" in str(err)
    assert err.hint and "fewer tasks" in err.hint and "%salloc" in err.hint
