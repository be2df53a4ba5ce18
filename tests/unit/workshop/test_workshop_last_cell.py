"""Who is stuck because of an error in their last cell (issue 31 point 2), read from the students' notebooks.

The notebooks are executed here by nbclient in a real kernel, so their outputs are what Jupyter writes (an
``error`` output with ename, evalue and a coloured traceback). A student controls their home: a link out of it,
a notebook not their own, a huge file and a malformed one are each refused with words, never a traceback.
"""

from __future__ import annotations

import json
import os
from datetime import datetime, timezone
from pathlib import Path
from typing import Any

import pytest

from slurmlab.workshop.notebooks import MAX_BYTES, LastCells, last_cell_error
from slurmlab.workshop.room import build_room, render_room
from slurmlab.workshop.view import RoomCache

NOW = datetime(2026, 12, 5, 1, 0, tzinfo=timezone.utc)
# a student's error message: colours (IPython keeps them in evalue when the message holds them), markup, length
RAISES = 'raise FileNotFoundError("\\x1b[31mno data.csv\\x1b[0m <img src=x onerror=alert(1)> " + "x" * 400)'


def _execute(notebooks: dict[str, tuple[list[str], list[int]]]) -> dict[str, bytes]:
    """name -> the notebook's bytes as Jupyter saves it, its code cells ``sources`` run in ``order`` (cell
    indices) in one real kernel, errors allowed as in JupyterLab."""
    import nbformat
    from nbclient import NotebookClient

    v4: Any = nbformat.v4  # nbformat has no type hints
    writes: Any = nbformat.writes

    made = {
        name: v4.new_notebook(cells=[v4.new_code_cell(src) for src in sources])
        for name, (sources, _) in notebooks.items()
    }
    first = next(iter(made.values()))
    client = NotebookClient(first, kernel_name="python3", allow_errors=True, timeout=60)
    with client.setup_kernel():
        for name, (_, order) in notebooks.items():
            client.nb = made[name]  # execute_cell writes the cell back into the client's notebook
            for index in order:
                client.execute_cell(made[name].cells[index], index)
    return {name: writes(nb).encode("utf-8") for name, nb in made.items()}


@pytest.fixture(scope="module")
def executed() -> dict[str, bytes]:
    pytest.importorskip("nbclient")
    return _execute(
        {
            # the last cell run raised: stuck
            "stuck": (["import os\nx = 1", "print(x)", RAISES], [0, 1, 2]),
            # an error, then the student ran the next cell clean: not stuck
            "mended": (["1 / 0", "y = 2"], [0, 1]),
            # the last cell on the page ran first and clean; the error came from re-running the one above, later
            "out_of_order": (["int('seven')", "z = 3"], [1, 0]),
        }
    )


def _seat(base: Path, name: str, notebooks: dict[str, bytes]) -> Path:
    home = base / name
    lessons = home / "lessons"
    lessons.mkdir(parents=True)
    for stamp, (lesson, data) in enumerate(notebooks.items(), start=1):
        path = lessons / lesson
        path.write_bytes(data)
        os.utime(path, ns=(stamp * 10**9, stamp * 10**9))  # the later in the dict, the newer
    return home


def _cells(seats: dict[str, Path], uid: int | None = None) -> LastCells:
    return LastCells({name: (home, os.getuid() if uid is None else uid) for name, home in seats.items()})


def test_what_jupyter_writes_of_an_error_in_the_last_cell_is_read(executed: dict[str, bytes]) -> None:
    stuck = last_cell_error(json.loads(executed["stuck"]))
    assert stuck is not None and stuck.startswith("FileNotFoundError: no data.csv <img src=x")
    assert "\x1b" not in stuck and "[31m" not in stuck  # terminal colours stripped
    assert stuck.endswith("…") and len(stuck) < 200  # shortened
    assert last_cell_error(json.loads(executed["mended"])) == ""
    # the cell with the highest execution_count, not the last one on the page
    out_of_order = last_cell_error(json.loads(executed["out_of_order"]))
    assert out_of_order is not None and out_of_order.startswith("ValueError: invalid literal for int()")


def test_each_seat_is_judged_by_its_newest_notebook(tmp_path: Path, executed: dict[str, bytes]) -> None:
    seats = {
        "student01": _seat(tmp_path, "student01", {"00-a.ipynb": executed["mended"], "01-b.ipynb": executed["stuck"]}),
        # the error is in an older lesson: the student moved on
        "student02": _seat(tmp_path, "student02", {"01-b.ipynb": executed["stuck"], "02-c.ipynb": executed["mended"]}),
        "student03": _seat(tmp_path, "student03", {}),
    }  # fmt: skip
    found = _cells(seats).scan()
    assert found["student01"].lesson == "01-b.ipynb"
    assert found["student01"].words().startswith("01-b.ipynb: FileNotFoundError: no data.csv")
    assert found["student02"].words() == ""
    assert "student03" not in found  # no notebook: nothing to say


def test_a_refresh_reads_only_the_notebooks_saved_since(tmp_path: Path, executed: dict[str, bytes]) -> None:
    seats = {
        f"student{i:02d}": _seat(tmp_path, f"student{i:02d}", {"00.ipynb": executed["stuck"]})
        for i in (1, 2, 3)
    }
    cells = _cells(seats)
    first = cells.scan()
    assert cells.reads == 3 and all(c.error for c in first.values())
    again = cells.scan()
    assert cells.reads == 3 and again == first  # nothing saved: nothing read
    mended = seats["student02"] / "lessons" / "00.ipynb"
    mended.write_bytes(executed["mended"])
    os.utime(mended, ns=(50 * 10**9, 50 * 10**9))
    third = cells.scan()
    assert cells.reads == 4
    assert third["student02"].error == "" and third["student01"] == first["student01"]


