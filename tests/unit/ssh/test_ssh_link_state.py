"""The SSH link's state without a server: a link found down is said with since when, sessions never log in on
their own, whose jobs are "mine" follows the runner to the cluster, and a step's Python is the cluster's.

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
from collections.abc import Iterator
from pathlib import Path

import pytest

from slurmlab.slurm import identity
from slurmlab.slurm.runner import Runner, get_runner, set_runner
from slurmlab.slurm.ssh import SshLink, SshLinkError, SshTarget

TARGET = SshTarget("127.0.0.1", "slurmlabssh", 2222)


@pytest.fixture
def link(tmp_path: Path) -> Iterator[SshLink]:
    folder = tmp_path / "private"
    folder.mkdir(mode=0o700)
    # no ssh program: the reconnect's tries fail at once (and are not what these tests look at)
    made = SshLink(TARGET, options={"ControlPath": str(folder / "ctl")}, ssh=str(tmp_path / "no-ssh"))
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
