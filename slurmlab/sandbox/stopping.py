"""Stopping every process of a sandbox, in the order its daemons need (``Sandbox.down``)."""

from __future__ import annotations

from collections.abc import Mapping
from pathlib import Path

from slurmlab.errors import SandboxError
from slurmlab.sandbox import processes
from slurmlab.sandbox.accounting_daemons import ACCOUNTING_DAEMONS, stop_database

__all__ = ["stop_sandbox"]


def stop_sandbox(own: Mapping[str, int], conf_path: str, directory: Path, owner: str = "") -> list[int]:
    """Stop the sandbox's live daemons ``own`` (name -> pid) and whatever they left (slurmstepd, job tasks).

    With accounting, slurmdbd stops after slurmctld (which sends it the last job records) and MariaDB after
    slurmdbd, through ``mariadb-admin shutdown`` as ``owner`` (its database account) before any signal.

    Returns the pids stopped; raises SandboxError naming those that would not stop."""
    roots = set(own.values())
    related = processes.find_related(roots, conf_path, directory)
    # the Slurm daemons together (slurmctld stops its own slurmscriptd), then what they left (slurmstepd,
    # job tasks), munged last since the others talk to it while they stop
    slurm = {p for n, p in own.items() if n not in ("munged", *ACCOUNTING_DAEMONS)}
    left = processes.stop(slurm)
    # a step being launched while the daemons stop can appear late: look until none is new
    for _ in range(3):
        # step daemons ignore SIGTERM (24.11+): no need to wait the daemons' grace for them
        more = related | processes.find_related(roots, conf_path, directory)
        left += processes.stop(more, grace=2.0)
        related |= more
        if not processes.find_related(roots, conf_path, directory):
            break
    left += processes.stop({p for n, p in own.items() if n == "slurmdbd"})
    if "mariadbd" in own or (directory / "db").is_dir():
        left += stop_database(own.get("mariadbd"), directory, owner)
    left += processes.stop({p for n, p in own.items() if n == "munged"})
    if left:
        raise SandboxError(
            f"processes {left} of the sandbox in {directory} did not stop",
            hint=f"stop them by pid: kill -9 {' '.join(map(str, left))}",
        )
    return sorted(roots | related)
