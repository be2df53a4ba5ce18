"""Running a workshop lesson in a real kernel against a sandbox, and reading what it printed: shared by
test_lessons.py (every lesson, and the topics of 00-04) and test_lessons_05_08.py (the topics of 05-08)."""

from __future__ import annotations

import re
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest

NOTEBOOKS = Path(__file__).resolve().parents[3] / "notebooks"
WIDGET = "application/vnd.jupyter.widget-view+json"
BOKEH = "application/vnd.bokehjs_exec.v0+json"


def cell_text(cell: Any) -> str:
    """Everything a cell showed: streams, plain text and HTML of its results, and its error, if any."""
    parts = []
    for out in cell.get("outputs", []):
        if "text" in out:
            parts.append(out["text"])
        data = out.get("data", {})
        parts.append(str(data.get("text/plain", "")))
        parts.append(str(data.get("text/html", "")))
        if out.get("output_type") == "error":
            parts.append(f"{out['ename']}: {out['evalue']}")
    return "\n".join(parts)


def cell_stderr(cell: Any) -> str:
    return "".join(o.get("text", "") for o in cell.get("outputs", []) if o.get("name") == "stderr")


def squeue_ids(sandbox: Any) -> set[str]:
    out = sandbox.runner().run(["squeue", "-h", "-o", "%i"]).stdout
    return {line.strip() for line in out.splitlines() if line.strip()}


def parse_grants(detail: str, name: str = "gpu") -> dict[str, list[int]]:
    """node -> indices of GRES ``name`` (gpu, shard) in one ``scontrol show job -d`` text."""
    from slurmlab.core.slurm import hostlist

    found: dict[str, list[int]] = {}
    for nodes, idx in re.findall(rf"Nodes=(\S+) .*?GRES=\S*?\b{name}[^(\s]*\(IDX:([\d,\-]+)\)", detail):
        ids: list[int] = []
        for part in idx.split(","):
            lo, _, hi = part.partition("-")
            ids.extend(range(int(lo), int(hi or lo) + 1))
        for node in hostlist.expand(nodes):
            found.setdefault(node, []).extend(ids)
    return found


def granted_gpus(sandbox: Any, job_id: str) -> dict[str, list[int]]:
    """node -> GPU IDX of the job, read straight from ``scontrol show job -d`` (while it runs: an ended job's
    GRES is gone from Slurm's record)."""
    return parse_grants(sandbox.runner().run(["scontrol", "show", "job", "-d", job_id]).stdout)


class LessonCells:
    """An executed lesson's cells, found by how their source starts or by tag."""

    def __init__(self, nb: Any) -> None:
        self.nb = nb
        self.code = [c for c in nb.cells if c.cell_type == "code"]

    def cell(self, prefix: str) -> Any:
        found = [c for c in self.code if c.source.startswith(prefix)]
        assert len(found) == 1, f"{len(found)} cells start with {prefix!r}"
        return found[0]

    def tagged(self, tag: str) -> list[Any]:
        return [c for c in self.code if tag in c.metadata.get("tags", [])]

    def one_tagged(self, tag: str) -> Any:
        found = self.tagged(tag)
        assert found, f"no cell tagged {tag!r}"
        return found[0]

    def after(self, cell: Any) -> Any:
        return self.nb.cells[self.nb.cells.index(cell) + 1]

    def markdown(self) -> str:
        return "\n".join(c.source for c in self.nb.cells if c.cell_type == "markdown")


def run_notebook(
    path: Path, sandbox: Any, monkeypatch: pytest.MonkeyPatch, tmp_path: Path, on_cell: Callable[[Any], None]
) -> tuple[Any, float]:
    """Execute ``path`` in a fresh kernel on ``sandbox`` (errors kept in the outputs, for the test to judge);
    ``on_cell`` sees each cell right after it ran. The notebook and its wall time in seconds."""
    nbformat = pytest.importorskip("nbformat")
    nbclient = pytest.importorskip("nbclient")
    for key, value in sandbox.env().items():
        monkeypatch.setenv(key, value)
    nb = nbformat.read(path, as_version=4)
    client = nbclient.NotebookClient(
        nb,
        kernel_name="python3",
        timeout=180,
        allow_errors=True,
        resources={"metadata": {"path": str(tmp_path)}},
    )
    client.on_cell_executed = lambda cell, **_: on_cell(cell)
    start = time.monotonic()
    client.execute()
    return nb, time.monotonic() - start


