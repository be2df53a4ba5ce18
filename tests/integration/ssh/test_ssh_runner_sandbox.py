"""The SSH runner for real: OpenSSH's client, a real sshd on 127.0.0.1 (tests/integration/ssh/conftest.py) as a
second Unix user, and the sandbox's Slurm behind it. One file: the sshd and its user are one per pytest worker
(a second file could land on another worker, whose session end removes the user this one logs in as).

What the local runner sees, the SSH runner sees; argv reaches Slurm there word for word; unknown and changed host
keys are refused with words; keyboard-interactive prompts go to the caller's ``ask``; a cut link is said within
seconds and cancels nothing; Ctrl-C (end_step) ends the remote step, not the job. A login node that goes away
while an allocation is watched is said on its panel ("down since HH:MM; reconnecting"), and once it is back the
link reconnects by itself and the same job is watched again.
"""

from __future__ import annotations

import asyncio
import os
import re
import socket
import subprocess
import time
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pytest

from slurmlab.slurm.allocation import Allocation
from slurmlab.slurm.poller import JobPoller
from slurmlab.slurm.runner import Runner
from slurmlab.slurm.ssh import SshLinkError
from slurmlab.slurm.steps import end_step
from slurmlab.testing.loopback_sshd import cut_link, session_user

pytestmark = pytest.mark.sandbox

# a job name a shell would split, expand or run: quotes of both kinds, ;, $(...), backquotes, a glob, a backslash
HOSTILE_NAME = 'it\'s "a" job; $(id) `id` * \\x $HOME'
# an argument no shell may touch on its way: a newline, a tab and a byte that is not UTF-8 too
HOSTILE_WORD = HOSTILE_NAME + "\n\tsecond line \udcff end"


def _local(sandbox: Any) -> Runner:
    return sandbox.runner()  # type: ignore[no-any-return]


def _batch(runner: Runner, *options: str, command: str = "sleep 300") -> str:
    out = runner.run(["sbatch", "--parsable", "-t", "5", *options, "--wrap", command]).stdout
    return out.strip().split(";")[0]


def _state(runner: Runner, job: str) -> str:
    return runner.run(["squeue", "-h", "-t", "all", "-j", job, "-o", "%T"], check=False).stdout.strip()


def _wait_state(runner: Runner, job: str, state: str, timeout: float = 60.0) -> None:
    end = time.monotonic() + timeout
    while time.monotonic() < end:
        if _state(runner, job) == state:
            return
        time.sleep(0.3)
    raise AssertionError(f"job {job} not {state} in {timeout} s: {_state(runner, job)!r}")


@pytest.fixture
def clean_queue(ssh_sandbox: Any) -> Iterator[Any]:
    yield ssh_sandbox
    _local(ssh_sandbox).run(["scancel", "--user", session_user()], check=False)


def test_squeue_and_sinfo_over_ssh_equal_the_local_ones(ssh_runner: Runner, clean_queue: Any) -> None:
    local = _local(clean_queue)
    job = _batch(ssh_runner, "--job-name", "over-ssh")
    # a job still being scheduled may change between the two reads (PENDING here, RUNNING there): compare it settled
    _wait_state(local, job, "RUNNING")
    for argv in (
        ["squeue", "-h", "-a", "-t", "all", "-o", "%i|%j|%u|%T|%P"],
        ["sinfo", "-h", "-o", "%P|%N|%c|%m|%G"],
        ["scontrol", "show", "job", job],
    ):
        assert ssh_runner.run(argv).stdout == local.run(argv).stdout, argv
    # the asyncio twin (the sidebar's and the poller's path) goes the same way
    assert asyncio.run(ssh_runner.arun(["sinfo", "-h", "-o", "%P|%N"])).stdout == (
        local.run(["sinfo", "-h", "-o", "%P|%N"]).stdout
    )
    # the job belongs to the ssh user: it was submitted there, not here
    assert local.run(["squeue", "-h", "-j", job, "-o", "%u"]).stdout.strip() == session_user()


def test_hostile_words_reach_the_remote_side_intact(ssh_runner: Runner, clean_queue: Any) -> None:
    # byte for byte, as the remote process got it (hex: a non-UTF-8 byte survives the check too)
    shown = "import os,sys; sys.stdout.write(os.fsencode(sys.argv[1]).hex())"
    got = ssh_runner.run(["python3", "-c", shown, HOSTILE_WORD]).stdout
    assert bytes.fromhex(got) == os.fsencode(HOSTILE_WORD)
    # a job named so comes back from squeue as it was given, there and here
    job = _batch(ssh_runner, f"--job-name={HOSTILE_NAME}")
    argv = ["squeue", "-h", "-j", job, "-o", "%j"]
    assert ssh_runner.run(argv).stdout.rstrip("\n") == HOSTILE_NAME
    assert _local(clean_queue).run(argv).stdout.rstrip("\n") == HOSTILE_NAME


