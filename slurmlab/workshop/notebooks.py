"""Whose last cell ended in an error: read from the students' own copies of the lessons, cheaply and warily.

    cells = LastCells({"student01": (home, uid), ...})
    cells.scan()          # {"student01": LastCell(lesson="00-hello.ipynb", error="ValueError: boom"), ...}

For each seat, the most recently modified notebook of its ``lessons`` folder (where ``workshop up`` copied the
lessons; JupyterLab saves them there as ``.ipynb`` JSON), and in it the code cell with the highest
``execution_count``: if one of that cell's outputs is an ``"output_type": "error"``, the seat is stuck with
``<lesson>: <ename>: <evalue>``. A notebook is read again only when its name, size, mtime or inode changed, so
a refresh every 15 s reads only what students saved since.

A saved notebook is up to two minutes late (JupyterLab's autosave), so a workshop's kernels also leave a word on
each cell as it ends (:mod:`slurmlab.core.last_cell`, the hidden ``.slurmlab-last-cell.json`` of the lessons
folder, written by ``%load_ext slurmlab``'s reporter): when it is newer than the newest notebook it is what the
view reads, under the same rules; a word that is not one leaves the notebook to speak.

The view runs as root and a student controls everything in their home: the folder and the notebook are opened
relative to the home without following a symbolic link (``O_NOFOLLOW``), only a regular file the student owns is
read (a hard link to root's file is not theirs), never one over :data:`MAX_BYTES`, and what it holds is the
student's words (shortened, its terminal colours stripped; the page escapes it). A notebook that is not a
notebook says "unreadable notebook", never a traceback in the service.
"""

from __future__ import annotations

import contextlib
import json
import os
import re
import stat
from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from slurmlab.core.last_cell import LAST_CELL_FILE
from slurmlab.core.last_cell import MAX_BYTES as WORD_MAX_BYTES
from slurmlab.core.last_cell import decode as decode_word
from slurmlab.workshop.lessons import LESSONS

__all__ = ["MAX_BYTES", "LastCell", "LastCells", "last_cell_error", "short_words"]

# a lesson with its outputs is well under a megabyte; a plot-heavy one a few: past this, the view does not read it
MAX_BYTES = 16 * 1024 * 1024
_EVALUE_CHARS = 160
# CSI and OSC sequences (IPython colours its tracebacks and some messages), then any other control character
_ANSI = re.compile(r"\x1b\[[0-?]*[ -/]*[@-~]|\x1b\][^\x07\x1b]*(?:\x07|\x1b\\)|\x1b[@-_]")
_CONTROL = re.compile(r"[\x00-\x08\x0b-\x1f\x7f-\x9f]")
UNREADABLE = "unreadable notebook"


@dataclass(frozen=True)
class LastCell:
    """What a seat's newest notebook says of its last run cell: ``error`` ("ValueError: boom", "" when it ran
    clean or none ran) or ``note`` (why it was not read: "unreadable notebook", too large, not the student's)."""

    lesson: str
    error: str = ""
    note: str = ""

    def words(self) -> str:
        """``<lesson>: <error or note>``, or "" when there is nothing to say."""
        said = self.error or self.note
        return f"{self.lesson}: {said}" if said else ""


def short_words(text: Any, limit: int = _EVALUE_CHARS) -> str:
    """``text`` as one short line: terminal escapes and control characters gone, whitespace folded, cut at
    ``limit`` characters with an ellipsis."""
    line = " ".join(_CONTROL.sub(" ", _ANSI.sub("", str(text))).split())
    return line if len(line) <= limit else line[: limit - 1].rstrip() + "…"


def last_cell_error(notebook: Any) -> str | None:
    """``"<ename>: <evalue>"`` when the code cell with the highest ``execution_count`` of ``notebook`` (parsed
    JSON) has an error output, "" when it has none (or no cell ran); None when ``notebook`` is not a notebook."""
    cells = notebook.get("cells") if isinstance(notebook, dict) else None
    if not isinstance(cells, list):
        return None
    last: dict[str, Any] | None = None
    highest = -1
    for cell in cells:
        if not isinstance(cell, dict) or cell.get("cell_type") != "code":
            continue
        count = cell.get("execution_count")
        if isinstance(count, int) and not isinstance(count, bool) and count > highest:
            last, highest = cell, count
    if last is None:
        return ""
    outputs = last.get("outputs")
    if not isinstance(outputs, list):
        return None
    for output in outputs:
        if isinstance(output, dict) and output.get("output_type") == "error":
            ename = short_words(output.get("ename") or "Error", 60)
            evalue = short_words(output.get("evalue") or "")
            return f"{ename}: {evalue}" if evalue else ename
    return ""


def _newest(dfd: int) -> tuple[str, os.stat_result] | None:
    """The most recently modified ``*.ipynb`` of the folder open at ``dfd`` that is a regular file (a link is
    not one: ``follow_symlinks=False``), with its lstat."""
    found: tuple[str, os.stat_result] | None = None
    with os.scandir(dfd) as entries:
        for entry in entries:
            if not entry.name.endswith(".ipynb") or entry.name.startswith("."):
                continue
            with contextlib.suppress(OSError):
                if not entry.is_file(follow_symlinks=False):
                    continue
                st = entry.stat(follow_symlinks=False)
                if found is None or (st.st_mtime_ns, entry.name) > (found[1].st_mtime_ns, found[0]):
                    found = (entry.name, st)
    return found


