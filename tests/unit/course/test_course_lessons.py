"""Which notebooks are lessons, in which order, with which titles; ``--lessons 00,03`` (pure: files in tmp_path)."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from hypothesis import given
from hypothesis import strategies as st

from slurmlab.course.lessons import discover, parse_selection, select, title_of
from slurmlab.errors import SlurmlabError


def _nb(*cells: tuple[str, object]) -> dict[str, object]:
    return {
        "cells": [{"cell_type": kind, "source": source, "metadata": {}} for kind, source in cells],
        "metadata": {},
        "nbformat": 4,
        "nbformat_minor": 5,
    }


def _write(folder: Path, name: str, nb: object) -> None:
    (folder / name).write_text(json.dumps(nb) if not isinstance(nb, str) else nb)


def test_lessons_are_numbered_notebooks_in_number_order(tmp_path: Path) -> None:
    for name in ["03-topology.ipynb", "00-quickstart.ipynb", "10-extra.ipynb", "01-requesting-gpus.ipynb"]:
        _write(tmp_path, name, _nb(("markdown", f"# {name[3:-6]}")))
    for name in [
        "Untitled.ipynb",
        "3-short.ipynb",
        "04-mig.ipynb.bak",
        "04-mig.txt",
        "x04-mig.ipynb",
        "05-.ipynb",
    ]:
        _write(tmp_path, name, _nb())
    (tmp_path / "06-a-folder.ipynb").mkdir()
    (tmp_path / ".ipynb_checkpoints").mkdir()
    _write(tmp_path / ".ipynb_checkpoints", "00-quickstart-checkpoint.ipynb", _nb())
    lessons = discover(tmp_path)
    assert [lesson.name for lesson in lessons] == [
        "00-quickstart",
        "01-requesting-gpus",
        "03-topology",
        "10-extra",
    ]
    assert [lesson.number for lesson in lessons] == ["00", "01", "03", "10"]
    assert lessons[2].title == "topology" and lessons[2].html_name == "03-topology.html"
    assert lessons[2].path == tmp_path / "03-topology.ipynb"


def test_the_title_is_the_first_heading_of_any_level_without_markup() -> None:
    nb = _nb(
        ("code", "# a comment, not a heading"),
        ("markdown", ["Some text first\n", "\n", "##  Requesting `--gpus` *well* ##\n", "# later"]),
        ("markdown", "# Not this one"),
    )
    assert title_of(nb, "fallback") == "Requesting --gpus well"
    assert title_of(_nb(("markdown", "no heading here\n    # indented code")), "02-x") == "02-x"
    assert title_of(_nb(("markdown", "#hashtag, not a heading")), "02-x") == "02-x"


@pytest.mark.parametrize(
    "garbage",
    [
        {},
        {"cells": "no"},
        {"cells": [1, None, {"cell_type": "markdown"}]},
        {"cells": [{"cell_type": "markdown", "source": [1, "# ok"]}]},
        {"cells": [{"cell_type": "markdown", "source": 42}]},
    ],
)
def test_odd_notebook_json_gives_the_fallback_or_a_title_never_an_exception(
    garbage: dict[str, object],
) -> None:
    assert title_of(garbage, "07-x") in {"07-x", "ok"}


@given(
    st.recursive(
        st.none() | st.booleans() | st.integers() | st.text(max_size=20),
        lambda inner: st.lists(inner, max_size=4) | st.dictionaries(st.text(max_size=8), inner, max_size=4),
        max_leaves=20,
    )
)
def test_any_json_gives_a_string_title(value: object) -> None:
    nb = value if isinstance(value, dict) else {"cells": value}
    assert isinstance(title_of(nb, "fallback"), str)


def test_a_file_that_is_not_a_notebook_is_still_a_lesson_named_by_its_file(tmp_path: Path) -> None:
    _write(tmp_path, "02-broken.ipynb", "{not json")
    _write(tmp_path, "03-list.ipynb", "[1, 2]")
    (tmp_path / "04-binary.ipynb").write_bytes(b"\xff\xfe\x00garbage")
    assert [(lesson.name, lesson.title) for lesson in discover(tmp_path)] == [
        ("02-broken", "02-broken"),
        ("03-list", "03-list"),
        ("04-binary", "04-binary"),
    ]


def test_no_folder_is_one_clear_error(tmp_path: Path) -> None:
    with pytest.raises(SlurmlabError, match=r"no lessons folder at .*nowhere") as err:
        discover(tmp_path / "nowhere")
    assert "--notebooks" in str(err.value)


def test_selection_by_number() -> None:
    assert parse_selection("00,3, 05,") == ["00", "03", "05"]
    for bad in ["", " , ", "03-topology", "1.5", "100", "-1", "a"]:
        with pytest.raises(SlurmlabError, match="--lessons"):
            parse_selection(bad)


def test_select_keeps_course_order_and_names_the_lessons_there_are(tmp_path: Path) -> None:
    for name in ["00-quickstart.ipynb", "03-topology.ipynb", "05-time-slicing.ipynb"]:
        _write(tmp_path, name, _nb())
    lessons = discover(tmp_path)
    assert [lesson.name for lesson in select(lessons, ["05", "00", "05"])] == [
        "00-quickstart",
        "05-time-slicing",
    ]
    with pytest.raises(SlurmlabError, match="no lesson numbered 04, 09") as err:
        select(lessons, ["03", "04", "09"])
    assert "00 (00-quickstart), 03 (03-topology), 05 (05-time-slicing)" in str(err.value)
