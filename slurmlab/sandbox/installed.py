"""The Slurm and munge installed on this machine, which the sandbox runs: where their programs are, and
which release of Slurm it is."""

from __future__ import annotations

import os
import re
import shutil
import subprocess

from slurmlab.errors import SandboxError

__all__ = ["APT_INSTALL", "client", "daemon", "detect_release", "detect_version"]

APT_INSTALL = "sudo apt-get install slurmctld slurmd slurm-client munge"
# daemons live in sbin, which an ordinary user's PATH often lacks
_SBIN = ("/usr/sbin", "/usr/local/sbin", "/sbin")


def daemon(name: str) -> str:
    """Full path of a daemon (munged, slurmctld, slurmd), on PATH or in an sbin folder."""
    path = shutil.which(name) or shutil.which(name, path=os.pathsep.join(_SBIN))
    if path is None:
        raise SandboxError(
            f"{name} is not installed (the sandbox needs Slurm's daemons and munge)",
            hint=f"install them: {APT_INSTALL}",
        )
    return path


def client(name: str) -> str:
    """Full path of a Slurm client command (only used for the readiness check of ``up``/``status``)."""
    path = shutil.which(name)
    if path is None:
        raise SandboxError(
            f"the Slurm client command {name} is not installed", hint=f"install it: {APT_INSTALL}"
        )
    return path


def detect_release(slurmctld: str | None = None) -> str:
    """The installed Slurm's release, e.g. ``24.11.5``, from ``slurmctld -V`` (``slurm-wlm 24.11.5``)."""
    exe = slurmctld or daemon("slurmctld")
    proc = subprocess.run([exe, "-V"], capture_output=True, text=True, timeout=10, check=False)
    m = re.search(r"\d+\.\d+\.\d+", proc.stdout + proc.stderr)
    if m is None:
        raise SandboxError(
            f"cannot read the Slurm version from `{exe} -V`: {(proc.stdout + proc.stderr).strip()!r}",
            hint=f"reinstall Slurm: {APT_INSTALL}",
        )
    return m.group(0)


def detect_version(slurmctld: str | None = None) -> tuple[int, int]:
    """(major, minor) of the installed Slurm, from ``slurmctld -V`` (e.g. ``slurm-wlm 22.05.8``)."""
    major, minor, _ = detect_release(slurmctld).split(".")
    return int(major), int(minor)
