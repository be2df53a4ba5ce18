"""The lessons of the course: the notebooks named ``NN-topic.ipynb`` in a folder, in the order of their numbers."""

from __future__ import annotations

import json
import re
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path

from slurmlab.errors import SlurmlabError

__all__ = ["Lesson", "discover", "parse_selection", "select", "title_of"]

# two digits, a dash, a name: what the course runs; anything else in the folder (scratch copies, checkpoints,
# "Untitled.ipynb") is not a lesson
_LESSON = re.compile(r"^(?P<number>\d\d)-(?P<topic>[A-Za-z0-9][\w.-]*)\.ipynb$")
_HEADING = re.compile(r"^\s{0,3}#{1,6}\s+(?P<text>.+?)\s*#*\s*$")


@dataclass(frozen=True)
class Lesson:
    number: str  # "03"
    name: str  # "03-topology": the file name without .ipynb, and the name of its HTML page
    path: Path
    title: str  # the notebook's first heading ("Topology of a GPU node"), or its name when it has none

    @property
    def html_name(self) -> str:
        return f"{self.name}.html"


def title_of(notebook: Mapping[str, object], fallback: str) -> str:
    """The text of the first Markdown heading of a notebook (its JSON), or ``fallback``."""
    cells = notebook.get("cells")
    if not isinstance(cells, list):
        return fallback
    for cell in cells:
        if not isinstance(cell, Mapping) or cell.get("cell_type") != "markdown":
            continue
        source = cell.get("source", "")
        text = "".join(s for s in source if isinstance(s, str)) if isinstance(source, list) else str(source)
        for line in text.splitlines():
            match = _HEADING.match(line)
            if match:
                # Markdown emphasis and code marks read as noise in a title
                return re.sub(r"[`*_]", "", match["text"]).strip() or fallback
    return fallback


def _read_title(path: Path, fallback: str) -> str:
    # a notebook that is not JSON still is a lesson: running it says what is wrong, in its own line
    try:
        data = json.loads(path.read_text(encoding="utf-8"))
    except (OSError, ValueError):
        return fallback
    return title_of(data, fallback) if isinstance(data, Mapping) else fallback


def discover(folder: Path) -> list[Lesson]:
    """Every ``NN-*.ipynb`` in ``folder``, ordered by number then name."""
    if not folder.is_dir():
        raise SlurmlabError(
            f"no lessons folder at {folder}",
            hint="run from the repository's root, or name the folder with --notebooks DIR",
        )
    found = []
    for path in folder.iterdir():
        match = _LESSON.match(path.name)
        if match and path.is_file():
            name = path.name[: -len(".ipynb")]
            found.append(Lesson(match["number"], name, path, _read_title(path, name)))
    return sorted(found, key=lambda lesson: (lesson.number, lesson.name))


def parse_selection(text: str) -> list[str]:
    """``"00,3, 05"`` -> ``["00", "03", "05"]``: the lesson numbers an instructor asked for."""
    numbers: list[str] = []
    for part in text.split(","):
        part = part.strip()
        if not part:
            continue
        if not part.isdigit() or len(part) > 2:
            raise SlurmlabError(
                f"--lessons takes lesson numbers separated by commas, not {part!r}",
                hint="for example --lessons 00,03",
            )
        numbers.append(part.zfill(2))
    if not numbers:
        raise SlurmlabError("--lessons names no lesson", hint="for example --lessons 00,03")
    return numbers


def select(lessons: Sequence[Lesson], numbers: Iterable[str]) -> list[Lesson]:
    """The lessons with these numbers, in course order; a number no lesson has is an error naming those there are."""
    wanted = list(dict.fromkeys(numbers))
    have = {lesson.number for lesson in lessons}
    missing = [n for n in wanted if n not in have]
    if missing:
        there = ", ".join(f"{lesson.number} ({lesson.name})" for lesson in lessons) or "none"
        raise SlurmlabError(f"no lesson numbered {', '.join(missing)}", hint=f"the lessons are: {there}")
    return [lesson for lesson in lessons if lesson.number in wanted]
