"""Session-scoped sandboxes for pytest: one per profile, each in its own folder with its own ports."""

from __future__ import annotations

import contextlib
import shutil
import tempfile
from concurrent.futures import ThreadPoolExecutor
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


def accounting_missing_reason() -> str | None:
    """Why a sandbox with accounting cannot run here (Slurm, slurmdbd, MariaDB or the accounting clients
    missing, with the install line), or None."""
    from slurmlab.sandbox.accounting_daemons import unavailable

    sbin = "/usr/sbin:/usr/local/sbin:/sbin:/usr/bin"
    clients = [
        n for n in ("sacct", "sshare") if shutil.which(n) is None and shutil.which(n, path=sbin) is None
    ]
    if clients:
        return f"Slurm accounting's clients are not installed ({', '.join(clients)} missing): {APT_INSTALL}"
    return slurm_missing_reason() or unavailable()


_SUFFIX = {True: "acct", False: "noacct", None: "auto"}


class SandboxFactory:
    """``factory(profile, nodes=None, accounting=None)`` starts a sandbox once per (profile, nodes, accounting)
    and caches it.

    ``accounting=None`` is the sandbox's own default, as a user gets it (on where slurmdbd and MariaDB are
    installed, without GPU caps), and the session sandbox's (``slurm_sandbox``): a test asking for its profile
    gets that very sandbox. ``False`` runs without (a test of what a cluster without accounting says);
    ``True`` insists, with the site-like GPU caps of the QOS."""

    def __init__(self, base: Path) -> None:
        self.base = base
        self._cache: dict[tuple[str, int | None, bool | None], Sandbox] = {}

    def __call__(self, profile: str, nodes: int | None = None, *, accounting: bool | None = None) -> Sandbox:
        key = (profile, nodes, accounting)
        if key not in self._cache:
            reason = slurm_missing_reason()
            if reason:
                pytest.skip(reason)
            name = profile if nodes is None else f"{profile}-{nodes}n"
            # named by profile as in the default place (a second profile started from a notebook goes beside
            # it); a suffix only where another sandbox of the session already holds that name
            taken = {sb.directory for sb in self._cache.values()}
            folder = self.base / name
            if folder in taken:
                folder = self.base / f"{name}-{_SUFFIX[accounting]}"
            self._cache[key] = Sandbox.up(
                profile=profile, nodes=nodes, directory=folder, accounting=accounting
            )
        return self._cache[key]

    def close(self) -> None:
        # the session's sandboxes stop side by side: each down() mostly waits for its own daemons to end
        with ThreadPoolExecutor(
            max_workers=max(1, len(self._cache)), thread_name_prefix="sandbox-down"
        ) as pool:
            errors = [e for e in pool.map(_stop, list(self._cache.values())) if e is not None]
        self._cache.clear()
        shutil.rmtree(self.base, ignore_errors=True)
        if errors:
            raise SandboxError("some sandboxes did not stop:\n" + "\n".join(errors))


def _stop(sb: Sandbox) -> str | None:
    """Stop ``sb``; what went wrong, or None."""
    # what admitted users submitted ends through Slurm first, like the owner's own jobs at down()
    for user in sb.admitted:
        with contextlib.suppress(Exception):
            sb.runner(timeout=15).run(["scancel", "--user", user], check=False)
    try:
        sb.down()
    except SandboxError as exc:
        return str(exc)
    return None


def new_base() -> Path:
    """The session's folder of sandboxes: short (the munge socket path must fit in 108 bytes) and 0711.

    Admitted users (``Sandbox.admit``, e.g. the second user of :mod:`slurmlab.testing.other_user`) must pass
    through it to reach the munge socket and read slurm.conf; 0711 lets them pass without listing it, and each
    sandbox keeps its munge folder closed to everyone it did not admit."""
    base = Path(tempfile.mkdtemp(prefix="slsb-", dir="/tmp"))
    base.chmod(0o711)
    return base
