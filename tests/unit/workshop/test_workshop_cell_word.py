"""The teacher sees a student's error when the cell ends, not at JupyterLab's next autosave (issue 31 point 2).

A workshop's seats get ``SLURMLAB_LAST_CELL_FILE``; ``%load_ext slurmlab`` then leaves a word on each cell in the
lessons folder, and the view reads it when it is newer than the newest saved notebook. The kernel here is a real
one (nbclient), started with the variable as the hub's spawner sets it; nothing of its notebook is saved.
"""

from __future__ import annotations

import json
import os
from pathlib import Path
from typing import Any

import pytest

from slurmlab.core.last_cell import LAST_CELL_ENV, LAST_CELL_FILE, MAX_BYTES, decode, encode
from slurmlab.workshop.notebooks import LastCells

RAISES = 'raise RuntimeError("the data is not there <yet>\\x1b[31m")'


def _run_in_a_real_kernel(sources: list[str], env: dict[str, str], cwd: Path) -> None:
    """Run each of ``sources`` as a cell of one real IPython kernel whose environment has ``env`` added."""
    import nbformat
    from nbclient import NotebookClient

    v4: Any = nbformat.v4
    nb = v4.new_notebook(cells=[v4.new_code_cell(src) for src in sources])
    client = NotebookClient(nb, kernel_name="python3", allow_errors=True, timeout=60, resources={})
    saved = {k: os.environ.get(k) for k in env}
    os.environ.update(env)  # the kernel inherits the server's environment, as a seat's kernels do
    try:
        with client.setup_kernel(cwd=str(cwd)):
            for index, cell in enumerate(nb.cells):
                client.execute_cell(cell, index)
    finally:
        for key, value in saved.items():
            if value is None:
                os.environ.pop(key, None)
            else:
                os.environ[key] = value


def _seat(tmp_path: Path) -> tuple[Path, Path]:
    home = tmp_path / "student01"
    lessons = home / "lessons"
    lessons.mkdir(parents=True)
    # the notebook as the student last saved it: no cell run yet, saved before the kernel started
    saved = lessons / "room.ipynb"
    saved.write_text(json.dumps({"cells": [], "metadata": {}, "nbformat": 4, "nbformat_minor": 5}))
    os.utime(saved, ns=(10**9, 10**9))
    return home, lessons


def test_the_kernels_word_on_an_error_reaches_the_view_before_any_save(tmp_path: Path) -> None:
    pytest.importorskip("nbclient")
    home, lessons = _seat(tmp_path)
    env = {
        LAST_CELL_ENV: str(lessons / LAST_CELL_FILE),
        "JPY_SESSION_NAME": str(lessons / "room.ipynb"),
    }
    cells = LastCells({"student01": (home, os.getuid())})
    assert cells.scan()["student01"].words() == ""  # the saved notebook: nothing ran

    _run_in_a_real_kernel(["%load_ext slurmlab", "x = 1", RAISES], env, lessons)
    said = cells.scan()["student01"]
    assert said.words() == "room.ipynb: RuntimeError: the data is not there <yet>", said
    assert json.loads((lessons / "room.ipynb").read_text())["cells"] == []  # not saved: the word told it

    # the student mends it: the next cell runs clean, and the view says so at its next look
    _run_in_a_real_kernel(["%load_ext slurmlab", "x = 2"], env, lessons)
    assert cells.scan()["student01"].words() == ""
    assert sorted(p.name for p in lessons.iterdir()) == [LAST_CELL_FILE, "room.ipynb"]  # no temporary left


def test_without_the_workshops_variable_the_kernel_writes_nothing(tmp_path: Path) -> None:
    pytest.importorskip("nbclient")
    home, lessons = _seat(tmp_path)
    os.environ.pop(LAST_CELL_ENV, None)
    _run_in_a_real_kernel(["%load_ext slurmlab", RAISES], {"JPY_SESSION_NAME": "room.ipynb"}, lessons)
    assert sorted(p.name for p in lessons.iterdir()) == ["room.ipynb"]