# lessons whose run is judged by a test module of their own (test_lessons_05_08.py), which also applies
# assert_course_shape: the generic test leaves them out rather than execute each a second time
OWN_TESTS = ("05-time-slicing", "06-isolation", "07-multi-node", "08-troubleshooting")


def assert_course_shape(lesson: LessonCells, sandbox: Any, before: set[str]) -> None:
    """What every lesson must do: run top to bottom without an error, its one deliberate mistake a short
    UsageError, an exercise with its solution, the instructor's hidden checks passing, every job released."""
    expected = lesson.tagged("expected-error")
    # IPython shows a UsageError as one line on stderr, a real failure as an "error" output
    failed = [
        (c.source, cell_text(c))
        for c in lesson.code
        if c not in expected
        and (
            any(o.get("output_type") == "error" for o in c.outputs)
            or "Error" in cell_stderr(c)
            or "Traceback" in cell_text(c)
        )
    ]
    assert failed == [], failed
    for cell in expected:  # the deliberate mistake: slurmlab's one-line UsageError, nothing deeper
        assert not any(o.get("output_type") == "error" for o in cell.outputs), cell_text(cell)
        assert cell_stderr(cell).startswith("UsageError: ") and "Traceback" not in cell_text(cell), cell_text(
            cell
        )
    # the course's shape: an exercise, its solution, and the instructor's hidden check, which passed
    assert any(c.cell_type == "markdown" and c.source.startswith("## Exercise") for c in lesson.nb.cells)
    assert lesson.tagged("solution"), "no exercise cell tagged 'solution'"
    checks = lesson.tagged("check")
    assert checks, "no check cell tagged 'check'"
    for check in checks:
        assert check.metadata.get("jupyter", {}).get("source_hidden") is True, check.source[:80]
        assert "check passed" in cell_text(check), cell_text(check)
    assert_released(sandbox, before)


def assert_released(sandbox: Any, before: set[str], timeout: float = 30) -> None:
    """Every job the lesson made is gone (a cancelled job may linger in squeue a moment while it completes)."""
    deadline = time.monotonic() + timeout
    while squeue_ids(sandbox) - before and time.monotonic() < deadline:
        time.sleep(0.5)
    assert squeue_ids(sandbox) <= before, squeue_ids(sandbox) - before


def fair_share_said(lesson: LessonCells, sandbox: Any) -> str:
    """What lesson 09's story cell told, held to what Slurm itself says on ``sandbox``: with accounting, one
    "your FairShare" line for each account ``sshare`` gives this user, and the class's GPU time line under it;
    without, the words that say fair-share does not order jobs here and how to turn it on. The story's text."""
    story = cell_text(lesson.cell("story = %sshare --class"))
    assert "Error" not in story and "Traceback" not in story, story
    mine = sandbox.runner().run(
        ["sshare", "--parsable2", "--noheader", "--format=Account,User,FairShare"], check=False
    )
    accounts = {
        line.split("|")[0].strip()
        for line in mine.stdout.splitlines()
        if line.count("|") == 2 and line.split("|")[1]
    }
    if mine.returncode == 0 and accounts:
        said = re.findall(r"^account (\S+): your FairShare ([0-9.]+): ", story, re.M)
        assert {a for a, _ in said} == accounts, (said, mine.stdout)
        assert all(0 <= float(f) <= 1 for _, f in said), said
        assert all(f"in account {a} lately (decayed): you " in story for a in accounts), story
        assert "fair-share factor: 0 to 1" in cell_text(lesson.cell("if story.accounting:"))
    else:
        assert story.startswith("this cluster keeps no accounting: fair-share does not order jobs here"), (
            story
        )
        assert "--accounting" in story, story
        assert "no fair-share table here" in cell_text(lesson.cell("if story.accounting:"))
    return story
