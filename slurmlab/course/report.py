"""What a course build says: one line per lesson in the terminal, the index page, and ``course.json``."""

from __future__ import annotations

import html
import re
from dataclasses import dataclass
from typing import Literal

from slurmlab.core.palette import FAILED, INK, INK_SOFT, MUTED, OK, RULE
from slurmlab.course.lessons import Lesson

__all__ = ["BuildInfo", "LessonResult", "course_json", "one_line", "render_index", "summary_line"]

Status = Literal["ok", "FAIL", "interrupted", "not run"]

_MAX_ERROR = 200


def one_line(text: str, limit: int = _MAX_ERROR) -> str:
    """The first non-blank line of an error (ANSI colours removed), cut to ``limit`` characters."""
    clean = re.sub(r"\x1b\[[0-9;]*[A-Za-z]", "", text)
    line = next((s.strip() for s in clean.splitlines() if s.strip()), "")
    return line if len(line) <= limit else line[: limit - 1] + "…"


@dataclass(frozen=True)
class LessonResult:
    lesson: Lesson
    status: Status
    seconds: float = 0.0
    cells: int = 0  # code cells that ran
    failed_cell: int | None = None  # 1-based among the code cells, as "In [7]" numbers them
    error: str | None = None  # one line
    kernel_pid: int | None = None

    @property
    def ok(self) -> bool:
        return self.status == "ok"


@dataclass(frozen=True)
class BuildInfo:
    profile: str  # the sandbox's hardware profile, or "" when the lessons ran on a real cluster
    slurm: str  # Slurm's release, e.g. "24.11.5"
    built: str  # when, e.g. "2026-12-01 08:10 UTC"
    seconds: float = 0.0  # the whole build


def summary_line(result: LessonResult) -> str:
    """``ok   03-topology  21.4 s  12 code cells`` or ``FAIL 05-time-slicing cell 7: <error line>``."""
    name = result.lesson.name
    if result.status == "ok":
        # code cells that ran: "cells" alone reads as all of the lesson's cells, markdown included
        cells = "1 code cell" if result.cells == 1 else f"{result.cells} code cells"
        return f"ok   {name:<24} {result.seconds:6.1f} s  {cells}"
    where = f" cell {result.failed_cell}" if result.failed_cell is not None else ""
    if result.status == "FAIL":
        return f"FAIL {name}{where}: {result.error or 'failed'}"
    if result.status == "interrupted":
        return f"STOP {name}{where}: interrupted (Ctrl-C) after {result.seconds:.1f} s"
    return f"---- {name}: not run (the build was interrupted)"


_STATUS_CLASS = {"ok": "ok", "FAIL": "fail", "interrupted": "fail", "not run": "skip"}

_STYLE = f"""
body {{ font-family: system-ui, -apple-system, "Segoe UI", sans-serif; margin: 2em auto; max-width: 60em;
       color: {INK}; padding: 0 1em; }}
table {{ border-collapse: collapse; width: 100%; }}
th, td {{ text-align: left; padding: .35em .7em; border-bottom: 1px solid {RULE}; vertical-align: top; }}
td.num {{ text-align: right; white-space: nowrap; }}
.ok {{ color: {OK}; font-weight: 600; }} .fail {{ color: {FAILED}; font-weight: 600; }} .skip {{ color: {MUTED}; }}
.error {{ font-family: monospace; font-size: .9em; color: {FAILED}; }}
p.meta, p.note {{ color: {INK_SOFT}; }}
"""


def _row(result: LessonResult) -> str:
    lesson = result.lesson
    status = html.escape(result.status)
    link = (
        f"<a href='{html.escape(lesson.html_name, quote=True)}'>{html.escape(lesson.title)}</a>"
        if result.status != "not run"
        else html.escape(lesson.title)
    )
    detail = ""
    if result.error:
        where = f"cell {result.failed_cell}: " if result.failed_cell is not None else ""
        detail = f"<div class='error'>{html.escape(where + result.error)}</div>"
    seconds = f"{result.seconds:.1f} s" if result.status != "not run" else ""
    cells = str(result.cells) if result.status != "not run" else ""
    return (
        f"<tr><td>{html.escape(lesson.number)}</td><td>{link}<br><small>{html.escape(lesson.name)}</small>"
        f"{detail}</td><td class='{_STATUS_CLASS[result.status]}'>{status}</td>"
        f"<td class='num'>{seconds}</td><td class='num'>{cells}</td></tr>"
    )


def render_index(results: list[LessonResult], info: BuildInfo) -> str:
    """The course's ``index.html``: every lesson with its status, time and a link to its page."""
    passed = sum(r.ok for r in results)
    where = (
        f"the Slurm sandbox (profile <b>{html.escape(info.profile)}</b>)"
        if info.profile
        else "a Slurm cluster"
    )
    rows = "\n".join(_row(r) for r in results)
    verdict = (
        "every lesson ran without an error"
        if passed == len(results) and results
        else f"{passed} of {len(results)} lessons ran without an error"
    )
    return f"""<!DOCTYPE html>
<html lang="en">
<head>
<meta charset="utf-8">
<meta name="viewport" content="width=device-width, initial-scale=1.0">
<title>slurmlab workshop course</title>
<style>{_STYLE}</style>
</head>
<body>
<h1>slurmlab workshop course</h1>
<p class="meta">Executed on {where}, Slurm {html.escape(info.slurm)}, built {html.escape(info.built)}
in {info.seconds:.0f} s: {verdict}.</p>
<table>
<thead><tr><th>#</th><th>lesson</th><th>status</th><th>time</th><th>code cells run</th></tr></thead>
<tbody>
{rows}
</tbody>
</table>
<p class="note">These pages work offline: the figures carry their own BokehJS, and nothing is fetched from the
internet. Interactive widgets (the request form, the allocation panel, the queue monitor) need a running kernel,
so each shows the text it saved when the lesson ran; open the notebook in JupyterLab (<code>make lab</code>) to use
them live.</p>
</body>
</html>
"""


def course_json(results: list[LessonResult], info: BuildInfo) -> dict[str, object]:
    """The build as data (``course.json`` beside the index), for scripts and tests."""
    return {
        "profile": info.profile,
        "slurm": info.slurm,
        "built": info.built,
        "seconds": round(info.seconds, 1),
        "ok": bool(results) and all(r.ok for r in results),
        "lessons": [
            {
                "number": r.lesson.number,
                "name": r.lesson.name,
                "title": r.lesson.title,
                "status": r.status,
                "seconds": round(r.seconds, 2),
                "cells": r.cells,
                "failed_cell": r.failed_cell,
                "error": r.error,
                "html": r.lesson.html_name if r.status != "not run" else None,
                "kernel_pid": r.kernel_pid,
            }
            for r in results
        ],
    }
