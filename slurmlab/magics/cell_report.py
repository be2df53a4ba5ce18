"""In a workshop, the kernel tells the teacher's view how its last cell ended (``%load_ext slurmlab`` installs it).

Only where the workshop's hub set :data:`~slurmlab.core.last_cell.LAST_CELL_ENV` for the seat's server: after each
cell the student runs (IPython's ``post_run_cell``; a silent execution, such as a widget's, is not one), the
record of :mod:`slurmlab.core.last_cell` replaces the file it names, so the teacher sees an error within one
refresh of the view instead of after JupyterLab's next autosave. Anywhere else nothing is written.

Writing never disturbs the student: a folder that is gone or a full disk skips the word (the view still reads the
saved notebooks). The file is replaced in one rename, so the view never reads half of one.
"""

from __future__ import annotations

import contextlib
import os
import tempfile
from pathlib import Path
from typing import Any

from slurmlab.core.last_cell import LAST_CELL_ENV, encode

__all__ = ["install", "report_target", "uninstall"]

_SESSION_ENV = "JPY_SESSION_NAME"  # the notebook's path, set by jupyter_server for a kernel of a notebook


def report_target(environ: Any = os.environ) -> Path | None:
    """The file the word goes to, from ``environ``: absolute, or relative to the home; None when not set."""
    named = str(environ.get(LAST_CELL_ENV) or "").strip()
    if not named:
        return None
    path = Path(named).expanduser()
    return path if path.is_absolute() else Path.home() / path


def _exception_words(error: BaseException | None) -> str:
    if error is None:
        return ""
    try:
        said = str(error)
    except Exception:  # a student's exception whose __str__ itself raises
        said = ""
    name = type(error).__name__
    return f"{name}: {said}" if said else name


class _Reporter:
    """The ``post_run_cell`` callback: one record per cell run, written beside the file and renamed over it."""

    def __init__(self, target: Path) -> None:
        self.target = target

    def __call__(self, result: Any) -> None:
        error = getattr(result, "error_before_exec", None) or getattr(result, "error_in_exec", None)
        data = encode(os.environ.get(_SESSION_ENV, ""), _exception_words(error))
        folder = self.target.parent
        if not folder.is_dir():
            return
        fd = -1
        temp = ""
        try:
            fd, temp = tempfile.mkstemp(prefix=".slurmlab-", dir=folder)
            os.write(fd, data)
            os.close(fd)
            fd = -1
            os.replace(temp, self.target)
            temp = ""
        except OSError:
            pass  # a full disk or a folder the student removed: the view falls back on the saved notebooks
        finally:
            if fd >= 0:
                os.close(fd)
            if temp:
                with contextlib.suppress(OSError):
                    os.unlink(temp)


def install(shell: Any) -> None:
    """Register the reporter on ``shell`` where a workshop asked for it (once, however often it is loaded)."""
    uninstall(shell)
    target = report_target()
    if target is None:
        return
    shell.events.register("post_run_cell", _Reporter(target))


def uninstall(shell: Any) -> None:
    events = shell.events
    for callback in list(events.callbacks.get("post_run_cell", [])):
        if isinstance(callback, _Reporter):
            events.unregister("post_run_cell", callback)
