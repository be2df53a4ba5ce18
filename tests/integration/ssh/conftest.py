"""A real OpenSSH server on 127.0.0.1 in front of a sandbox, for a second Unix user.

The server is the plugin's session fixture ``loopback_sshd`` (:mod:`slurmlab.testing.loopback_sshd`: its own
host key, a free loopback port, the session's user ``slurmlabssh<pid>`` by key and keyboard-interactive). Here: a sandbox that
admits that user, and a runner that drives it over a connected master.
"""

from __future__ import annotations

import shutil
import tempfile
from collections.abc import Iterator
from pathlib import Path

import pytest

from slurmlab.sandbox import Sandbox
from slurmlab.slurm.runner import Runner
from slurmlab.testing.loopback_sshd import LoopbackSshd
from slurmlab.testing.sandbox_fixtures import slurm_missing_reason


@pytest.fixture(scope="session")
def ssh_sandbox(loopback_sshd: LoopbackSshd) -> Iterator[Sandbox]:
    """A sandbox that admits the ssh user (its folder passable by others; munge's stays closed)."""
    reason = slurm_missing_reason()
    if reason:
        pytest.skip(reason)
    base = Path(tempfile.mkdtemp(prefix="slsb-ssh-", dir="/tmp"))
    base.chmod(0o755)
    sb = Sandbox.up(
        profile="seed", nodes=1, directory=base / "sb", admit=[loopback_sshd.user], accounting=False
    )
    try:
        yield sb
    finally:
        sb.down()
        shutil.rmtree(base, ignore_errors=True)


@pytest.fixture
def ssh_runner(loopback_sshd: LoopbackSshd, ssh_sandbox: Sandbox) -> Iterator[Runner]:
    """A runner driving the sandbox as the ssh user, over a connected master."""
    link = loopback_sshd.link()
    link.connect()
    yield Runner(slurm_conf=str(ssh_sandbox.conf_path), ssh=link)
    link.disconnect()
