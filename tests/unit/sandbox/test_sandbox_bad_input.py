"""Bad input to the sandbox gets a SandboxError that says the fix (no Slurm needed for these)."""

from __future__ import annotations

from pathlib import Path

import pytest

from slurmlab.errors import SandboxError
from slurmlab.sandbox import APT_INSTALL, Sandbox, installed
from slurmlab.sandbox.ports import free_ports


def test_missing_slurm_or_munge_names_the_apt_get_line(monkeypatch, tmp_path: Path) -> None:
    monkeypatch.setenv("PATH", str(tmp_path))  # an empty folder: nothing is installed
    monkeypatch.setattr(installed, "_SBIN", ())
    with pytest.raises(SandboxError) as info:
        Sandbox.up(profile="seed", directory=tmp_path / "sb")
    assert "not installed" in str(info.value)
    assert APT_INSTALL in str(info.value)
    assert "apt-get install slurmctld slurmd slurm-client munge" in APT_INSTALL


def test_unknown_profile_from_the_cli(capsys) -> None:
    from slurmlab.cli import main

    assert main(["sandbox", "up", "--profile", "nope"]) == 2
    err = capsys.readouterr().err
    assert "unknown sandbox profile 'nope'" in err and "dgx-h100" in err


def test_folder_too_deep_for_the_munge_socket(tmp_path: Path) -> None:
    deep = tmp_path / ("x" * 120)
    with pytest.raises(SandboxError, match="too deep") as info:
        Sandbox.up(profile="seed", directory=deep)
    assert "--dir" in str(info.value)


def test_find_without_a_sandbox(tmp_path: Path) -> None:
    with pytest.raises(SandboxError, match="no sandbox in") as info:
        Sandbox.find(tmp_path)
    assert "sandbox up" in str(info.value)


def test_corrupt_state_file(tmp_path: Path) -> None:
    (tmp_path / "state.json").write_text("{not json")
    with pytest.raises(SandboxError, match="cannot read"):
        Sandbox.find(tmp_path)


def test_out_of_range_port() -> None:
    with pytest.raises(SandboxError, match="out of range"):
        free_ports(3, first=65534)


def test_free_ports_are_distinct_and_unused() -> None:
    ports = free_ports(8)
    assert len(set(ports)) == 8 and all(1024 <= p <= 65535 for p in ports)


def test_free_ports_come_from_below_the_ephemeral_range() -> None:
    """Between the choice and the daemon's bind, a port of the kernel's ephemeral range may go to any outgoing
    connection or bind(0) of the machine ("Address already in use" when lessons start sandboxes side by side)."""
    from slurmlab.sandbox.ports import FIXED_PORTS_FROM, ephemeral_range

    low, _ = ephemeral_range()
    assert all(FIXED_PORTS_FROM <= p < low for p in free_ports(16))


def test_down_of_a_sandbox_already_down_says_so_and_succeeds(tmp_path: Path, capsys) -> None:
    from slurmlab.cli import main

    folder = tmp_path / "sb"
    (folder / "log").mkdir(parents=True)  # what `down` leaves: the folder, its logs, no state.json
    assert main(["sandbox", "down", "--dir", str(folder)]) == 0
    out, err = capsys.readouterr()
    assert f"the sandbox in {folder} is already down" in out and "nothing to stop" in out
    assert "error" not in err and "start one" not in out + err
    # a folder that is not there is still an error (a mistyped --dir is not "already down")
    assert main(["sandbox", "down", "--dir", str(tmp_path / "typo")]) == 2
    assert "no sandbox in" in capsys.readouterr().err
