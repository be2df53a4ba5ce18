"""The scenes ``scripts/record_limits.py`` recorded from a real Slurm 22.05 (``22.05/limits``): each
one every command ``why()`` (or the doctor, ``k``) ran while a limit held a job, as Slurm answered it.

``q`` the user at the QOS GPU cap, ``k`` the doctor on the same job, ``d`` the same with slurmdbd stopped, ``a``
an association's MaxJobs, ``o`` no accounting. Job ids are read from the recording, never assumed.
"""

from __future__ import annotations

from slurmlab.core.diagnosis.limit_rules import QUEUE_ARGV
from slurmlab.testing import recorded
from slurmlab.testing.recordings import golden_dir, listed_commands

__all__ = ["LIMITS", "scene_job", "scene_names", "scene_out", "scene_running"]

LIMITS = "22.05/limits"


def scene_names(prefix: str) -> dict[str, tuple[str, ...]]:
    """File name -> argv of every command of one scene (``q01…``, not the ``qt``/``qx`` extras)."""
    listed = listed_commands(golden_dir() / LIMITS)
    return {n: args for n, (args, _) in listed.items() if n.startswith(prefix) and n[len(prefix)].isdigit()}


def scene_out(prefix: str, *argv: str, exact: bool = False) -> str:
    """The stdout of the scene's command whose argv starts with ``argv`` (is ``argv``: exact)."""
    name = next(
        n for n, args in scene_names(prefix).items() if (args == argv if exact else args[: len(argv)] == argv)
    )
    return recorded(f"{LIMITS}/{name}").stdout


def scene_job(prefix: str) -> str:
    """The id of the job the scene asked about (its ``scontrol show job -d ID``)."""
    return next(
        args[4]
        for args in scene_names(prefix).values()
        if args[:4] == ("scontrol", "show", "job", "-d") and len(args) == 5
    )


def scene_running(prefix: str) -> str:
    """The id of the user's one running job in the scene's queue."""
    return next(line.split("|")[0] for line in scene_out(prefix, *QUEUE_ARGV).splitlines() if "|R|" in line)
