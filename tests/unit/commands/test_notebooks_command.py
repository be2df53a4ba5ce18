"""`slurmlab notebooks DIR`: copies the shipped workshop notebooks, never over a notebook the user changed."""

from __future__ import annotations

import json
import re
from pathlib import Path

import pytest

from slurmlab.cli import main
from slurmlab.commands.notebooks import MANIFEST, copy_notebooks, plan_copy, shipped_notebooks
from slurmlab.errors import SlurmlabError

REPO = Path(__file__).resolve().parents[3]


def test_the_shipped_notebooks_are_the_repositorys() -> None:
    shipped = shipped_notebooks()
    source = {p.name: p.read_bytes() for p in (REPO / "notebooks").glob("*.ipynb")}
    assert source and shipped == source


def test_plan_sorts_each_notebook_by_what_is_in_the_folder() -> None:
    import hashlib

    old = b"old"
    plan = plan_copy(
        {"a": b"A", "b": b"B", "c": b"C", "d": b"D"},
        {"b": b"B", "c": old, "d": b"mine"},
        {"c": hashlib.sha256(old).hexdigest(), "d": hashlib.sha256(b"D0").hexdigest()},
    )
    assert (plan.new, plan.same, plan.updated, plan.changed) == (("a",), ("b",), ("c",), ("d",))
    assert plan.writes(False) == ("a", "c") and plan.writes(True) == ("a", "c", "d")


def test_copies_says_how_to_open_them_and_a_second_run_copies_nothing(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    target = tmp_path / "my notebooks"
    assert main(["notebooks", str(target)]) == 0
    out = capsys.readouterr().out
    shipped = shipped_notebooks()
    for name, data in shipped.items():
        assert (target / name).read_bytes() == data
        assert re.search(rf"^  {re.escape(name)} +new$", out, re.M), out
    assert f"copied {len(shipped)} of {len(shipped)} workshop notebooks to {target}" in out
    assert f"jupyter lab '{target}'" in out and "make lab" in out and "%slurm sandbox up" in out
    assert main(["notebooks", str(target)]) == 0
    assert f"copied 0 of {len(shipped)}" in capsys.readouterr().out


def test_a_changed_notebook_is_refused_with_the_fix_and_nothing_is_copied(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    shipped = shipped_notebooks()
    first, *rest = shipped
    (tmp_path / first).write_text("my own work")
    assert main(["notebooks", str(tmp_path)]) == 2
    err = capsys.readouterr().err
    assert err.startswith("slurmlab: error: ") and "Traceback" not in err
    assert f"{first} in {tmp_path} differs from what slurmlab ships" in err and "nothing was copied" in err
    assert f"slurmlab notebooks {tmp_path} --force" in err
    assert (tmp_path / first).read_text() == "my own work"
    assert not any((tmp_path / name).exists() for name in rest)
    # --force overwrites it, and says so
    assert main(["notebooks", str(tmp_path), "--force"]) == 0
    assert re.search(rf"^  {re.escape(first)} +overwritten \(--force\)$", capsys.readouterr().out, re.M)
    assert (tmp_path / first).read_bytes() == shipped[first]


def test_a_notebook_left_as_copied_is_updated_to_a_newer_shipped_one(tmp_path: Path) -> None:
    copy_notebooks({"n.ipynb": b"v1"}, tmp_path)
    plan = copy_notebooks({"n.ipynb": b"v2"}, tmp_path)
    assert plan.updated == ("n.ipynb",) and (tmp_path / "n.ipynb").read_bytes() == b"v2"
    assert json.loads((tmp_path / MANIFEST).read_text())["files"]["n.ipynb"]
    # once the user runs it, it is theirs
    (tmp_path / "n.ipynb").write_bytes(b"v2 with outputs")
    with pytest.raises(SlurmlabError, match="--force"):
        copy_notebooks({"n.ipynb": b"v3"}, tmp_path)


def test_a_file_in_place_of_the_folder_is_a_one_line_error(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    target = tmp_path / "file"
    target.write_text("x")
    assert main(["notebooks", str(target)]) == 2
    err = capsys.readouterr().err
    assert f"{target} is a file, not a folder" in err and "slurmlab notebooks DIR" in err
    assert "Traceback" not in err
