"""The student edition of the course: each lesson without its instructor check and with its solution emptied,
everything else byte for byte the teacher's (`slurmlab notebooks DIR --student`, and what a workshop gives)."""

from __future__ import annotations

import hashlib
import json
from pathlib import Path

import pytest

from slurmlab.cli import main
from slurmlab.core.editions import student_edition
from slurmlab.workshop.lessons import LESSONS, TEACHER_LESSONS, write_originals

REPO = Path(__file__).resolve().parents[3]
NOTEBOOKS = sorted((REPO / "notebooks").glob("[0-9][0-9]-*.ipynb"))


def _tags(cell: dict) -> list[str]:
    return list(cell.get("metadata", {}).get("tags", []))


def _canonical(notebook: dict) -> bytes:
    # how Jupyter (and the repository) writes a notebook
    return (json.dumps(notebook, indent=1, sort_keys=True, ensure_ascii=False) + "\n").encode()


def test_a_real_lesson_loses_its_check_and_solution_and_keeps_every_other_byte() -> None:
    teacher = (REPO / "notebooks" / "00-quickstart.ipynb").read_bytes()
    out = student_edition(teacher, "00-quickstart.ipynb")
    cells = json.loads(teacher)["cells"]
    student = json.loads(out)["cells"]
    solution = next(i for i, c in enumerate(cells) if "solution" in _tags(c))
    check = next(i for i, c in enumerate(cells) if "check" in _tags(c))

    assert len(student) == len(cells) - 1
    assert not [c for c in student if {"check", "solution"} & set(_tags(c))]
    answer = student[solution]
    assert answer["cell_type"] == "code" and _tags(answer) == ["answer"] and answer["outputs"] == []
    assert answer["id"] == cells[solution]["id"]
    assert "".join(answer["source"]).strip() == "# your answer here"
    # nothing of the solution's code nor of the check is left anywhere in the file
    for gone in (solution, check):
        for line in cells[gone]["source"]:
            if len(line.strip()) > 25:
                assert line.strip().encode() not in out, line

    # the rest byte-identical: the file up to the solution cell is the teacher's, as is all after the check
    start = teacher.index(b'"id": "' + cells[solution]["id"].encode())
    start = teacher.rindex(b"\n  {\n", 0, start)
    assert out[:start] == teacher[:start]
    tail = teacher[teacher.index(b'"id": "' + cells[check]["id"].encode()) :]
    tail = tail[tail.index(b"\n  }") + len(b"\n  }") :]
    assert out.endswith(tail) and len(tail) > 100  # the cells' end and the notebook's metadata
    # and each kept cell as Jupyter writes it
    kept = [c for i, c in enumerate(cells) if i not in (solution, check)]
    assert [c for i, c in enumerate(student) if i != solution] == kept


@pytest.mark.parametrize("path", NOTEBOOKS, ids=[p.stem for p in NOTEBOOKS])
def test_every_lesson_has_a_solution_and_a_check_and_its_student_edition_neither(path: Path) -> None:
    teacher = path.read_bytes()
    cells = json.loads(teacher)["cells"]
    assert (
        _canonical(json.loads(teacher)) == teacher
    )  # written as Jupyter writes it: the edition can match it
    assert [c for c in cells if "solution" in _tags(c)] and [c for c in cells if "check" in _tags(c)]
    out = student_edition(teacher, path.name)
    student = json.loads(out)
    assert not [c for c in student["cells"] if {"check", "solution"} & set(_tags(c))]
    assert len(student["cells"]) == len(cells) - sum("check" in _tags(c) for c in cells)
    assert len({c["id"] for c in student["cells"]}) == len(student["cells"])  # ids still unique
    assert student["metadata"] == json.loads(teacher)["metadata"]


def test_a_notebook_with_nothing_to_leave_out_is_given_as_it_is() -> None:
    plain = b'{"cells": [{"cell_type": "markdown", "metadata": {}, "source": ["# hi"]}]}'
    assert student_edition(plain) is plain


@pytest.mark.parametrize("bad", [b"\xff\xfe not json", b"[1, 2]", b'{"cells": 3}'])
def test_what_is_not_a_notebook_is_named_not_a_traceback(bad: bytes) -> None:
    with pytest.raises(ValueError, match="x.ipynb is not a notebook"):
        student_edition(bad, "x.ipynb")


def test_the_command_copies_the_student_edition(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["notebooks", str(tmp_path / "class"), "--student"]) == 0
    out = capsys.readouterr().out
    assert f"workshop notebooks (student edition) to {tmp_path / 'class'}" in out
    for path in NOTEBOOKS:
        copied = (tmp_path / "class" / path.name).read_bytes()
        assert copied == student_edition(path.read_bytes()) != path.read_bytes()
    # the teacher's edition by default, as before
    assert main(["notebooks", str(tmp_path / "teacher")]) == 0
    assert (tmp_path / "teacher" / NOTEBOOKS[0].name).read_bytes() == NOTEBOOKS[0].read_bytes()


def test_a_workshop_gives_students_the_student_edition_and_keeps_the_teachers(tmp_path: Path) -> None:
    lessons = {p.name: p.read_bytes() for p in NOTEBOOKS[:2]}
    given = write_originals(tmp_path, lessons)
    for name, teacher in lessons.items():
        student = (tmp_path / LESSONS / name).read_bytes()
        assert student == student_edition(teacher) != teacher
        assert (tmp_path / TEACHER_LESSONS / name).read_bytes() == teacher
        assert given[name] == hashlib.sha256(student).hexdigest()  # reset compares with what was given
