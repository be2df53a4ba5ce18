"""The master's socket path fits a Unix socket whatever XDG_RUNTIME_DIR is: ssh binds "<ControlPath>.<16
characters>" first, and a path over the limit fails with "too long for Unix domain socket" — the fresh-clone CI
run's JupyterLab, whose XDG_RUNTIME_DIR was a pytest folder of a worker, never got its link up (it said
"connecting" for 65 s), while the same test passed alone, one folder level shorter."""

from __future__ import annotations

import os
import socket
import tempfile
from pathlib import Path

import pytest

from slurmlab.slurm.ssh import SshLink, SshTarget
from slurmlab.slurm.ssh.link import CONTROL_PATH_ROOM

TARGET = SshTarget("127.0.0.1", "slurmlabssh13996", 39923)


def _bindable(path: str) -> bool:
    """Whether ssh could bind its temporary socket beside ``path`` (the 17 characters it adds)."""
    probe = path + ".0123456789abcdef"
    try:
        with socket.socket(socket.AF_UNIX) as s:
            s.bind(probe)
    except OSError:
        return False
    os.unlink(probe)
    return True


def test_a_deep_runtime_folder_gives_a_socket_path_ssh_can_bind(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    deep = tmp_path / ("d" * 40) / "popen-gw1" / "xdg-remote0"
    deep.mkdir(parents=True, mode=0o700)
    monkeypatch.setenv("XDG_RUNTIME_DIR", str(deep))
    path = SshLink(TARGET).control_path
    assert len(path) <= CONTROL_PATH_ROOM, path
    assert _bindable(path), path
    folder = Path(path).parent
    assert folder.stat().st_mode & 0o077 == 0 and folder.stat().st_uid == os.geteuid()
    assert str(folder).startswith(tempfile.gettempdir())


def test_a_short_runtime_folder_is_kept(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    short = Path(tempfile.mkdtemp(prefix="xr-"))
    try:
        monkeypatch.setenv("XDG_RUNTIME_DIR", str(short))
        path = SshLink(TARGET).control_path
        assert Path(path).parent.parent == short and _bindable(path)
    finally:
        import shutil

        shutil.rmtree(short, ignore_errors=True)
