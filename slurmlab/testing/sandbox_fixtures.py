"""Session-scoped sandboxes for pytest: one per profile, each in its own folder with its own ports."""

from __future__ import annotations

import contextlib
import shutil
import tempfile
from pathlib import Path

import pytest

from slurmlab.errors import SandboxError
from slurmlab.sandbox import APT_INSTALL, Sandbox

__all__ = ["SandboxFactory", "slurm_missing_reason"]

_NEEDED = ("munged", "slurmctld", "slurmd", "sinfo", "salloc", "srun")


def slurm_missing_reason() -> str | None:
    """Why a sandbox cannot run here (the install line), or None when Slurm and munge are installed."""
    sbin = "/usr/sbin:/usr/local/sbin:/sbin"
    missing = [n for n in _NEEDED if shutil.which(n) is None and shutil.which(n, path=sbin) is None]
    if missing:
        return f"Slurm/munge not installed ({', '.join(missing)} missing): {APT_INSTALL}"
    return None


class SandboxFactory:
    """``factory(profile, nodes=None)`` starts a sandbox once per (profile, nodes) and caches it."""

    def __init__(self, base: Path) -> None:
        self.base = base
        self._cache: dict[tuple[str, int | None], Sandbox] = {}

    def __call__(self, profile: str, nodes: int | None = None) -> Sandbox:
        key = (profile, nodes)
        if key not in self._cache:
            reason = slurm_missing_reason()
            if reason:
                pytest.skip(reason)
            folder = self.base / (profile if nodes is None else f"{profile}-{nodes}n")
            self._cache[key] = Sandbox.up(profile=profile, nodes=nodes, directory=folder)
        return self._cache[key]

    def close(self) -> None:
        errors = []
        for sb in self._cache.values():
            # what admitted users submitted ends through Slurm first, like the owner's own jobs at down()
            for user in sb.admitted:
                with contextlib.suppress(Exception):
                    sb.runner(timeout=15).run(["scancel", "--user", user], check=False)
            try:
                sb.down()
            except SandboxError as exc:
                errors.append(str(exc))
        self._cache.clear()
        shutil.rmtree(self.base, ignore_errors=True)
        if errors:
            raise SandboxError("some sandboxes did not stop:\n" + "\n".join(errors))


def new_base() -> Path:
    """The session's folder of sandboxes: short (the munge socket path must fit in 108 bytes) and 0711.

    Admitted users (``Sandbox.admit``, e.g. the second user of :mod:`slurmlab.testing.other_user`) must pass
    through it to reach the munge socket and read slurm.conf; 0711 lets them pass without listing it, and each
    sandbox keeps its munge folder closed to everyone it did not admit."""
    base = Path(tempfile.mkdtemp(prefix="slsb-", dir="/tmp"))
    base.chmod(0o711)
    return base
