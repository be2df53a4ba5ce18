"""``SLURMLAB_USE`` / ``SLURMLAB_SSH_CONFIG`` / ``SLURMLAB_NODE_PYTHON`` and ``%slurm use … --python``: which Slurm
a kernel drives, and which Python runs on its nodes, chosen outside the notebook (the lessons run unchanged over
SSH so: tests/integration/notebook/test_lessons_over_ssh.py). A setting that cannot be applied is said in words
when ``%load_ext slurmlab`` runs, and the magics are loaded all the same. The sync folder the experiments' workers
meet in over SSH (:class:`RemoteSyncFolder`) is driven here through a local runner: the same commands, run here.
"""

from __future__ import annotations

import shutil
import socket
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest
from IPython.core.error import UsageError

from slurmlab.errors import ExperimentError
from slurmlab.experiments.steps import RemoteSyncFolder
from slurmlab.slurm.runner import Runner, get_runner, set_runner


@pytest.fixture
def shell(kept_shell: Any, monkeypatch: pytest.MonkeyPatch) -> Any:
    """The magics loaded as ``slurmlab.magics``: the test's own ``%load_ext slurmlab`` loads them again (the
    other name), which is when the settings are read."""
    for name in ("SLURMLAB_USE", "SLURMLAB_SSH_CONFIG", "SLURMLAB_NODE_PYTHON"):
        monkeypatch.delenv(name, raising=False)
    return kept_shell


@pytest.fixture
def kept(shell: Any) -> str | None:
    """The slurm.conf of the runner the shell started with, which a setting not applied leaves as it is."""
    return get_runner().slurm_conf


def _closed_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])  # closed again: nothing listens there


@pytest.fixture
def load(
    shell: Any, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> Callable[..., tuple[str, str]]:
    """``%load_ext slurmlab`` with these settings in the environment: what it printed (stdout, stderr)."""

    def run(**settings: str) -> tuple[str, str]:
        for name, value in settings.items():
            monkeypatch.setenv(name, value)
        shell.run_line_magic("load_ext", "slurmlab")
        said = capsys.readouterr()
        return said.out, said.err

    return run


def test_three_words_are_refused_at_load_and_the_magics_still_load(
    load: Callable[..., tuple[str, str]], kept: str | None, shell: Any
) -> None:
    _, err = load(SLURMLAB_USE="ssh://alice@login.example /etc/slurm/slurm.conf extra")
    assert "SLURMLAB_USE not applied" in err and "holds 3 words" in err, err
    assert get_runner().slurm_conf == kept  # unchanged
    assert "slurm" in shell.magics_manager.lsmagic()["line"]


def test_a_slurm_conf_is_used_once_per_kernel(
    load: Callable[..., tuple[str, str]], kept: str | None, shell: Any, tmp_path: Path
) -> None:
    conf = tmp_path / "slurm.conf"
    conf.write_text("")
    out, _ = load(SLURMLAB_USE=str(conf))
    assert f"SLURMLAB_USE: now using {conf}" in out
    assert get_runner().slurm_conf == str(conf) and get_runner().ssh is None
    # the kernel then chose another: loading again does not take it back
    set_runner(Runner(slurm_conf=kept))
    shell.run_line_magic("unload_ext", "slurmlab")
    out, _ = load()
    assert get_runner().slurm_conf == kept and "SLURMLAB_USE" not in out


@pytest.mark.skipif(shutil.which("ssh") is None, reason="needs OpenSSH's client (openssh-client)")
def test_the_ssh_config_named_is_the_one_ssh_reads(
    load: Callable[..., tuple[str, str]], kept: str | None, tmp_path: Path
) -> None:
    # "cluster-alias" resolves nowhere: only the config's HostName and Port make it a refused loopback port
    config = tmp_path / "ssh_config"
    config.write_text(f"Host cluster-alias\n  HostName 127.0.0.1\n  Port {_closed_port()}\n  User nobody\n")
    _, err = load(SLURMLAB_SSH_CONFIG=str(config), SLURMLAB_USE="ssh://cluster-alias")
    assert "SLURMLAB_USE not applied: cannot use ssh://cluster-alias" in err, err
    assert "Connection refused" in err, err
    assert get_runner().ssh is None and get_runner().slurm_conf == kept


def test_an_ssh_config_that_is_not_a_file_is_said(
    load: Callable[..., tuple[str, str]], kept: str | None, tmp_path: Path
) -> None:
    _, err = load(SLURMLAB_SSH_CONFIG=str(tmp_path / "missing"), SLURMLAB_USE="ssh://login.example")
    assert f"SLURMLAB_SSH_CONFIG names {tmp_path / 'missing'}, which is not a file" in err, err
    assert get_runner().slurm_conf == kept


def test_python_goes_with_use_and_names_the_nodes_python(shell: Any, tmp_path: Path) -> None:
    shell.run_line_magic("load_ext", "slurmlab")
    conf = tmp_path / "slurm.conf"
    conf.write_text("")
    shell.run_line_magic("slurm", f"use {conf} --python /shared/env/bin/python")
    assert get_runner().slurm_conf == str(conf) and get_runner().python() == "/shared/env/bin/python"
    with pytest.raises(UsageError, match="--python goes with %slurm use"):
        shell.run_line_magic("slurm", "status --python /x")


def test_the_nodes_python_is_the_runners_then_the_environments_then_the_default(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    import sys

    monkeypatch.delenv("SLURMLAB_NODE_PYTHON", raising=False)
    assert Runner().python() == sys.executable
    monkeypatch.setenv("SLURMLAB_NODE_PYTHON", "/site/python")
    assert Runner().python() == "/site/python"
    assert Runner(node_python="/mine/python").python() == "/mine/python"


def test_the_sync_folder_on_the_far_side_is_made_watched_started_and_removed(
    monkeypatch: pytest.MonkeyPatch, tmp_path: Path
) -> None:
    monkeypatch.setenv("HOME", str(tmp_path))  # the login's home: here, through a local runner
    folder = RemoteSyncFolder(Runner())
    path = Path(folder.path)
    assert path.parent == tmp_path / ".slurmlab" / "sync" and path.name.startswith("slurmlab-sync-")
    assert folder.ready() == 0
    (path / "ready.p0").write_text("")
    (path / "ready.p1").write_text("")
    assert folder.ready() == 2
    before = time.time_ns()
    folder.start_at(0.5)
    t0 = int((path / "t0").read_text())
    assert before + 0.5e9 <= t0 <= time.time_ns() + 0.5e9
    folder.close()
    assert not path.exists()


def test_the_sync_folder_commands_touch_no_other_folder(
    monkeypatch: pytest.MonkeyPatch, tmp_path: Path
) -> None:
    monkeypatch.setenv("HOME", str(tmp_path))
    folder = RemoteSyncFolder(Runner())
    other = tmp_path / "precious"
    other.mkdir()
    folder.path = str(other)  # as if the path had been tampered with on its way
    with pytest.raises(ExperimentError, match="not a sync folder of slurmlab"):
        folder.ready()
    folder.close()  # a failed removal is quiet at the end, and removes nothing
    assert other.is_dir()
