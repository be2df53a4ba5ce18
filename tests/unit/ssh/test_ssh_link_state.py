"""The SSH link's state without a server: a link found down is said with since when, sessions never log in on
their own, whose jobs are "mine" follows the runner to the cluster, and a step's Python is the cluster's.

Its state is a field (:attr:`SshLink.state`), one test per transition: not connected, connecting, up,
reconnecting, needs a login, closed; and up again by a look in the background, never on the caller's thread.
Where ssh's own answer matters (a login refused, a host key unknown) a stand-in ``ssh`` prints what a real
OpenSSH 9.2 printed (tests/unit/ssh/data) and exits 255 as it did.

Real programs where it matters: OpenSSH's ``ssh`` runs against a plain TCP listener on 127.0.0.1 to show that a
session without a master opens no connection. The sshd-backed half of these (the master killed and the login
node back) is tests/integration/ssh/test_ssh_runner_sandbox.py.
"""

from __future__ import annotations

import os
import re
import shutil
import socket
import subprocess
import sys
import threading
import time
from collections.abc import Callable, Iterator
from pathlib import Path

import pytest

from slurmlab.slurm import identity
from slurmlab.slurm.runner import Runner, get_runner, set_runner
from slurmlab.slurm.ssh import LinkState, SshLink, SshLinkError, SshTarget
from slurmlab.slurm.ssh.lease import lease_words

DATA = Path(__file__).parent / "data"
TARGET = SshTarget("127.0.0.1", "slurmlabssh", 2222)


@pytest.fixture
def link(tmp_path: Path) -> Iterator[SshLink]:
    folder = tmp_path / "private"
    folder.mkdir(mode=0o700)
    # no ssh program: the reconnect's tries fail at once (and are not what these tests look at)
    made = SshLink(TARGET, options={"ControlPath": str(folder / "ctl")}, ssh=str(tmp_path / "no-ssh"))
    # the login there already learnt: a connect() that finds a master up (faked below) would otherwise ask `id`
    # over it (tests/integration/ssh/test_ssh_runner_sandbox.py holds that)
    made.remote_user = (4321, "slurmlabssh")
    yield made
    made.disconnect()  # a background reconnect ends at its next try


def test_a_link_found_down_says_since_when_and_the_same_words_each_time(link: SshLink) -> None:
    link.connected = lambda: False  # type: ignore[method-assign]  # `ssh -O check` finds no master
    first = link.failure(255, "")
    assert isinstance(first, SshLinkError)
    said = str(first)
    m = re.search(
        r"the link to ssh://slurmlabssh@127\.0\.0\.1:2222 is down since (\d\d:\d\d); reconnecting", said
    )
    assert m is not None, said
    assert m.group(1) == time.strftime("%H:%M", time.localtime(link.down_since))
    assert "not touched" in said and "%slurm use ssh://slurmlabssh@127.0.0.1:2222" in said
    # a poller publishes an error once per distinct message: the next rounds say exactly the same
    assert str(link.failure(255, "Broken pipe")) == said
    assert link.failure(1, "squeue: error: Invalid job id") is None  # the command's own failure: not the link


def _reconnecting() -> int:
    return sum(t.name == "slurmlab-ssh-reconnect" for t in threading.enumerate())


def test_a_link_closed_on_purpose_is_not_reconnected(link: SshLink) -> None:
    link.connected = lambda: False  # type: ignore[method-assign]
    link.disconnect()
    before = _reconnecting()
    said = str(link.failure(255, ""))
    assert "is down since" in said and said.split("\n")[0].endswith("; closed"), said
    assert _reconnecting() == before
    assert link.state is LinkState.CLOSED


def _until(what: Callable[[], object], timeout: float = 20.0) -> None:
    """Wait for ``what()`` (a bound that detects a hang: the transitions here take milliseconds)."""
    end = time.monotonic() + timeout
    while not what():
        assert time.monotonic() < end, f"not within {timeout} s"
        time.sleep(0.02)


def test_a_new_link_is_not_connected_and_found_down_before_it_was_ever_up_is_connecting(
    link: SshLink,
) -> None:
    assert (link.state, link.down_since) == (LinkState.NOT_CONNECTED, None)
    assert link.down_words() is None
    link.connected = lambda: False  # type: ignore[method-assign]
    link.failure(255, "")
    assert link.state is LinkState.CONNECTING and link.down_since is not None


def test_an_up_link_found_down_is_reconnecting_and_up_again_when_its_master_is_back(link: SshLink) -> None:
    link.connected = lambda: True  # type: ignore[method-assign]  # a master is up (e.g. a notebook's)
    link.connect()
    assert (link.state, link.down_since) == (LinkState.UP, None)
    link.connected = lambda: False  # type: ignore[method-assign]
    said = str(link.failure(255, "Broken pipe"))
    assert link.state is LinkState.RECONNECTING and link.down_since is not None
    assert said.startswith(link.down_words() or "-")
    link.connected = lambda: True  # type: ignore[method-assign]  # the reconnect's next try finds it back
    _until(lambda: link.state is LinkState.UP)
    assert link.down_since is None and link.down_words() is None


