"""Whose last cell ended in an error: read from the students' own copies of the lessons, cheaply and warily.

    cells = LastCells({"student01": (home, uid), ...})
    cells.scan()          # {"student01": LastCell(lesson="00-hello.ipynb", error="ValueError: boom"), ...}

For each seat, the most recently modified notebook of its ``lessons`` folder (where ``workshop up`` copied the
lessons; JupyterLab saves them there as ``.ipynb`` JSON), and in it the code cell with the highest
``execution_count``: if one of that cell's outputs is an ``"output_type": "error"``, the seat is stuck with
``<lesson>: <ename>: <evalue>``. A notebook is read again only when its name, size, mtime or inode changed, so
a refresh every 15 s reads only what students saved since.

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


def _read_notebook(dfd: int, name: str, uid: int) -> LastCell:
    try:
        fd = os.open(name, os.O_RDONLY | os.O_NOFOLLOW | os.O_NONBLOCK | os.O_NOCTTY, dir_fd=dfd)
    except OSError:  # swapped for a link (ELOOP) or removed since the listing
        return LastCell(name, note="not read (not a plain file of the student's)")
    try:
        st = os.fstat(fd)
        if not stat.S_ISREG(st.st_mode) or st.st_uid != uid:
            return LastCell(name, note="not read (not a plain file of the student's)")
        if st.st_size > MAX_BYTES:
            return LastCell(name, note=f"not read ({st.st_size // (1024 * 1024)} MiB, over the view's limit)")
        data = os.read(fd, MAX_BYTES + 1)
        while len(data) <= MAX_BYTES:  # os.read may return less than asked of a regular file
            more = os.read(fd, MAX_BYTES + 1 - len(data))
            if not more:
                break
            data += more
    except OSError:
        return LastCell(name, note=UNREADABLE)
    finally:
        os.close(fd)
    if len(data) > MAX_BYTES:  # grew while read
        return LastCell(name, note="not read (over the view's limit)")
    try:
        error = last_cell_error(json.loads(data.decode("utf-8")))
    except (ValueError, RecursionError):  # not JSON, not UTF-8, or nested past the parser's depth
        error = None
    return LastCell(name, note=UNREADABLE) if error is None else LastCell(name, error=error)


class LastCells:
    """Each seat's :class:`LastCell`, read again only for a notebook that changed since the last :meth:`scan`.

    ``seats``: name -> (home, uid); ``reads`` counts the notebooks actually read (the cache's proof)."""

    def __init__(self, seats: Mapping[str, tuple[Path, int]]) -> None:
        self.seats = dict(seats)
        self.reads = 0
        self._known: dict[str, tuple[tuple[str, int, int, int, int], LastCell]] = {}

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
            if newest is None:
                return None
            name, st = newest
            key = (name, st.st_mtime_ns, st.st_size, st.st_ino, st.st_ctime_ns)
            known = self._known.get(seat)
            if known is not None and known[0] == key:
                return known[1]
            self.reads += 1
            cell = _read_notebook(dfd, name, uid)
        except OSError:
            return None
        finally:
            os.close(dfd)
        self._known[seat] = (key, cell)
        return cell
