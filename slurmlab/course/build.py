"""Build the course: run each lesson in order, write its HTML page, then the index and ``course.json``.

    from slurmlab.course import build_course, discover
    results = build_course(discover(Path("notebooks")), Path("build/demo"), env={**os.environ, **sb.env()},
                           profile="dgx-h100", slurm="24.11.5")

A failing lesson still gets its page (with the error) and the next lessons still run. Ctrl-C stops the lesson
that runs (its kernel shut down), writes the index of what ran, and raises KeyboardInterrupt.
"""

from __future__ import annotations

import html
import json
import time
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, replace
from datetime import datetime, timezone
from pathlib import Path

from slurmlab.core.palette import FAILED
from slurmlab.course.execute import Execution, run_lesson
from slurmlab.course.lessons import Lesson
from slurmlab.course.pages import lesson_html
from slurmlab.course.report import BuildInfo, LessonResult, course_json, one_line, render_index, summary_line

__all__ = ["CourseBuild", "build_course"]

INDEX = "index.html"
RECORD = "course.json"
WORK = "work"  # the kernels' working folder: what lessons write (slurm-N.out ...) stays out of the repository


@dataclass(frozen=True)
class CourseBuild:
    results: list[LessonResult]
    index: Path

    @property
    def ok(self) -> bool:
        return bool(self.results) and all(r.ok for r in self.results)


def _error_page(lesson: Lesson, error: str) -> str:
    return (
        f"<!DOCTYPE html><html lang='en'><head><meta charset='utf-8'><title>{html.escape(lesson.title)}"
        f"</title></head><body><p><a href='{INDEX}'>&larr; the course</a></p><h1>{html.escape(lesson.title)}"
        f"</h1><p style='color:{FAILED}'>{html.escape(error)}</p></body></html>"
    )


def _write_page(execution: Execution, out: Path) -> LessonResult:
    """The lesson's page; a page nbconvert cannot write turns the lesson into a failure with that reason."""
    result = execution.result
    lesson = result.lesson
    target = out / lesson.html_name
    if execution.nb is None:
        target.write_text(_error_page(lesson, result.error or "failed"), encoding="utf-8")
        return result
    try:
        target.write_text(
            lesson_html(execution.nb, title=lesson.title, folder=lesson.path.parent), encoding="utf-8"
        )
    except Exception as exc:  # nbconvert on odd outputs: the lesson's line says so, the others go on
        error = one_line(f"its HTML page could not be written: {type(exc).__name__}: {exc}")
        target.write_text(_error_page(lesson, error), encoding="utf-8")
        return replace(result, status="FAIL", error=result.error or error)
    return result


def _clean(out: Path) -> None:
    # pages of lessons renamed or removed since the last build would sit beside the new index; only what a
    # build writes goes (--out may name a folder with other things in it)
    for old in [*out.glob("[0-9][0-9]-*.html"), out / INDEX, out / RECORD]:
        old.unlink(missing_ok=True)


def _now() -> str:
    return datetime.now(timezone.utc).strftime("%Y-%m-%d %H:%M UTC")


def build_course(
    lessons: Sequence[Lesson],
    out: Path,
    *,
    env: Mapping[str, str],
    profile: str = "",
    slurm: str = "",
    cell_timeout: float = 600.0,
    echo: Callable[[str], None] = print,
) -> CourseBuild:
    """Run ``lessons`` in order and write the course into ``out``; ``echo`` gets one line per lesson."""
    out.mkdir(parents=True, exist_ok=True)
    _clean(out)
    work = out / WORK
    work.mkdir(exist_ok=True)
    started = time.monotonic()
    results: list[LessonResult] = []
    interrupted = False
    try:
        for lesson in lessons:
            execution = run_lesson(lesson, env=env, cwd=work, cell_timeout=cell_timeout)
            result = _write_page(execution, out)
            results.append(result)
            echo(summary_line(result))
            if result.status == "interrupted":
                interrupted = True
                break
    except KeyboardInterrupt:
        interrupted = True
    finally:
        done = {r.lesson.name for r in results}
        results += [LessonResult(lesson, "not run") for lesson in lessons if lesson.name not in done]
        info = BuildInfo(profile=profile, slurm=slurm, built=_now(), seconds=time.monotonic() - started)
        index = out / INDEX
        index.write_text(render_index(results, info), encoding="utf-8")
        (out / RECORD).write_text(json.dumps(course_json(results, info), indent=1) + "\n", encoding="utf-8")
    if interrupted:
        raise KeyboardInterrupt
    return CourseBuild(results, index)
