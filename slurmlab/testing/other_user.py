"""A second Unix user in a test sandbox: tests whose subject is someone else's job submit it as that user.

Slurm's ``salloc --uid`` / ``srun --uid`` are gone since 24.11 (``unrecognized option``) and 26.05's
``sbatch --uid`` refuses some users, so one path serves every version: the job is submitted by the user
for real (``runuser -u USER -- salloc …``), through the sandbox's munged, which admits that user
(:meth:`slurmlab.sandbox.Sandbox.admit`). Needs root (``runuser``, ``useradd``); without it the test skips.
"""

from __future__ import annotations

import os
import pwd
import shutil
import subprocess
from collections.abc import Sequence
from typing import Any

import pytest

__all__ = ["OTHER_USER", "admit", "as_user", "ensure_user", "submit_as"]

OTHER_USER = "slurmlabother"
_SBIN = "/usr/sbin:/sbin:/usr/bin:/bin"
_USER_EXISTS = 9  # useradd(8): "username already in use"


def _tool(name: str) -> str:
    found = shutil.which(name) or shutil.which(name, path=_SBIN)
    if found is None:
        pytest.skip(f"needs {name} (util-linux/passwd) to act as a second Unix user")
    return found


def ensure_user(name: str = OTHER_USER, *, home: bool = False) -> str:
    """The Unix user ``name``, created when missing (with a home when ``home``, else without a home or a login
    shell); skips without root. Two test processes may ask at once: a user the other one just made is found."""
    try:
        pwd.getpwnam(name)
        return name
    except KeyError:
        pass
    if os.geteuid() != 0:
        pytest.skip(f"needs root (useradd) to create the user {name}")
    flags = ["-m"] if home else ["-M", "-s", "/usr/sbin/nologin"]
    made = subprocess.run([_tool("useradd"), *flags, name], capture_output=True, text=True, timeout=30)
    if made.returncode not in (0, _USER_EXISTS):
        raise RuntimeError(f"useradd {name} failed ({made.returncode}): {made.stderr.strip()}")
    return name


def admit(sandbox: Any, name: str) -> None:
    """Let ``name`` use ``sandbox``'s munged, keeping the users it already admits."""
    if name not in sandbox.admitted:
        sandbox.admit(*sandbox.admitted, name)


def as_user(name: str, argv: Sequence[str]) -> list[str]:
    """``argv`` run as ``name`` (the environment, ``SLURM_CONF`` included, is kept by runuser)."""
    if os.geteuid() != 0:
        pytest.skip(f"needs root (runuser) to run commands as {name}")
    return [_tool("runuser"), "-u", name, "--", *argv]


def submit_as(sandbox: Any, name: str, argv: Sequence[str], *, timeout: float = 30.0) -> Any:
    """Run the Slurm command ``argv`` (salloc, sbatch …) as the admitted user ``name`` against ``sandbox``.

    Returns the runner's RunResult (a failure raises its SlurmError, Slurm's words kept)."""
    ensure_user(name)
    admit(sandbox, name)
    from slurmlab.slurm.runner import Runner

    # runuser runs on this machine, as root: the sandbox's own runner, also where the tests see it over SSH
    return Runner(slurm_conf=str(sandbox.conf_path)).run(as_user(name, argv), timeout=timeout)