_NOT_THEIRS = "not read (not a plain file of the student's)"


def _read_own(dfd: int, name: str, uid: int, limit: int) -> bytes | str:
    """The bytes of ``name`` in the folder open at ``dfd`` when it is a plain file ``uid`` owns of at most
    ``limit`` bytes (opened without following a link), else why not, in words."""
    try:
        fd = os.open(name, os.O_RDONLY | os.O_NOFOLLOW | os.O_NONBLOCK | os.O_NOCTTY, dir_fd=dfd)
    except OSError:  # swapped for a link (ELOOP) or removed since the listing
        return _NOT_THEIRS
    try:
        st = os.fstat(fd)
        if not stat.S_ISREG(st.st_mode) or st.st_uid != uid:
            return _NOT_THEIRS
        if st.st_size > limit:
            return f"not read ({st.st_size // (1024 * 1024)} MiB, over the view's limit)"
        data = os.read(fd, limit + 1)
        while len(data) <= limit:  # os.read may return less than asked of a regular file
            more = os.read(fd, limit + 1 - len(data))
            if not more:
                break
            data += more
    except OSError:
        return UNREADABLE
    finally:
        os.close(fd)
    if len(data) > limit:  # grew while read
        return "not read (over the view's limit)"
    return data


def _read_notebook(dfd: int, name: str, uid: int) -> LastCell:
    data = _read_own(dfd, name, uid, MAX_BYTES)
    if isinstance(data, str):
        return LastCell(name, note=data)
    try:
        error = last_cell_error(json.loads(data.decode("utf-8")))
    except (ValueError, RecursionError):  # not JSON, not UTF-8, or nested past the parser's depth
        error = None
    return LastCell(name, note=UNREADABLE) if error is None else LastCell(name, error=error)


def _read_word(dfd: int, uid: int, newest: str) -> LastCell | None:
    """The kernel's word on its last cell (:mod:`slurmlab.core.last_cell`), or None when there is none to
    trust (not the student's plain file, too long, not such a record): the saved notebook then speaks."""
    data = _read_own(dfd, LAST_CELL_FILE, uid, WORD_MAX_BYTES)
    word = None if isinstance(data, str) else decode_word(data)
    if word is None:
        return None
    return LastCell(short_words(word.notebook, 80) or newest, error=_error_words(word.error))


def _error_words(error: str) -> str:
    """``"<ename>: <evalue>"`` shortened as a notebook's error output is."""
    ename, _, evalue = error.partition(": ")
    if not ename:
        return ""
    ename, evalue = short_words(ename, 60), short_words(evalue)
    return f"{ename}: {evalue}" if evalue else ename


def _lstat(dfd: int, name: str) -> os.stat_result | None:
    try:
        return os.stat(name, dir_fd=dfd, follow_symlinks=False)
    except OSError:
        return None


def _stat_key(name: str, st: os.stat_result | None) -> tuple[object, ...]:
    """What tells a file changed since it was read: its name, mtime, size, inode and ctime."""
    if st is None:
        return ()
    return (name, st.st_mtime_ns, st.st_size, st.st_ino, st.st_ctime_ns)


class LastCells:
    """Each seat's :class:`LastCell`, read again only when its newest notebook or its kernel's word changed
    since the last :meth:`scan`.

    ``seats``: name -> (home, uid); ``reads`` counts the seats actually read (the cache's proof)."""

    def __init__(self, seats: Mapping[str, tuple[Path, int]]) -> None:
        self.seats = dict(seats)
        self.reads = 0
        self._known: dict[str, tuple[tuple[object, ...], LastCell]] = {}

    def scan(self) -> dict[str, LastCell]:
        """seat -> its last cell's state; a seat with no notebook (or no lessons folder) is left out."""
        found = {}
        for seat, (home, uid) in self.seats.items():
            cell = self._seat(seat, home, uid)
            if cell is not None:
                found[seat] = cell
        return found

    def _seat(self, seat: str, home: Path, uid: int) -> LastCell | None:
        try:
            # the home's parent is the workshop's (root's): the home itself is not the student's to swap, but
            # the lessons folder in it is, so it is entered without following a link
            hfd = os.open(home, os.O_RDONLY | os.O_DIRECTORY | os.O_NOFOLLOW)
        except OSError:
            return None
        try:
            dfd = os.open(LESSONS, os.O_RDONLY | os.O_DIRECTORY | os.O_NOFOLLOW, dir_fd=hfd)
        except OSError:
            return None
        finally:
            os.close(hfd)
        try:
            newest = _newest(dfd)
            word_st = _lstat(dfd, LAST_CELL_FILE)
            # the kernel's word when it is newer than the newest saved notebook (a student who opened another
            # lesson and saved it, with no cell run since, is on that one)
            use_word = word_st is not None and (
                newest is None or word_st.st_mtime_ns >= newest[1].st_mtime_ns
            )
            if newest is None and not use_word:
                return None
            key = (_stat_key(*newest) if newest else ()) + (
                _stat_key(LAST_CELL_FILE, word_st) if use_word else ()
            )
            known = self._known.get(seat)
            if known is not None and known[0] == key:
                return known[1]
            self.reads += 1
            cell = _read_word(dfd, uid, newest[0] if newest else "") if use_word else None
            if cell is None and newest is not None:
                cell = _read_notebook(dfd, newest[0], uid)
            if cell is None:
                return None
        except OSError:
            return None
        finally:
            os.close(dfd)
        self._known[seat] = (key, cell)
        return cell
