"""Who may use a sandbox's munge socket: its owner and the Unix users it was told to admit, nobody else.

munged binds its socket with mode 0777 and wants its folder searchable by everyone, so by default any local
user could get credentials from the sandbox's munged and submit jobs to it (as themselves, but to a cluster
that is not theirs to use). The sandbox therefore closes the socket's folder (0700) and the socket (0600) and
lets each admitted user in through a POSIX ACL entry (``u:USER:--x`` on the folder, ``u:USER:rw-`` on the
socket). munged checks its folder only when it starts, and only warns under ``-f``, which the sandbox uses.
Root passes any permission check, so a root-owned sandbox is always reachable by root.

ACLs are written as the ``system.posix_acl_access`` extended attribute (the kernel's binary layout), so no
``setfacl`` is needed.
"""

from __future__ import annotations

import errno
import os
import pwd
import stat
import struct
from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from pathlib import Path

from slurmlab.errors import SandboxError

__all__ = ["AdmittedUser", "acl_entries", "encode_acl", "grant", "resolve_users", "unreachable_folder"]

_XATTR = "system.posix_acl_access"
_VERSION = 2
_UNDEFINED_ID = 0xFFFFFFFF
# tags of <linux/posix_acl.h>
_USER_OBJ, _USER, _GROUP_OBJ, _MASK, _OTHER = 0x01, 0x02, 0x04, 0x10, 0x20


@dataclass(frozen=True)
class AdmittedUser:
    name: str
    uid: int
    gids: tuple[int, ...]


def resolve_users(names: Iterable[str]) -> list[AdmittedUser]:
    """The Unix users called ``names`` (each once), or SandboxError naming the one that does not exist."""
    out: dict[str, AdmittedUser] = {}
    for name in names:
        if not isinstance(name, str) or not name or name.startswith("-") or "\0" in name:
            raise SandboxError(
                f"--admit needs a Unix user name, not {name!r}",
                hint="e.g. `slurmlab sandbox up --admit alice --admit bob`",
            )
        try:
            entry = pwd.getpwnam(name)
        except KeyError:
            raise SandboxError(
                f"cannot admit {name!r}: there is no such Unix user on this machine",
                hint="check the name with `getent passwd NAME`",
            ) from None
        gids = tuple(os.getgrouplist(entry.pw_name, entry.pw_gid))
        out[entry.pw_name] = AdmittedUser(entry.pw_name, entry.pw_uid, gids)
    return list(out.values())


def _can_search(user: AdmittedUser, st: os.stat_result) -> bool:
    if user.uid == 0:
        return True
    if st.st_uid == user.uid:
        return bool(st.st_mode & stat.S_IXUSR)
    if st.st_gid in user.gids:
        return bool(st.st_mode & stat.S_IXGRP)
    return bool(st.st_mode & stat.S_IXOTH)


def unreachable_folder(user: AdmittedUser, folder: Path) -> Path | None:
    """The first folder from / down to ``folder`` that ``user`` may not enter (by its mode bits), or None."""
    path = Path(folder).absolute()
    for part in [*reversed(path.parents), path]:
        try:
            st = part.stat()
        except OSError:
            return part
        if not _can_search(user, st):
            return part
    return None


def acl_entries(mode: int, users: Sequence[tuple[int, int]]) -> list[tuple[int, int, int]]:
    """(tag, perm, id) entries of an access ACL: ``mode``'s owner/group/other bits plus one entry per (uid, perm).

    The mask is the union of the named users' and the group's permissions, so no entry is cut by it."""
    owner, group, other = (mode >> 6) & 7, (mode >> 3) & 7, mode & 7
    entries = [(_USER_OBJ, owner, _UNDEFINED_ID)]
    entries += [(_USER, perm & 7, uid) for uid, perm in sorted(set(users))]
    entries.append((_GROUP_OBJ, group, _UNDEFINED_ID))
    if users:
        mask = group
        for _, perm in users:
            mask |= perm & 7
        entries.append((_MASK, mask, _UNDEFINED_ID))
    entries.append((_OTHER, other, _UNDEFINED_ID))
    return entries


def encode_acl(entries: Sequence[tuple[int, int, int]]) -> bytes:
    """The kernel's ``system.posix_acl_access`` value for ``entries`` (little-endian, version 2)."""
    return struct.pack("<I", _VERSION) + b"".join(
        struct.pack("<HHI", tag, perm, ident) for tag, perm, ident in entries
    )


def grant(path: Path, mode: int, users: Sequence[AdmittedUser], perm: int) -> None:
    """Set ``path`` to ``mode`` and give each of ``users`` ``perm`` (rwx bits) on it; no user: mode bits alone."""
    os.chmod(path, mode)
    if not users:
        try:
            os.removexattr(path, _XATTR)
        except OSError as exc:
            if exc.errno not in (errno.ENODATA, errno.ENOTSUP, errno.EOPNOTSUPP):
                raise
        os.chmod(path, mode)  # removing the ACL leaves the mode bits as they are; be sure
        return
    value = encode_acl(acl_entries(mode, [(u.uid, perm) for u in users]))
    try:
        os.setxattr(path, _XATTR, value)
    except OSError as exc:
        names = ", ".join(u.name for u in users)
        if exc.errno in (errno.ENOTSUP, errno.EOPNOTSUPP):
            raise SandboxError(
                f"cannot admit {names}: the file system of {path} does not support POSIX ACLs",
                hint="put the sandbox on one that does (ext4, xfs, tmpfs), e.g. --dir /tmp/slurmlab-sandbox",
            ) from exc
        raise SandboxError(
            f"cannot admit {names} to {path}: {exc.strerror}",
            hint="run `slurmlab sandbox up --admit ...` as the sandbox's owner",
        ) from exc