def test_the_state_is_reconnecting_whatever_words_follow_it(link: SshLink) -> None:
    # the lease's words come after the state's in the message: the state is not read from there
    link.connected = lambda: True  # type: ignore[method-assign]
    link.connect()
    link.connected = lambda: False  # type: ignore[method-assign]
    lease = lease_words(["12"], time.time(), 1800)
    link.lease_words = lambda: lease  # type: ignore[method-assign]  # a held allocation's lease
    said = str(link.failure(255, "")).split("\n")[0]
    assert said.endswith(f"; reconnecting; {lease}"), said
    assert link.state is LinkState.RECONNECTING


def _ssh_that_says(tmp_path: Path, recorded: str) -> str:
    """An ``ssh`` that answers every call (a check, a master's start) as a real one did: ``recorded``'s words on
    stderr, exit 255."""
    program = tmp_path / "ssh"
    program.write_text(f"#!/bin/sh\ncat {DATA / recorded} >&2\nexit 255\n")
    program.chmod(0o755)
    return str(program)


@pytest.mark.parametrize("recorded", ["permission-denied.stderr", "unknown-host-key.stderr"])
def test_a_login_that_needs_a_person_gives_up_as_needs_a_login(tmp_path: Path, recorded: str) -> None:
    folder = tmp_path / "private"
    folder.mkdir(mode=0o700)
    link = SshLink(
        TARGET, options={"ControlPath": str(folder / "ctl")}, ssh=_ssh_that_says(tmp_path, recorded)
    )
    try:
        link.connect_in_background()
        assert link.state in (LinkState.CONNECTING, LinkState.NEEDS_LOGIN)
        _until(lambda: link.state is LinkState.NEEDS_LOGIN)
        since = link.down_since
        assert since is not None
        said = str(link.failure(255, ""))
        assert "the login needs you: connect again" in said and link.down_since == since
        assert link.state is LinkState.NEEDS_LOGIN  # not started again: it waits for a person
    finally:
        link.disconnect()


def test_a_look_in_the_background_finds_a_dead_master_off_the_callers_thread_at_most_once_per_interval(
    link: SshLink,
) -> None:
    link.connected = lambda: True  # type: ignore[method-assign]
    link.connect()
    looked: list[str] = []

    def check() -> bool:  # `ssh -O check` finds the master gone; who asked is kept
        looked.append(threading.current_thread().name)
        return False

    link.connected = check  # type: ignore[method-assign]
    for _ in range(50):
        link.look_in_background(60.0)
    _until(lambda: link.state is LinkState.RECONNECTING)
    assert link.down_since is not None
    # the reconnect asks too, in its own thread: the looks are those of the look's thread
    assert looked.count("slurmlab-ssh-look") == 1, looked
    assert threading.main_thread().name not in looked


def test_a_session_without_a_master_opens_no_connection_of_its_own(tmp_path: Path) -> None:
    if shutil.which("ssh") is None:
        pytest.skip("needs OpenSSH's client")
    with socket.socket() as listener:
        listener.bind(("127.0.0.1", 0))
        listener.listen(1)
        listener.settimeout(0.5)
        port = listener.getsockname()[1]
        folder = tmp_path / "private"
        folder.mkdir(mode=0o700)
        link = SshLink(
            SshTarget("127.0.0.1", "nobody", port),
            options={"ControlPath": str(folder / "ctl"), "UserKnownHostsFile": "/dev/null"},
            config="/dev/null",
        )
        proc = subprocess.run(
            link.command(["squeue"]),
            stdin=subprocess.DEVNULL,
            capture_output=True,
            timeout=30,
            env=dict(os.environ),
        )
        assert proc.returncode == 255, proc
        with pytest.raises(socket.timeout):  # nobody knocked: no login every time a poller asks
            listener.accept()


def test_whose_jobs_are_mine_follows_the_runner_to_the_cluster(link: SshLink) -> None:
    link.remote_user = (4321, "alice")
    old = set_runner(Runner(ssh=link))
    try:
        assert identity.current_uid() == 4321 and identity.current_user() == "alice"
    finally:
        set_runner(old)
    assert get_runner() is old
    assert identity.current_uid() == os.geteuid()


def test_a_steps_python_is_the_clusters_over_ssh(link: SshLink) -> None:
    assert Runner().python() == sys.executable
    assert Runner(ssh=link).python() == "python3"


def test_a_private_folder_gone_is_said_not_a_traceback(link: SshLink, tmp_path: Path) -> None:
    shutil.rmtree(tmp_path / "private")
    with pytest.raises(SshLinkError, match="private folder .* is gone") as caught:
        Runner(ssh=link).run(["squeue"])
    assert "%slurm use ssh://" in str(caught.value)
