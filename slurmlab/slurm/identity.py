"""Who this process acts as, by uid, and the names of uids (no Slurm command runs here)."""

from __future__ import annotations

import os
import pwd

from slurmlab.errors import SlurmError

__all__ = ["current_uid", "current_user", "uid_of", "user_name"]


def current_uid() -> int:
    """Whose jobs slurmlab acts on: the effective uid, which Slurm's munge credential carries too
    (``$USER``/``getpass`` come from the environment, which anyone can set)."""
    return os.geteuid()


def current_user() -> str:
    """The name of :func:`current_uid` (the uid itself when the passwd database has no entry)."""
    return user_name(current_uid())


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
