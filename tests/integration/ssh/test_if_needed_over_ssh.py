"""``%slurm sandbox up --if-needed`` (every lesson's second cell) where the kernel drives a Slurm over SSH: that
cluster is used unchanged, no sandbox is looked for or started on this machine, and a cluster whose controller does
not answer is said in words (a sandbox here would not be that cluster). The loopback sshd and its sandbox are the
session fixtures of tests/integration/ssh/conftest.py."""

from __future__ import annotations

import shutil
import tempfile
from collections.abc import Iterator
from dataclasses import replace
from pathlib import Path
from typing import Any

import pytest
from IPython.core.error import UsageError

from slurmlab.slurm.runner import Runner, set_runner

pytestmark = pytest.mark.sandbox


def test_if_needed_over_ssh_uses_that_cluster_and_finds_no_sandbox_here(
    kept_shell: Any, ssh_runner: Runner
) -> None:
    from slurmlab.magics.sandbox import sandbox_in_use

    set_runner(ssh_runner)
    said = str(kept_shell.run_line_magic("slurm", "sandbox up --if-needed"))
    assert said.startswith(f"using Slurm on {ssh_runner.ssh.target.url()}; no sandbox started"), said  # type: ignore[union-attr]
    # the sandbox behind the link is this machine's folder too, but not this kernel's to start, stop or switch
    assert sandbox_in_use() is None


@pytest.fixture
def silent_conf() -> Iterator[Path]:
    """The slurm.conf of a cluster whose controller is down: it names a port where nothing listens (a missing
    slurm.conf would have Slurm look for a configless controller in DNS, a minute here); the ssh user reads it."""
    folder = Path(tempfile.mkdtemp(prefix="slsb-silent-", dir="/tmp"))
    folder.chmod(0o755)
    conf = folder / "slurm.conf"
    conf.write_text(
        "ClusterName=silent\nSlurmctldHost=localhost(127.0.0.1)\nSlurmctldPort=1\n"
        "NodeName=n1 CPUs=1 State=UNKNOWN\nPartitionName=p Nodes=n1 Default=YES\n"
    )
    conf.chmod(0o644)
    yield conf
    shutil.rmtree(folder, ignore_errors=True)


def test_if_needed_over_ssh_says_a_silent_controller_and_starts_nothing(
    kept_shell: Any, ssh_runner: Runner, silent_conf: Path
) -> None:
    set_runner(replace(ssh_runner, slurm_conf=str(silent_conf)))
    with pytest.raises(UsageError) as caught:
        kept_shell.run_line_magic("slurm", "sandbox up --if-needed")
    said = str(caught.value)
    assert (
        "whose controller does not answer" in said and "a local sandbox would not be that cluster" in said
    ), said
    from slurmlab.magics.session import Session

    assert Session.of(kept_shell).sandbox is None
