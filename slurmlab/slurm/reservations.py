"""Advance reservations an operator makes (``scontrol create reservation``): a workshop's class reservation.

Only an operator (root, SlurmUser, an administrator) may create one; Slurm's refusal comes back as its own words
in the runner's error.
"""

from __future__ import annotations

import re
from collections.abc import Sequence

from slurmlab.slurm.runner import Runner

__all__ = ["create_reservation", "reservation_argv"]

_NAME = re.compile(r"^[A-Za-z0-9_.-]{1,64}$")


def reservation_argv(name: str, nodes: Sequence[str], accounts: Sequence[str]) -> list[str]:
    """``scontrol create reservation`` holding ``nodes`` for ``accounts`` from now on, with no end."""
    for value in (name, *nodes, *accounts):
        if not _NAME.match(value):
            raise ValueError(f"{value!r} cannot be written into a reservation (letters, digits, _ . - only)")
    if not nodes or not accounts:
        raise ValueError("a reservation needs at least one node and one account")
    return [
        "scontrol",
        "create",
        "reservation",
        f"ReservationName={name}",
        "StartTime=now",
        "Duration=UNLIMITED",
        f"Nodes={','.join(nodes)}",
        f"Accounts={','.join(accounts)}",
    ]


def create_reservation(name: str, nodes: Sequence[str], accounts: Sequence[str], runner: Runner) -> None:
    """Create the reservation of :func:`reservation_argv` (one RPC)."""
    runner.run(reservation_argv(name, nodes, accounts), timeout=20)