def _word(lessons: Path, data: bytes, mtime_s: int) -> Path:
    path = lessons / LAST_CELL_FILE
    path.write_bytes(data)
    os.utime(path, ns=(mtime_s * 10**9, mtime_s * 10**9))
    return path


def _saved_with_error(lessons: Path, mtime_s: int) -> None:
    nb = {
        "cells": [
            {
                "cell_type": "code",
                "execution_count": 3,
                "outputs": [
                    {"output_type": "error", "ename": "KeyError", "evalue": "'gpu'", "traceback": []}
                ],
                "source": "",
                "metadata": {},
            }
        ],
        "metadata": {},
        "nbformat": 4,
        "nbformat_minor": 5,
    }
    path = lessons / "02-sharing.ipynb"
    path.write_text(json.dumps(nb))
    os.utime(path, ns=(mtime_s * 10**9, mtime_s * 10**9))


def test_a_notebook_saved_after_the_word_is_what_the_view_reads(tmp_path: Path) -> None:
    home, lessons = _seat(tmp_path)
    cells = LastCells({"student01": (home, os.getuid())})
    _word(lessons, encode("room.ipynb", "ValueError: early"), 20)
    assert cells.scan()["student01"].words() == "room.ipynb: ValueError: early"
    _saved_with_error(lessons, 30)  # another lesson, saved later
    assert cells.scan()["student01"].words() == "02-sharing.ipynb: KeyError: 'gpu'"
    reads = cells.reads
    cells.scan()
    assert cells.reads == reads  # nothing changed: nothing read again


@pytest.mark.parametrize(
    "data",
    [
        b"\xff\xfe garbage",
        b'{"notebook": "room.ipynb", "error": "forged"}',  # not a word of ours
        b'{"slurmlab_last_cell": 1, "notebook": 3, "error": "x"}',
        b'{"slurmlab_last_cell": 1, "notebook": "a", "error": "' + b"x" * MAX_BYTES + b'"}',
        b"[" * 100_000,
    ],
    ids=["bytes", "other-shape", "wrong-type", "too-long", "deep"],
)
def test_a_word_that_is_not_one_leaves_the_saved_notebook_to_speak(tmp_path: Path, data: bytes) -> None:
    home, lessons = _seat(tmp_path)
    _saved_with_error(lessons, 10)
    _word(lessons, data, 20)
    assert decode(data) is None
    said = LastCells({"student01": (home, os.getuid())}).scan()["student01"]
    assert said.words() == "02-sharing.ipynb: KeyError: 'gpu'"


def test_a_word_that_is_a_link_or_not_the_students_is_not_read(tmp_path: Path) -> None:
    home, lessons = _seat(tmp_path)
    _saved_with_error(lessons, 10)
    secret = tmp_path / "roots-file"
    secret.write_bytes(encode("room.ipynb", "SecretError: root's words"))
    (lessons / LAST_CELL_FILE).symlink_to(secret)
    os.utime(lessons / LAST_CELL_FILE, ns=(20 * 10**9, 20 * 10**9), follow_symlinks=False)
    said = LastCells({"student01": (home, os.getuid())}).scan()["student01"]
    assert said.words() == "02-sharing.ipynb: KeyError: 'gpu'"
    (lessons / LAST_CELL_FILE).unlink()
    _word(lessons, encode("room.ipynb", "SecretError: not theirs"), 20)
    said = LastCells({"student01": (home, os.getuid() + 1)}).scan().get("student01")
    assert said is None or "SecretError" not in said.words()


def test_the_word_keeps_only_the_notebooks_name_and_fits_its_limit() -> None:
    data = encode("/home/student01/lessons/sub/room.ipynb", "E: " + "x" * 10_000)
    assert len(data) <= MAX_BYTES
    word = decode(data)
    assert word is not None and word.notebook == "room.ipynb" and word.error.startswith("E: xxx")
    assert decode(encode("", "")) is not None
