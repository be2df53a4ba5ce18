"""A kernel's word on its last cell, for the teacher's view of a workshop: what it holds, written and read.

A student's error reaches the teacher's view as soon as the cell ends, not when JupyterLab next saves the notebook
(its autosave runs every two minutes): a workshop's servers get :data:`LAST_CELL_ENV` naming a file of the lessons
folder, and ``%load_ext slurmlab`` there writes this small record after each cell the student runs (IPython's
``post_run_cell``). The view reads it as warily as the notebooks beside it (it runs as root, the file is the
student's): :func:`decode` takes bytes of any kind and answers None for anything that is not such a record.

Pure: the kernel's side writes :func:`encode`'s bytes, the view's side reads them; neither does I/O here.
"""

from __future__ import annotations

import json
from dataclasses import dataclass

from slurmlab.core.jsontypes import JSONValue

__all__ = ["LAST_CELL_ENV", "LAST_CELL_FILE", "MAX_BYTES", "LastCellWord", "decode", "encode"]

# set by a workshop's hub for every seat's server (and so its kernels): where the word is written, a path
# relative to the student's home unless absolute
LAST_CELL_ENV = "SLURMLAB_LAST_CELL_FILE"
# its name in the lessons folder: hidden, so JupyterLab's file browser and the view's notebook listing skip it
LAST_CELL_FILE = ".slurmlab-last-cell.json"
MAX_BYTES = 4096  # a word is a few hundred bytes; past this the view does not read it
_NOTEBOOK_CHARS = 200
_ERROR_CHARS = 1000


@dataclass(frozen=True)
class LastCellWord:
    """``notebook``: the notebook's name (no folder; "" when the kernel was not started for one);
    ``error``: ``"<ename>: <evalue>"`` of the cell's exception, "" when it ran clean."""

    notebook: str
    error: str = ""


def encode(notebook: str, error: str) -> bytes:
    """The record of one cell: ``notebook`` is the session's path (``JPY_SESSION_NAME``; only its last part is
    kept), ``error`` the exception's words or "". Long text is cut: the record always fits :data:`MAX_BYTES`."""
    name = notebook.replace("\\", "/").rsplit("/", 1)[-1][:_NOTEBOOK_CHARS]
    record = {"slurmlab_last_cell": 1, "notebook": name, "error": error[:_ERROR_CHARS]}
    return json.dumps(record, ensure_ascii=True).encode("ascii")


def decode(data: bytes) -> LastCellWord | None:
    """The word in ``data``, or None when it is not one (not JSON, not UTF-8, too long, another shape)."""
    if len(data) > MAX_BYTES:
        return None
    try:
        record: JSONValue = json.loads(data.decode("utf-8"))
    except (ValueError, RecursionError):
        return None
    if not isinstance(record, dict) or record.get("slurmlab_last_cell") != 1:
        return None
    notebook, error = record.get("notebook"), record.get("error")
    if not isinstance(notebook, str) or not isinstance(error, str):
        return None
    return LastCellWord(notebook.replace("\\", "/").rsplit("/", 1)[-1], error)
