"""The daemons' command lines: a restarted slurmctld reads what state it saved but does not stop at what it never
saved (26.05 with accounting: "fatal: No Assoc usage file to recover" after a kill); a fresh one clears it."""

from __future__ import annotations

from pathlib import Path

from slurmlab.sandbox.daemons import daemon_argv

CONF, SOCK, LOG = Path("/sb/slurm.conf"), Path("/sb/munge/munge.socket"), Path("/sb/log")


def test_slurmctld_restarted_ignores_missing_state_and_a_fresh_one_clears_it() -> None:
    assert daemon_argv("slurmctld", "/usr/sbin/slurmctld", CONF, SOCK, LOG) == [
        "/usr/sbin/slurmctld",
        "-D",
        "-f",
        str(CONF),
    ]
    assert daemon_argv("slurmctld", "slurmctld", CONF, SOCK, LOG, recover=True) == [
        "slurmctld",
        "-D",
        "-i",
        "-f",
        str(CONF),
    ]
    # clearing the state wins: nothing is left to read, so nothing to ignore
    assert daemon_argv("slurmctld", "slurmctld", CONF, SOCK, LOG, fresh=True, recover=True) == [
        "slurmctld",
        "-D",
        "-c",
        "-f",
        str(CONF),
    ]


def test_recover_changes_only_slurmctld() -> None:
    for name in ("slurmd:node1", "munged"):
        assert daemon_argv(name, "x", CONF, SOCK, LOG, recover=True) == daemon_argv(
            name, "x", CONF, SOCK, LOG
        )
