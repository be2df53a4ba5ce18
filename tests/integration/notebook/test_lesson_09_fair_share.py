"""Lesson 09 (fair sharing) under the two set-ups the session's sandbox is not: a class's caps
(``sandbox up --accounting``: QOS normal, four GPUs a user), where the job over the cap waits with
``QOSMaxGRESPerUser`` told in words; and no accounting at all, where every step says what is missing and the lesson
still runs to its check. Each reuses a sandbox other tests start (the capped lessons 07/08's, the accounting-off
magics test's) when they run in the same session. test_lessons.py runs it on the session's sandbox."""

from __future__ import annotations

import re
from pathlib import Path
from typing import Any

import pytest
from lesson_kit import (
    NOTEBOOKS,
    LessonCells,
    assert_course_shape,
    cell_text,
    fair_share_said,
    run_notebook,
    squeue_ids,
)

pytestmark = [pytest.mark.sandbox, pytest.mark.lessons, pytest.mark.slow]

LESSON = NOTEBOOKS / "09-fair-share.ipynb"


def _run(sandbox: Any, monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> LessonCells:
    before = squeue_ids(sandbox)
    nb, _ = run_notebook(LESSON, sandbox, monkeypatch, tmp_path, lambda cell: None)
    lesson = LessonCells(nb)
    assert_course_shape(lesson, sandbox, before)
    return lesson


def test_lesson_09_under_a_seats_gpu_cap_shows_the_cap_reason_in_words(
    sandbox_factory: Any, monkeypatch: pytest.MonkeyPatch, tmp_path: Path
) -> None:
    capped = sandbox_factory("dgx-h100", accounting=True)  # the sandbox of the capped lessons 07 and 08
    lesson = _run(capped, monkeypatch, tmp_path)
    fair_share_said(lesson, capped)
    assert "at most 4 GPU(s) at once" in cell_text(lesson.cell("from slurmlab.teach import gpu_cap"))
    over = cell_text(lesson.cell("import time"))
    states = re.findall(r"allocation (\d+): (RUNNING|PENDING)", over)
    assert [s for _, s in states] == ["RUNNING", "PENDING"], over
    assert "reason QOSMaxGRESPerUser" in over, over  # what Slurm gave the job, as squeue has it
    assert f"why job {states[1][0]} waits: your jobs already use the most GPUs (GRES) your QOS allows" in over
    assert re.search(r"your FairShare [0-9.]+; cap 4 GPU\(s\)", cell_text(lesson.one_tagged("solution")))


def test_lesson_09_without_accounting_says_what_is_missing_and_still_runs(
    sandbox_factory: Any, monkeypatch: pytest.MonkeyPatch, tmp_path: Path
) -> None:
    bare = sandbox_factory("seed", 1, accounting=False)  # the accounting-off magics test's sandbox
    lesson = _run(bare, monkeypatch, tmp_path)
    story = fair_share_said(lesson, bare)
    assert story.startswith("this cluster keeps no accounting"), story
    assert "keeps no accounting" in cell_text(lesson.cell("from slurmlab.teach import gpu_cap"))
    assert "skipped: " in cell_text(lesson.cell("import time"))
    assert "no fair-share: this cluster keeps no accounting; no GPU cap" in cell_text(
        lesson.one_tagged("solution")
    )
