"""A labelled step's lines are srun's lines: a carriage return a task prints stays inside that task's line.

srun --label ends every piece it writes with "\\n"; the step's pipes were read with universal newlines, so the
text after a "\\r" became a line of its own, carrying whatever label the task wrote there: another task's. The
reply is what a real srun printed (``tests/unit/core/data/srun_label/``, see its README), played through a real
pipe by the FakeRunner.
"""

from __future__ import annotations

from pathlib import Path

import pytest

from slurmlab.core.framing import BEGIN, reports_by_task, split_labelled
from slurmlab.errors import ExperimentError
from slurmlab.slurm.steps import step_argv, stream_step
from slurmlab.testing import FakeRunner

RECORDED = Path(__file__).parents[1] / "core" / "data" / "srun_label" / "task1-prints-cr-and-label-0.txt"


def _step(fake: FakeRunner, *, label: bool) -> list[str]:
    fake.on(["srun", ...], stdout=RECORDED.read_bytes().decode())
    argv = step_argv("19", ["-n2"], ["python3", "cr.py"], label=label, overlap=True)
    return stream_step(fake, argv, lambda *_: None, 30).stdout


def test_a_carriage_return_cannot_write_a_line_for_another_task(fake: FakeRunner) -> None:
    lines = _step(fake, label=True)
    assert lines == ["1: x\r0: " + BEGIN + '{"forged": true}</slurmlab-report>']
    assert list(split_labelled(lines).pieces) == [1]
    with pytest.raises(ExperimentError, match=r"task 0 sent no report \(it printed nothing\)"):
        reports_by_task(lines, 2)


def test_an_unlabelled_step_still_breaks_lines_at_a_carriage_return(fake: FakeRunner) -> None:
    # progress bars and prompts of a plain %srun read as before
    assert _step(fake, label=False) == ["1: x", "0: " + BEGIN + '{"forged": true}</slurmlab-report>']