def test_a_link_out_of_the_home_is_never_followed(tmp_path: Path, executed: dict[str, bytes]) -> None:
    # root's own notebook with an error, outside every home: a link to it must not make the seat look stuck
    secret = tmp_path / "root-only" / "secret.ipynb"
    secret.parent.mkdir()
    secret.write_bytes(executed["stuck"].replace(b"no data.csv", b"ROOTS-SECRET"))
    home = _seat(tmp_path / "homes", "student01", {"00.ipynb": executed["mended"]})
    for target, link in ((Path("/etc/shadow"), "98-shadow.ipynb"), (secret, "99-secret.ipynb")):
        (home / "lessons" / link).symlink_to(target)
        os.utime(home / "lessons" / link, ns=(10**12, 10**12), follow_symlinks=False)  # the newest
    found = _cells({"student01": home}).scan()
    assert found["student01"].lesson == "00.ipynb" and found["student01"].words() == ""
    # the whole lessons folder a link to a folder of root's: not entered
    other = _seat(tmp_path / "homes2", "student02", {})
    (other / "lessons").rmdir()
    (other / "lessons").symlink_to(secret.parent)
    assert _cells({"student02": other}).scan() == {}


def test_a_notebook_that_is_not_the_students_own_is_not_read(
    tmp_path: Path, executed: dict[str, bytes]
) -> None:
    # a hard link to another user's file sits in the student's folder but is owned by that user
    home = _seat(tmp_path, "student01", {"00.ipynb": executed["stuck"]})
    found = _cells({"student01": home}, uid=os.getuid() + 4242).scan()
    assert found["student01"].error == ""
    assert "not read" in found["student01"].note


def test_a_huge_notebook_is_refused_unread(tmp_path: Path, executed: dict[str, bytes]) -> None:
    home = _seat(tmp_path, "student01", {"00.ipynb": executed["stuck"]})
    huge = home / "lessons" / "01-huge.ipynb"
    with huge.open("wb") as f:
        f.truncate(
            MAX_BYTES * 64
        )  # sparse: a gigabyte of nothing, which read and parsed would be "unreadable"
    os.utime(huge, ns=(10**12, 10**12))
    found = _cells({"student01": home}).scan()
    assert found["student01"].lesson == "01-huge.ipynb"
    assert "over the view's limit" in found["student01"].note and found["student01"].error == ""


@pytest.mark.parametrize(
    "data",
    [
        b'{"cells": [{"cell_type": "code", "execution_count": 1, "outputs": [',  # half-saved
        b"\xff\xfe not utf-8",
        b"[1, 2, 3]",  # JSON, not a notebook
        b'{"cells": [{"cell_type": "code", "execution_count": 2, "outputs": "error"}]}',
        b"[" * 200_000,  # nested past the parser's depth
    ],
)
def test_a_malformed_notebook_is_an_unreadable_notebook(tmp_path: Path, data: bytes) -> None:
    home = _seat(tmp_path, "student01", {"00.ipynb": data})
    found = _cells({"student01": home}).scan()
    assert found["student01"].words() == "00.ipynb: unreadable notebook"
    room = build_room(("student01",), [], [], found)
    assert room[0].stuck == [] and "unreadable notebook" in render_room(
        room, 1, refresh=15, now=NOW, asked=None
    )


def test_the_teachers_page_shows_the_error_escaped_and_counts_the_seat_stuck(
    tmp_path: Path, executed: dict[str, bytes]
) -> None:
    seats = {
        "student01": _seat(tmp_path, "student01", {"01-b.ipynb": executed["stuck"]}),
        "student02": _seat(tmp_path, "student02", {"01-b.ipynb": executed["mended"]}),
    }
    cells = _cells(seats)
    cache = RoomCache(tuple(seats), 15, lambda: "", lambda: [], lambda: 0.0, ask_cells=cells.scan)
    room, _, trouble = cache.snapshot()
    assert trouble == ""
    page = render_room(room, 1, refresh=15, now=NOW, asked=NOW)
    assert "stuck: 01-b.ipynb: FileNotFoundError: no data.csv &lt;img src=x onerror=alert(1)&gt;" in page
    assert "<img" not in page and "\x1b" not in page
    assert "1 stuck." in page
    by = {s.name: s for s in room}
    assert by["student01"].stuck and not by["student02"].stuck


def test_the_view_gives_its_cache_each_seats_home_and_uid(
    monkeypatch: pytest.MonkeyPatch, tmp_path: Path
) -> None:
    # main() builds LastCells from the workshop's record: the uid each seat was made with
    from slurmlab.workshop import view

    seen: dict[str, Any] = {}

    class _Shop:
        seats = ("student01",)
        state: dict[str, Any] = {"seats": [{"name": "student01", "uid": 1234}], "gpu_cap": 1}

        def home(self, name: str) -> Path:
            return tmp_path / name

        def runner(self) -> Any:
            raise AssertionError("not asked")

    class _Stop(Exception):
        pass

    def fake_cache(*args: Any, **kwargs: Any) -> Any:
        seen["cells"] = kwargs["ask_cells"].__self__
        raise _Stop

    monkeypatch.setattr("slurmlab.workshop.control.Workshop.find", classmethod(lambda cls, d: _Shop()))
    monkeypatch.setattr(view, "RoomCache", fake_cache)
    with pytest.raises(_Stop):
        view.main(["--dir", str(tmp_path)])
    assert seen["cells"].seats == {"student01": (tmp_path / "student01", 1234)}
