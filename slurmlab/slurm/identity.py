"""Who this process acts as, by uid, and the names of uids (no Slurm command runs here)."""

from __future__ import annotations

import os
import pwd
from collections.abc import Callable

from slurmlab.errors import SlurmError

__all__ = ["current_uid", "current_user", "follow", "uid_of", "user_name"]

ClusterUser = Callable[[], "tuple[int, str] | None"]


def _here() -> tuple[int, str] | None:
    return None


# who runs Slurm's commands when they run on another machine (over SSH: the login's uid and name there, as that
# login node's `id` said them), asked each time; None: this process's effective uid
_cluster_user: ClusterUser = _here


def follow(source: ClusterUser) -> None:
    """Make ``source()`` decide :func:`current_uid`: the user whom Slurm's commands run as on the cluster, or
    None for this process's own (:mod:`slurmlab.slurm.runner` follows its process-wide runner so)."""
    global _cluster_user
    _cluster_user = source


def current_uid() -> int:
    """Whose jobs slurmlab acts on: the effective uid, which Slurm's munge credential carries too
    (``$USER``/``getpass`` come from the environment, which anyone can set). Over SSH, the uid of the login on
    the cluster (see :func:`follow`), which that cluster's munge credential carries."""
    remote = _cluster_user()
    return os.geteuid() if remote is None else remote[0]


def current_user() -> str:
    """The name of :func:`current_uid` (the uid itself when the passwd database has no entry)."""
    remote = _cluster_user()
    return user_name(current_uid()) if remote is None else remote[1]


def user_name(uid: int) -> str:
    """The login name of ``uid``; the uid itself, as text, when the passwd database has no entry."""
    try:
        return pwd.getpwuid(uid).pw_name
    except KeyError:
        return str(uid)


def uid_of(user: str | None) -> int:
    """The uid of the login name ``user`` (a number is taken as a uid); :func:`current_uid` for None."""
    if user is None:
        return current_uid()
    try:
        return pwd.getpwnam(user).pw_uid
    except KeyError:
        if user.isascii() and user.isdigit():
            return int(user)
        raise SlurmError(
            f"no Unix user named {user!r} on this machine", hint="give a user name that `id USER` knows"
        ) from None
