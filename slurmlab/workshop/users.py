"""The seats' Unix accounts: ``useradd`` and ``userdel``, each an argv list with a timeout, run as root.

An account is made without a password (locked: nobody logs in to the machine with it) and without a home from
``useradd``: the workshop makes the home itself, inside its own folder, so that ``down`` removes exactly that.
No subordinate uid range is given (``/etc/subuid`` stays as it was). ``userdel`` removes the account and the
group ``useradd -U`` made for it.
"""

from __future__ import annotations

import os
import pwd
import shutil
import subprocess
from pathlib import Path

from slurmlab.errors import SlurmlabError

__all__ = ["add_user", "exists", "make_home", "remove_user", "tool"]

_SBIN = "/usr/sbin:/sbin:/usr/bin:/bin"
TIMEOUT = 30.0
_NO_SUCH_USER = 6  # userdel(8): "specified user doesn't exist"


def tool(name: str) -> str:
    """The full path of ``name`` (useradd, userdel), or an error saying where it comes from."""
    found = shutil.which(name) or shutil.which(name, path=_SBIN)
    if found is None:
        raise SlurmlabError(
            f"{name} is not installed", hint="it comes with the passwd package (apt install passwd)"
        )
    return found


def exists(name: str) -> bool:
    """Whether ``name`` is a user or a group on this machine already."""
    import grp

    for lookup in (pwd.getpwnam, grp.getgrnam):
        try:
            lookup(name)
            return True
        except KeyError:
            pass
    return False


def _run(argv: list[str]) -> subprocess.CompletedProcess[str]:
    try:
        return subprocess.run(argv, capture_output=True, text=True, timeout=TIMEOUT, env={"PATH": _SBIN})
    except subprocess.TimeoutExpired:
        raise SlurmlabError(
            f"{' '.join(argv)} did not finish within {TIMEOUT:.0f} s",
            hint="another program may hold /etc/passwd's lock (a running useradd or vipw)",
        ) from None


def add_user(name: str, home: Path) -> int:
    """Create the locked account ``name`` with ``home`` as its home (not created here); its uid."""
    argv = [
        tool("useradd"),
        "--no-create-home",
        "--home-dir",
        str(home),
        "--shell",
        "/bin/bash",
        "--user-group",
        "--comment",
        "slurmlab workshop seat",
        "-K",
        "SUB_UID_COUNT=0",
        "-K",
        "SUB_GID_COUNT=0",
        name,
    ]
    done = _run(argv)
    if done.returncode != 0:
        raise SlurmlabError(
            f"useradd {name} failed (exit code {done.returncode}): {done.stderr.strip()}",
            hint="workshop up must run as root; `slurmlab workshop down` removes the seats made so far",
        )
    return pwd.getpwnam(name).pw_uid


def make_home(name: str, home: Path) -> None:
    """``home`` as ``name``'s own private folder."""
    entry = pwd.getpwnam(name)
    home.mkdir(mode=0o700, exist_ok=True)
    os.chown(home, entry.pw_uid, entry.pw_gid)
    home.chmod(0o700)


def remove_user(name: str, uid: int) -> bool:
    """Remove the account ``name`` if it is still the one made with ``uid``; False when there was none. An
    account of that name with another uid is someone else's now: refused, with words."""
    try:
        entry = pwd.getpwnam(name)
    except KeyError:
        return False
    if entry.pw_uid != uid:
        raise SlurmlabError(
            f"the user {name} now has uid {entry.pw_uid}, not the workshop's {uid}: left alone",
            hint=f"check who made it (getent passwd {name}); remove it by hand if it is the workshop's",
        )
    done = _run([tool("userdel"), name])
    if done.returncode not in (0, _NO_SUCH_USER):
        raise SlurmlabError(
            f"userdel {name} failed (exit code {done.returncode}): {done.stderr.strip()}",
            hint="a process of that user may still run: `ps -u " + name + "`, then run workshop down again",
        )
    return done.returncode == 0