def test_an_unknown_host_key_is_refused_with_words(loopback_sshd: Any, tmp_path: Path) -> None:
    empty = tmp_path / "known_hosts"
    empty.write_text("")
    link = loopback_sshd.link(known_hosts=empty)
    with pytest.raises(SshLinkError) as caught:
        link.connect()
    said = str(caught.value)
    assert "not in known_hosts" in said and "did not log in" in said and "fingerprint" in said, said
    assert not link.connected()
    assert empty.read_text() == ""  # nothing was accepted on the user's behalf


def test_a_changed_host_key_is_refused_with_words(loopback_sshd: Any, tmp_path: Path) -> None:
    other = tmp_path / "other_host"
    subprocess.run(["ssh-keygen", "-q", "-t", "ed25519", "-N", "", "-f", str(other)], check=True)
    wrong = tmp_path / "known_hosts"
    wrong.write_text(f"[127.0.0.1]:{loopback_sshd.port} {(tmp_path / 'other_host.pub').read_text()}")
    link = loopback_sshd.link(known_hosts=wrong)
    with pytest.raises(SshLinkError) as caught:
        link.connect()
    said = str(caught.value)
    assert "NOT the one known_hosts holds" in said and "ssh-keygen -R" in said, said
    assert not link.connected()


def test_keyboard_interactive_asks_the_caller_and_writes_the_answer_nowhere(
    loopback_sshd: Any, ssh_sandbox: Any
) -> None:
    prompts: list[str] = []

    def ask(prompt: str) -> str:
        prompts.append(prompt)
        return str(loopback_sshd.password)

    link = loopback_sshd.link(ask=ask, key=False)
    link.options = {**link.options, "ControlPath": str(loopback_sshd.folder / "kbd")}
    link.connect()
    try:
        assert prompts and "Password" in prompts[0], prompts
        runner = Runner(slurm_conf=str(ssh_sandbox.conf_path), ssh=link)
        assert runner.run(["whoami"]).stdout.strip() == session_user()
        # one login, then sessions on the same connection: no second prompt
        runner.run(["sinfo", "-h", "-o", "%P"])
        assert len(prompts) == 1
        secret = str(loopback_sshd.password).encode()
        for path in loopback_sshd.folder.iterdir():
            if path.is_file():
                assert secret not in path.read_bytes(), path
    finally:
        link.disconnect()


def test_a_wrong_password_is_said(loopback_sshd: Any) -> None:
    link = loopback_sshd.link(ask=lambda prompt: "not the password", key=False)
    link.options = {
        **link.options,
        "ControlPath": str(loopback_sshd.folder / "bad"),
        "NumberOfPasswordPrompts": "1",
    }
    with pytest.raises(SshLinkError) as caught:
        link.connect()
    assert "login was refused" in str(caught.value), caught.value


def test_a_link_cut_mid_step_is_said_within_seconds_and_cancels_nothing(
    ssh_runner: Runner, clean_queue: Any
) -> None:
    local = _local(clean_queue)
    job = _batch(ssh_runner)
    _wait_state(local, job, "RUNNING")
    step = ssh_runner.popen(["srun", "--jobid", job, "--overlap", "sh", "-c", "echo started; sleep 120"])
    assert step.stdout is not None and step.stdout.readline().strip() == "started"
    assert ssh_runner.ssh is not None
    master = ssh_runner.ssh.master_pid()
    assert master is not None
    os.kill(master, 9)  # the link dies as a dropped network or a sleeping laptop leaves it
    cut = time.monotonic()
    rc = step.wait(timeout=30)
    assert time.monotonic() - cut < 10, "the step's end took longer than a few seconds to be noticed"
    stderr = step.stderr.read() if step.stderr else ""
    trouble = ssh_runner.failure(["srun"], rc, stderr)
    assert (
        isinstance(trouble, SshLinkError) and "link to ssh://" in str(trouble) and "is down" in str(trouble)
    )
    assert "%slurm use ssh://" in str(trouble)
    # nothing on the cluster was cancelled: the job still runs
    time.sleep(1)
    assert _state(local, job) == "RUNNING"


def test_end_step_over_ssh_ends_the_remote_step_not_the_job(ssh_runner: Runner, clean_queue: Any) -> None:
    local = _local(clean_queue)
    job = _batch(ssh_runner)
    _wait_state(local, job, "RUNNING")
    step = ssh_runner.popen(["srun", "--jobid", job, "--overlap", "sh", "-c", "echo started; sleep 120"])
    assert step.stdout is not None and step.stdout.readline().strip() == "started"
    end_step(step)  # Ctrl-C in the cell
    assert step.poll() is not None
    end = time.monotonic() + 30
    steps: list[str] = []
    while time.monotonic() < end:
        steps = local.run(["squeue", "-h", "-s", "-j", job, "-o", "%i"], check=False).stdout.split()
        if not [s for s in steps if s.startswith(f"{job}.") and not s.endswith((".batch", ".extern"))]:
            break
        time.sleep(0.3)
    else:
        raise AssertionError(f"the remote step still runs after Ctrl-C: {steps}")
    assert _state(local, job) == "RUNNING"


