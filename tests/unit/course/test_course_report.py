"""The one-line summaries, the index page and course.json of a course build (pure)."""

from __future__ import annotations

import json
import re
from html.parser import HTMLParser
from pathlib import Path

import pytest
from hypothesis import given
from hypothesis import strategies as st

from slurmlab.course.lessons import Lesson
from slurmlab.course.report import BuildInfo, LessonResult, course_json, one_line, render_index, summary_line

INFO = BuildInfo(profile="dgx-h100", slurm="24.11.5", built="2026-12-01 08:10 UTC", seconds=93.4)


def _lesson(name: str, title: str | None = None) -> Lesson:
    return Lesson(name[:2], name, Path(f"/nb/{name}.ipynb"), title or name)


class _Page(HTMLParser):
    """Links, table rows and text of a page; fails on nothing, so the assertions say what is missing."""

    def __init__(self, text: str) -> None:
        super().__init__()
        self.links: dict[str, str] = {}
        self.rows: list[list[str]] = []
        self.text: list[str] = []
        self._href: str | None = None
        self._cell: list[str] | None = None
        self.feed(text)

    def handle_starttag(self, tag: str, attrs: list[tuple[str, str | None]]) -> None:
        if tag == "a":
            self._href = dict(attrs).get("href")
        elif tag == "tr":
            self.rows.append([])
        elif tag == "td":
            self._cell = []

    def handle_endtag(self, tag: str) -> None:
        if tag == "td" and self._cell is not None:
            self.rows[-1].append(" ".join("".join(self._cell).split()))
            self._cell = None
        elif tag == "a":
            self._href = None

    def handle_data(self, data: str) -> None:
        self.text.append(data)
        if self._href is not None:
            self.links[data] = self._href
        if self._cell is not None:
            self._cell.append(data)


def test_summary_lines_say_ok_with_time_and_cells_or_fail_with_the_cell_and_error() -> None:
    ok = LessonResult(_lesson("03-topology"), "ok", seconds=21.43, cells=12)
    assert re.fullmatch(r"ok   03-topology\s+21\.4 s  12 code cells", summary_line(ok))
    assert summary_line(LessonResult(_lesson("00-q"), "ok", 1.0, cells=1)).endswith(" 1 code cell")
    fail = LessonResult(
        _lesson("05-time-slicing"), "FAIL", 3.0, 7, failed_cell=7, error="AllocationError: job 12 failed"
    )
    assert summary_line(fail) == "FAIL 05-time-slicing cell 7: AllocationError: job 12 failed"
    broken = LessonResult(_lesson("02-x"), "FAIL", error="not a notebook: bad JSON")
    assert summary_line(broken) == "FAIL 02-x: not a notebook: bad JSON"
    assert summary_line(LessonResult(_lesson("04-mig"), "interrupted", 2.5, 1, 2)).startswith(
        "STOP 04-mig cell 2: interrupted"
    )
    assert "not run" in summary_line(LessonResult(_lesson("06-i"), "not run"))


def test_one_line_takes_the_first_line_without_colours_and_cuts_it() -> None:
    assert one_line("\n\n  \x1b[0;31mValueError\x1b[0m: bad\nTraceback ...") == "ValueError: bad"
    cut = one_line("x" * 500, limit=50)
    assert len(cut) == 50 and cut.endswith("…")
    assert one_line("") == ""


@given(st.text())
def test_a_summary_is_always_one_line(error: str) -> None:
    line = one_line(error)
    assert len(line.splitlines()) <= 1 and len(line) <= 200
    result = LessonResult(_lesson("01-a"), "FAIL", failed_cell=3, error=line)
    assert len(summary_line(result).splitlines()) == 1


def test_the_index_lists_every_lesson_with_status_time_link_and_the_build() -> None:
    results = [
        LessonResult(_lesson("00-quickstart", "Quickstart: a GPU in 5 minutes"), "ok", 12.34, 9),
        LessonResult(
            _lesson("01-requesting-gpus", "Requesting GPUs"),
            "FAIL",
            4.0,
            3,
            3,
            "RequestError: --gpus-per-task needs tasks",
        ),
        LessonResult(_lesson("02-sharing-a-gpu", "Sharing a GPU"), "not run"),
    ]
    page = _Page(render_index(results, INFO))
    assert page.links["Quickstart: a GPU in 5 minutes"] == "00-quickstart.html"
    assert page.links["Requesting GPUs"] == "01-requesting-gpus.html"
    assert "Sharing a GPU" not in page.links, "a lesson that did not run has no page to link"
    rows = [r for r in page.rows if r]
    assert [r[0] for r in rows] == ["00", "01", "02"]
    # the count is of code cells that ran (markdown cells are not counted), and the header says so
    assert "<th>code cells run</th>" in render_index(results, INFO)
    assert rows[0][2:] == ["ok", "12.3 s", "9"]
    assert rows[1][2] == "FAIL" and "cell 3: RequestError: --gpus-per-task needs tasks" in rows[1][1]
    assert rows[2][2] == "not run"
    text = " ".join(" ".join(page.text).split())
    assert "dgx-h100" in text and "Slurm 24.11.5" in text and "2026-12-01 08:10 UTC" in text
    assert "1 of 3 lessons ran without an error" in text
    assert "offline" in text and "saved" in text  # how widgets show without a kernel


def test_the_index_escapes_what_lessons_and_errors_say() -> None:
    evil = _lesson("00-x", "<script>alert(1)</script>")
    result = LessonResult(evil, "FAIL", error="<img src=x onerror=alert(2)>")
    page = render_index([result], BuildInfo("<b>", "<i>", "now"))
    assert "<script>alert" not in page and "<img" not in page and "<b><b>" not in page and "<i>" not in page
    assert "&lt;script&gt;" in page and "&lt;img" in page and "&lt;b&gt;" in page and "&lt;i&gt;" in page


def test_an_all_ok_build_says_so_and_no_lesson_is_not_ok() -> None:
    ok = [LessonResult(_lesson("00-a"), "ok", 1, 1), LessonResult(_lesson("01-b"), "ok", 1, 1)]
    assert "every lesson ran without an error" in render_index(ok, INFO)
    assert "every lesson" not in render_index([], INFO)
    assert course_json([], INFO)["ok"] is False


def test_course_json_is_json_and_matches_the_results() -> None:
    results = [
        LessonResult(_lesson("00-a"), "ok", 1.234, 4, kernel_pid=4242),
        LessonResult(_lesson("01-b"), "FAIL", 2.0, 2, 2, "ValueError: x", 4343),
        LessonResult(_lesson("02-c"), "not run"),
    ]
    data = json.loads(json.dumps(course_json(results, INFO)))
    assert data["ok"] is False and data["profile"] == "dgx-h100" and data["slurm"] == "24.11.5"
    lessons = data["lessons"]
    assert [(x["name"], x["status"], x["html"]) for x in lessons] == [
        ("00-a", "ok", "00-a.html"),
        ("01-b", "FAIL", "01-b.html"),
        ("02-c", "not run", None),
    ]
    assert lessons[1]["failed_cell"] == 2 and lessons[1]["error"] == "ValueError: x"
    assert [x["kernel_pid"] for x in lessons] == [4242, 4343, None]


@pytest.mark.parametrize("status", ["ok", "FAIL", "interrupted", "not run"])
def test_every_status_renders(status: str) -> None:
    result = LessonResult(_lesson("00-a"), status, 1.0, 1)  # type: ignore[arg-type]
    assert status in render_index([result], INFO)
    assert summary_line(result)
