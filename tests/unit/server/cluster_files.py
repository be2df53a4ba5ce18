"""Sandbox folders as a running slurmlab sandbox leaves them, for the tests of the server's cluster list."""

from __future__ import annotations

import subprocess
import sys
import time
from collections.abc import Iterator
from pathlib import Path

import pytest

from slurmlab.sandbox import state_file


@pytest.fixture
def slurmctld() -> Iterator[int]:
    """A live process whose command line names slurmctld, as a sandbox's does."""
    proc = subprocess.Popen([sys.executable, "-c", "import time; time.sleep(120)", "slurmctld"])
    cmdline = Path(f"/proc/{proc.pid}/cmdline")
    deadline = time.monotonic() + 10
    while b"slurmctld" not in cmdline.read_bytes():  # until the child has exec'd its program
        assert time.monotonic() < deadline, "the stand-in slurmctld did not start"
        time.sleep(0.01)
    try:
        yield proc.pid
    finally:
        proc.kill()
        proc.wait()


@pytest.fixture
def base(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    runtime = tmp_path / "run"
    runtime.mkdir()
    monkeypatch.setenv("XDG_RUNTIME_DIR", str(runtime))
    return runtime / "slurmlab" / "sandbox"


def make_sandbox(
    base: Path, profile: str, pid: int, cluster: str = "sandbox", *, folder_name: str | None = None
) -> Path:
    """A sandbox folder (named ``folder_name``, default the profile) as ``Sandbox.up`` leaves it: slurm.conf and
    state.json (written by the sandbox's own writer)."""
    folder = base / (folder_name or profile)
    folder.mkdir(parents=True)
    conf = folder / "slurm.conf"
    conf.write_text(f"# slurmlab sandbox\nClusterName={cluster}\nSlurmctldHost=vm\n")
    state_file.write_state(
        folder,
        {
            "profile": profile,
            "nodes": 1,
            "node_names": ["node1"],
            "pids": {"munged": pid, "slurmctld": pid},
            "conf_path": str(conf),
            "ports": {"slurmctld": 7000},
            "version": [24, 11],
        },
    )
    return conf