class _Kernel:
    def get_parent(self, channel: str = "shell") -> dict[str, Any]:
        return {"header": {"msg_id": "ssh"}, "metadata": {"cellId": "ssh"}}


def test_salloc_and_srun_magics_over_ssh(
    ssh_runner: Runner, clean_queue: Any, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    from IPython.testing.globalipapp import get_ipython

    from slurmlab.magics.session import Session
    from slurmlab.slurm.runner import set_runner

    shell = get_ipython()
    shell.run_line_magic("load_ext", "slurmlab")
    monkeypatch.setattr(shell, "kernel", _Kernel(), raising=False)
    old_session, session = Session.of(shell), Session(shell)
    old_runner = set_runner(ssh_runner)
    try:
        alloc = shell.run_line_magic("salloc", "-N 1 -t 5 --gpus=1")
        alloc.wait("RUNNING", timeout=120)
        assert (
            _local(clean_queue).run(["squeue", "-h", "-j", alloc.job_id, "-o", "%u"]).stdout.strip()
            == session_user()
        )
        capsys.readouterr()
        shell.run_line_magic("srun", "hostname")
        out = capsys.readouterr()
        assert out.out.strip() == socket.gethostname(), out  # the sandbox's nodes run on this machine
        shell.run_line_magic("srun", "printenv SLURM_JOB_ID SLURMD_NODENAME USER")
        node = _local(clean_queue).run(["squeue", "-h", "-j", alloc.job_id, "-o", "%N"]).stdout.strip()
        out = capsys.readouterr()
        assert out.out.split() == [alloc.job_id, node, session_user()], out
    finally:
        for made in session.allocations:
            try:
                made.cancel()
            except Exception:  # already ended
                pass
        set_runner(old_runner)
        old_session.install(shell)
        shell.run_line_magic("unload_ext", "slurmlab")


def _until(what: Callable[[], object], timeout: float) -> float:
    """Seconds until ``what()`` holds; fails the test after ``timeout`` (a bound that detects a hang)."""
    start = time.monotonic()
    while time.monotonic() - start < timeout:
        if what():
            return time.monotonic() - start
        time.sleep(0.1)
    raise AssertionError(f"not within {timeout} s")


def test_a_cut_link_is_said_on_the_panel_and_watching_resumes_when_it_is_back(
    loopback_sshd: Any, ssh_sandbox: Any
) -> None:
    from slurmlab.widgets.panel import panel_html

    link = loopback_sshd.link()
    link.options = {**link.options, "ControlPath": str(loopback_sshd.folder / "down")}
    link.connect()
    runner = Runner(slurm_conf=str(ssh_sandbox.conf_path), ssh=link)
    poller = JobPoller(runner, interval=0.5)
    alloc = Allocation.submit(["-N1", "-t", "5"], runner=runner, poller=poller, release_at_exit=False)
    try:
        alloc.wait("RUNNING", timeout=60)
        job = str(alloc.job_id)
        assert alloc.error is None
        # the login node reboots (no reconnect can succeed yet) and the laptop's connection is gone
        with cut_link(loopback_sshd, link):
            took = _until(lambda: alloc.error and "is down since" in alloc.error, 15)
            print(f"link cut -> the allocation says so: {took:.1f} s")
            said = str(alloc.error)
            url = re.escape(f"ssh://{loopback_sshd.user}@127.0.0.1:{loopback_sshd.port}")
            assert re.search(rf"the link to {url} is down since \d\d:\d\d; reconnecting", said), said
            assert "were not touched" in said and "%slurm use ssh://" in said, said
            assert "is down since" in panel_html(alloc)  # the panel shows the poller's words
            # the job lives on: nothing was cancelled because the link went down
            assert _state(_local(ssh_sandbox), job) == "RUNNING"
            time.sleep(2)
            assert _state(_local(ssh_sandbox), job) == "RUNNING" and alloc.state == "RUNNING"
        # back: the link reconnects by itself (back-off of at most 10 s), and the same job is watched again
        _until(lambda: link.connected() and alloc.error is None, 60)
        assert link.down_since is None
        assert job in poller.watched() and alloc.state == "RUNNING"
        assert _state(_local(ssh_sandbox), job) == "RUNNING"
    finally:
        try:
            alloc.cancel()
        finally:
            poller.stop()
            link.disconnect()


def test_a_link_that_finds_a_master_up_learns_the_login_over_it(loopback_sshd: Any) -> None:
    # an earlier kernel's master for the same address (ControlPersist): the next kernel shares it, and must
    # still learn whom its commands run as there, not take this process's own user (root) for the cluster's
    first = loopback_sshd.link()
    first.connect()
    try:
        second = loopback_sshd.link()
        assert second.connected() and second.remote_user is None
        second.connect()
        assert second.remote_user is not None and second.remote_user[1] == loopback_sshd.user
        assert second.remote_user == first.remote_user
    finally:
        first.disconnect()
