"""The student edition of a lesson: the teacher's notebook without its solutions and instructor checks.

A lesson marks the cells only a teacher should see with cell tags: ``solution`` (the exercise's answer) and
``check`` (the instructor's hidden check of that answer). The student edition drops the check and puts an empty
code cell where the solution was (same cell id, tagged ``answer``), so a student has the place to write theirs;
every other cell, and the notebook's metadata, is kept byte for byte (the lessons are stored as Jupyter writes
them: one-space indents, sorted keys, a final newline, and so is the edition).
"""

from __future__ import annotations

import json

from slurmlab.core.jsontypes import JSONObject, JSONValue

__all__ = ["ANSWER_TAG", "CHECK_TAG", "SOLUTION_TAG", "student_edition"]

SOLUTION_TAG = "solution"
CHECK_TAG = "check"
ANSWER_TAG = "answer"  # the empty cell that takes the solution's place
ANSWER_TEXT = "# your answer here\n"


def _tags(cell: object) -> list[str]:
    metadata = cell.get("metadata") if isinstance(cell, dict) else None
    tags = metadata.get("tags") if isinstance(metadata, dict) else None
    return [t for t in tags if isinstance(t, str)] if isinstance(tags, list) else []


def _answer_cell(solution: JSONObject) -> JSONObject:
    cell: JSONObject = {
        "cell_type": "code",
        "execution_count": None,
        "metadata": {"tags": [ANSWER_TAG]},
        "outputs": [],
        "source": [ANSWER_TEXT],
    }
    if "id" in solution:  # nbformat 4.5 wants one, unique in the notebook: the solution's is free now
        cell["id"] = solution["id"]
    return cell


def student_edition(notebook: bytes, name: str = "the notebook") -> bytes:
    """``notebook`` (a lesson's .ipynb bytes) without its ``check`` cells and with each ``solution`` cell
    replaced by an empty answer cell. Raises ValueError saying what was wrong when it is not a notebook."""
    try:
        data = json.loads(notebook.decode("utf-8"))
    except (UnicodeDecodeError, ValueError) as exc:
        raise ValueError(f"{name} is not a notebook (not UTF-8 JSON: {exc})") from None
    cells = data.get("cells") if isinstance(data, dict) else None
    if not isinstance(cells, list):
        raise ValueError(f"{name} is not a notebook (no list of cells)")
    if not any({SOLUTION_TAG, CHECK_TAG} & set(_tags(cell)) for cell in cells):
        return notebook  # nothing to leave out: the very bytes
    kept: list[JSONValue] = []
    for cell in cells:
        tags = _tags(cell)
        if CHECK_TAG in tags:
            continue
        kept.append(_answer_cell(cell) if SOLUTION_TAG in tags and isinstance(cell, dict) else cell)
    data["cells"] = kept
    return (json.dumps(data, indent=1, sort_keys=True, ensure_ascii=False) + "\n").encode("utf-8")
