"""Each student's copy of the lessons, and putting back the ones a student has not changed.

``up`` keeps the teacher's copy of the lessons in the workshop folder and, for each seat, the checksum of what
that seat was given. ``reset`` compares each student's file with it: the same (or missing) is put back from the
teacher's copy, owned by the student; anything else is the student's work, left alone and reported. Students
are given the student edition (:func:`slurmlab.core.editions.student_edition`: no solutions, no instructor
checks); the teacher's edition is kept beside it, in ``teacher-lessons``.
"""

from __future__ import annotations

import contextlib
import hashlib
import os
import pwd
import stat
from collections.abc import Mapping
from dataclasses import dataclass, field
from pathlib import Path

from slurmlab.core.editions import student_edition

__all__ = ["LessonReset", "digest", "give", "reset_seat", "write_originals"]

LESSONS = "lessons"  # the folder of a home (and of the workshop folder) that holds them: the student edition
TEACHER_LESSONS = "teacher-lessons"  # the folder of the workshop folder with the teacher's edition


def digest(data: bytes) -> str:
    return hashlib.sha256(data).hexdigest()


def write_originals(folder: Path, lessons: Mapping[str, bytes]) -> dict[str, str]:
    """What the students are given of ``lessons`` (file name -> the teacher's edition), the student edition, under
    ``folder``/lessons, and the teacher's edition under ``folder``/teacher-lessons; name -> checksum given."""
    where = folder / LESSONS
    teacher = folder / TEACHER_LESSONS
    where.mkdir(mode=0o755, exist_ok=True)
    teacher.mkdir(mode=0o755, exist_ok=True)
    out = {}
    for name, data in sorted(lessons.items()):
        if "/" in name or name.startswith("."):
            raise ValueError(f"a lesson's file name must be a plain name, not {name!r}")
        given = student_edition(data, name) if name.endswith(".ipynb") else data
        (teacher / name).write_bytes(data)
        (where / name).write_bytes(given)
        out[name] = digest(given)
    return out


def _open_dir(where: Path) -> int:
    # the student owns the folder: it is entered without following a link they may have put in its place, and
    # every name below is opened relative to it (a link swapped in later is not followed either)
    return os.open(where, os.O_RDONLY | os.O_DIRECTORY | os.O_NOFOLLOW)


def _put(dfd: int, name: str, data: bytes, user: pwd.struct_passwd) -> None:
    # written beside, owned, then renamed over: the student never sees half a notebook, nor root's file
    part = f".{name}.workshop-part"
    with contextlib.suppress(FileNotFoundError):
        os.unlink(part, dir_fd=dfd)
    fd = os.open(part, os.O_WRONLY | os.O_CREAT | os.O_EXCL | os.O_NOFOLLOW, 0o644, dir_fd=dfd)
    try:
        os.fchown(fd, user.pw_uid, user.pw_gid)
        os.fchmod(fd, 0o644)
        _write_all(fd, data)
    finally:
        os.close(fd)
    os.replace(part, name, src_dir_fd=dfd, dst_dir_fd=dfd)


def _write_all(fd: int, data: bytes) -> None:
    view = memoryview(data)
    while view:
        view = view[os.write(fd, view) :]


def _read(dfd: int, name: str) -> bytes | None:
    """The student's file ``name``: its bytes, None when missing, or ValueError when it is not a plain file
    (a link, a fifo: never followed nor waited on)."""
    try:
        fd = os.open(name, os.O_RDONLY | os.O_NOFOLLOW | os.O_NONBLOCK, dir_fd=dfd)
    except FileNotFoundError:
        return None
    except OSError as exc:  # ELOOP: a symbolic link
        raise ValueError(name) from exc
    try:
        if not stat.S_ISREG(os.fstat(fd).st_mode):
            raise ValueError(name)
        with os.fdopen(os.dup(fd), "rb") as f:
            return f.read()
    finally:
        os.close(fd)


def give(home: Path, name: str, originals: Path) -> dict[str, str]:
    """Copy every lesson of ``originals`` into ``home``/lessons, owned by ``name``; lesson -> checksum given."""
    user = pwd.getpwnam(name)
    where = home / LESSONS
    where.mkdir(mode=0o755, exist_ok=True)
    os.chown(where, user.pw_uid, user.pw_gid, follow_symlinks=False)
    given = {}
    dfd = _open_dir(where)
    try:
        for source in sorted(originals.iterdir()):
            data = source.read_bytes()
            _put(dfd, source.name, data, user)
            given[source.name] = digest(data)
    finally:
        os.close(dfd)
    return given


@dataclass
class LessonReset:
    """What reset did to one seat's lessons."""

    restored: list[str] = field(default_factory=list)  # put back (unchanged or missing)
    changed: list[str] = field(default_factory=list)  # the student's work: left alone


def reset_seat(
    home: Path, name: str, originals: Path, given: Mapping[str, str]
) -> tuple[LessonReset, dict[str, str]]:
    """Put back each lesson of ``home`` that is as given (``given``: lesson -> checksum) or missing; a lesson the
    student changed (or replaced by anything but a plain file) is left. Returns what was done and the checksums
    given now."""
    user = pwd.getpwnam(name)
    where = home / LESSONS
    done = LessonReset()
    if not where.exists() and not where.is_symlink():
        where.mkdir(mode=0o755)
        os.chown(where, user.pw_uid, user.pw_gid, follow_symlinks=False)
    try:
        dfd = _open_dir(where)
    except OSError:  # the student put something else there: all of it is theirs
        done.changed = sorted(p.name for p in originals.iterdir())
        return done, dict(given)
    now = dict(given)
    try:
        for source in sorted(originals.iterdir()):
            try:
                mine = _read(dfd, source.name)
            except ValueError:
                done.changed.append(source.name)
                continue
            if mine is not None and digest(mine) != given.get(source.name):
                done.changed.append(source.name)
                continue
            data = source.read_bytes()
            _put(dfd, source.name, data, user)
            now[source.name] = digest(data)
            done.restored.append(source.name)
    finally:
        os.close(dfd)
    return done, now
