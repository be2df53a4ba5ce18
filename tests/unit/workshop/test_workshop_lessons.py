"""Each student's copy of the lessons and reset (issue 31 point 1): an unchanged or lost lesson is put back, a
changed one is the student's and left alone, and nothing the student puts in its place is followed."""

from __future__ import annotations

import getpass
import os
from pathlib import Path

import pytest

from slurmlab.workshop.lessons import give, reset_seat, write_originals

ME = getpass.getuser()  # the seat here: the files are chowned to it (to themselves, without root)
LESSONS = {"00-a.ipynb": b'{"cells": []}\n', "01-b.ipynb": b'{"cells": [1]}\n'}


@pytest.fixture
def seat(tmp_path: Path) -> tuple[Path, Path, dict[str, str]]:
    (tmp_path / "class").mkdir()
    write_originals(tmp_path / "class", LESSONS)
    home = tmp_path / "home"
    home.mkdir()
    given = give(home, ME, tmp_path / "class" / "lessons")
    return home, tmp_path / "class" / "lessons", given


def test_every_lesson_is_given_and_its_checksum_kept(seat: tuple[Path, Path, dict[str, str]]) -> None:
    home, _, given = seat
    assert sorted(p.name for p in (home / "lessons").iterdir()) == sorted(LESSONS)
    assert (home / "lessons" / "00-a.ipynb").read_bytes() == LESSONS["00-a.ipynb"]
    assert set(given) == set(LESSONS) and all(len(v) == 64 for v in given.values())


def test_reset_puts_back_lost_and_unchanged_lessons_and_leaves_changed_ones(
    seat: tuple[Path, Path, dict[str, str]],
) -> None:
    home, originals, given = seat
    (home / "lessons" / "00-a.ipynb").unlink()
    (home / "lessons" / "01-b.ipynb").write_bytes(b"my work")
    # the teacher fixed a lesson in the class's copy: seats that did not touch it get the fix
    (originals / "00-a.ipynb").write_bytes(b'{"cells": ["fixed"]}\n')
    done, now = reset_seat(home, ME, originals, given)
    assert done.restored == ["00-a.ipynb"] and done.changed == ["01-b.ipynb"]
    assert (home / "lessons" / "00-a.ipynb").read_bytes() == b'{"cells": ["fixed"]}\n'
    assert (home / "lessons" / "01-b.ipynb").read_bytes() == b"my work"
    assert now["00-a.ipynb"] != given["00-a.ipynb"] and now["01-b.ipynb"] == given["01-b.ipynb"]
    assert not [p for p in (home / "lessons").iterdir() if p.name.startswith(".")]


def test_a_link_put_in_place_of_a_lesson_or_of_the_folder_is_never_followed(
    seat: tuple[Path, Path, dict[str, str]], tmp_path: Path
) -> None:
    home, originals, given = seat
    elsewhere = tmp_path / "elsewhere.txt"
    elsewhere.write_bytes(LESSONS["00-a.ipynb"])  # even with the lesson's own content
    lesson = home / "lessons" / "00-a.ipynb"
    lesson.unlink()
    lesson.symlink_to(elsewhere)
    part = home / "lessons" / ".01-b.ipynb.workshop-part"
    part.symlink_to(tmp_path / "planted")
    done, _ = reset_seat(home, ME, originals, given)
    assert done.changed == ["00-a.ipynb"] and done.restored == ["01-b.ipynb"]
    assert lesson.is_symlink() and elsewhere.read_bytes() == LESSONS["00-a.ipynb"]
    assert not (tmp_path / "planted").exists()

    target = tmp_path / "target"
    target.mkdir()
    (home / "lessons").rename(home / "moved")
    os.symlink(target, home / "lessons")
    done, _ = reset_seat(home, ME, originals, given)
    assert done.restored == [] and done.changed == sorted(LESSONS)
    assert list(target.iterdir()) == []


def test_a_fifo_in_place_of_a_lesson_is_not_waited_on(seat: tuple[Path, Path, dict[str, str]]) -> None:
    home, originals, given = seat
    (home / "lessons" / "01-b.ipynb").unlink()
    os.mkfifo(home / "lessons" / "01-b.ipynb")
    done, _ = reset_seat(home, ME, originals, given)
    assert done.changed == ["01-b.ipynb"]


def test_a_lesson_name_that_is_a_path_is_refused(tmp_path: Path) -> None:
    with pytest.raises(ValueError, match="plain name"):
        write_originals(tmp_path, {"../x.ipynb": b""})
