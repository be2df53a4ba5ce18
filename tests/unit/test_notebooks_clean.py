"""The workshop notebooks are committed clean: valid nbformat 4, kernel python3, no outputs, no execution
counts; and every lesson has its exercise, solution and hidden check cell. A dirty copy is caught."""

from __future__ import annotations

import copy
import json
from pathlib import Path
from typing import Any

import pytest

nbformat = pytest.importorskip("nbformat")

NOTEBOOKS = Path(__file__).resolve().parents[2] / "notebooks"
ALL = sorted(NOTEBOOKS.glob("*.ipynb"))


def problems(path: Path) -> list[str]:
    """What is wrong with the committed notebook at ``path``, one line each (empty: clean)."""
    try:
        nb = nbformat.read(path, as_version=nbformat.NO_CONVERT)
    except Exception as exc:  # not JSON, or not a notebook at all
        return [f"{path.name}: cannot be read as a notebook: {exc}"]
    found = []
    if nb.get("nbformat") != 4:
        found.append(f"{path.name}: nbformat {nb.get('nbformat')}, not 4")
    try:
        nbformat.validate(nb)
    except nbformat.ValidationError as exc:
        found.append(f"{path.name}: not valid nbformat: {exc.message}")
    kernel = nb.metadata.get("kernelspec", {}).get("name")
    if kernel != "python3":
        found.append(f"{path.name}: kernel {kernel!r}, not 'python3'")
    for i, cell in enumerate(nb.cells):
        if cell.cell_type != "code":
            continue
        if cell.get("outputs"):
            found.append(f"{path.name}: cell {i} is committed with outputs")
        if cell.get("execution_count") is not None:
            found.append(f"{path.name}: cell {i} is committed with execution count {cell.execution_count}")
        if "execution" in cell.metadata:
            found.append(f"{path.name}: cell {i} is committed with execution timings")
    found += _course_shape(path.name, nb)
    return found


def _course_shape(name: str, nb: Any) -> list[str]:
    """A lesson opens with %load_ext slurmlab, ends with an exercise, a solution and a hidden check cell."""
    code = [c for c in nb.cells if c.cell_type == "code"]
    found = []
    if not code or code[0].source.strip() != "%load_ext slurmlab":
        found.append(f"{name}: the first code cell is not %load_ext slurmlab")
    if not any(c.cell_type == "markdown" and c.source.startswith("## Exercise") for c in nb.cells):
        found.append(f"{name}: no '## Exercise' markdown cell")
    if not any("solution" in c.metadata.get("tags", []) for c in code):
        found.append(f"{name}: no exercise cell tagged 'solution'")
    for (
        c
    ) in code:  # a deliberate mistake must not stop a strict run (make demo: nbclient, allow_errors=False)
        tags = c.metadata.get("tags", [])
        if "expected-error" in tags and "raises-exception" not in tags:
            found.append(f"{name}: a cell tagged 'expected-error' lacks the tag 'raises-exception'")
    checks = [c for c in code if "check" in c.metadata.get("tags", [])]
    if not checks:
        found.append(f"{name}: no check cell tagged 'check'")
    for c in checks:
        if c.metadata.get("jupyter", {}).get("source_hidden") is not True:
            found.append(f"{name}: a check cell is not hidden (metadata jupyter.source_hidden)")
        if "check passed" not in c.source:
            found.append(f"{name}: a check cell never prints 'check passed'")
    return found


def test_there_are_lessons_and_only_lessons() -> None:
    names = [p.name for p in ALL]
    assert names, f"no notebook in {NOTEBOOKS}"
    assert all(n[:2].isdigit() and n[2] == "-" for n in names), names


@pytest.mark.parametrize("path", ALL, ids=[p.stem for p in ALL])
def test_notebook_is_committed_clean(path: Path) -> None:
    assert problems(path) == []


def test_a_dirty_copy_is_caught(tmp_path: Path) -> None:
    clean = json.loads(ALL[0].read_text())
    dirty = copy.deepcopy(clean)
    code = [c for c in dirty["cells"] if c["cell_type"] == "code"]
    code[0]["outputs"] = [{"output_type": "stream", "name": "stdout", "text": "hello\n"}]
    code[1]["execution_count"] = 3
    code[1]["metadata"]["execution"] = {"iopub.status.busy": "2026-01-01T00:00:00Z"}
    check = next(c for c in code if "check" in c["metadata"].get("tags", []))
    check["metadata"]["jupyter"] = {"source_hidden": False}
    dirty["metadata"]["kernelspec"]["name"] = "julia-1.10"
    code[2]["metadata"]["tags"] = ["expected-error"]
    path = tmp_path / ALL[0].name
    path.write_text(json.dumps(dirty))
    found = "\n".join(problems(path))
    for said in (
        "cell 1 is committed with outputs",
        "with execution count 3",
        "with execution timings",
        "kernel 'julia-1.10'",
        "a check cell is not hidden",
        "lacks the tag 'raises-exception'",
    ):
        assert said in found, (said, found)

    invalid = copy.deepcopy(clean)
    invalid["cells"][0]["cell_type"] = "banana"
    path.write_text(json.dumps(invalid))
    assert any("not valid nbformat" in p for p in problems(path)), problems(path)
    path.write_text("{not json")
    assert problems(path)[0].startswith(f"{path.name}: cannot be read")


def test_a_lesson_without_its_exercise_or_check_is_caught(tmp_path: Path) -> None:
    nb = json.loads(ALL[0].read_text())
    nb["cells"] = [c for c in nb["cells"] if not set(c["metadata"].get("tags", [])) & {"solution", "check"}]
    path = tmp_path / ALL[0].name
    path.write_text(json.dumps(nb))
    found = "\n".join(problems(path))
    assert "no exercise cell tagged 'solution'" in found and "no check cell tagged 'check'" in found, found
