"""What a build leaves in its folder, without running a kernel (no lessons, or one that is not a notebook)."""

from __future__ import annotations

import json
from pathlib import Path

from slurmlab.course import build_course, discover


def test_a_rebuild_removes_old_lesson_pages_but_nothing_else(tmp_path: Path) -> None:
    out = tmp_path / "demo"
    out.mkdir()
    for name in ["09-gone.html", "index.html", "course.json", "notes.html", "09-gone.ipynb"]:
        (out / name).write_text("old")
    lines: list[str] = []
    built = build_course([], out, env={}, profile="seed", slurm="22.05.8", echo=lines.append)
    assert not (out / "09-gone.html").exists()
    assert (out / "notes.html").read_text() == "old" and (out / "09-gone.ipynb").read_text() == "old"
    assert (out / "index.html").read_text() != "old" and built.index == out / "index.html"
    assert json.loads((out / "course.json").read_text())["lessons"] == []
    assert not built.ok and lines == []


def test_a_file_that_is_not_a_notebook_fails_its_line_and_still_gets_a_page(tmp_path: Path) -> None:
    src, out = tmp_path / "lessons", tmp_path / "demo"
    src.mkdir()
    (src / "02-broken.ipynb").write_text("{not json <b>")
    lines: list[str] = []
    built = build_course(discover(src), out, env={}, echo=lines.append)
    assert not built.ok
    assert len(lines) == 1 and lines[0].startswith("FAIL 02-broken: not a notebook:")
    page = (out / "02-broken.html").read_text()
    assert "not a notebook" in page and "<b>" not in page and "index.html" in page
    assert "02-broken.html" in (out / "index.html").read_text()
