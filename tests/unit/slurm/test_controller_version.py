"""``%slurm`` and the server say the controller's Slurm version as Slurm spells it (22.05.8, never 22.5.8)."""

from __future__ import annotations

import pytest
from fake_slurm import golden_with

from slurmlab.slurm.controller import ping, slurm_version
from slurmlab.testing import FakeRunner

SAID = {"22.05": "22.05.8", "24.11": "24.11.5", "26.05": "26.05.5"}


@pytest.mark.parametrize("version", golden_with("s23_scontrol_ping.txt"))
def test_ping_gives_the_version_as_slurm_writes_it(version: str) -> None:
    fake = FakeRunner()
    fake.replay(f"{version}/00_sinfo_version.txt", f"{version}/s23_scontrol_ping.txt")
    try:
        answer = ping(fake)
        assert answer == {"ok": True, "version": SAID[version], "message": "Slurmctld(primary) at vm is UP"}
        assert slurm_version(fake)[:2] == tuple(int(x) for x in version.split("."))  # 05 is 5 in the tuple
    finally:
        fake.close()


@pytest.mark.parametrize(
    ("said", "code", "ok"),
    [
        ("Slurmctld(primary) at vm is DOWN\nSlurmctld(backup) at vm2 is UP", 1, True),
        ("Slurmctld(primary) at vm is DOWN\nSlurmctld(backup) at vm2 is DOWN", 1, False),
        ("Slurmctld(primary) at vm is DOWN", 1, False),
    ],
)
def test_a_backup_that_is_up_answers(said: str, code: int, ok: bool) -> None:
    fake = FakeRunner()
    fake.replay("22.05/00_sinfo_version.txt")
    fake.on(["scontrol", "ping"], stdout=said + "\n", returncode=code)
    try:
        answer = ping(fake)
        assert answer["ok"] is ok and answer["message"] == said
    finally:
        fake.close()


def test_the_status_line_shows_the_padded_month() -> None:
    from slurmlab.magics import kernel
    from slurmlab.slurm.runner import set_runner

    fake = FakeRunner()
    fake.replay("22.05/00_sinfo_version.txt", "22.05/s23_scontrol_ping.txt")
    old = set_runner(fake)
    try:
        assert "controller: answering (Slurm 22.05.8)" in kernel.slurm_status()
    finally:
        set_runner(old)
        fake.close()


@pytest.mark.parametrize(
    ("said", "numbers"),
    [
        ("slurm 24.11.0-0rc1", (24, 11, 0)),
        ("slurm 23.02.7-vendor", (23, 2, 7)),
        ("slurm-wlm 22.05.8", (22, 5, 8)),
        ("slurm 25.11.0rc1", (25, 11, 0)),
        ("slurm 24.05.4.1", (24, 5, 4)),
    ],
)
def test_a_version_with_a_build_suffix_still_reads(said: str, numbers: tuple[int, int, int]) -> None:
    fake = FakeRunner()
    fake.on(["sinfo", "--version"], stdout=said + "\n")
    try:
        assert slurm_version(fake) == numbers
    finally:
        fake.close()
