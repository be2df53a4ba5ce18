"""A step srun refuses gets the next step under Slurm's own words, with what the allocation holds."""

from __future__ import annotations

from types import SimpleNamespace

from slurmlab.magics.steps import _refusal_hint
from slurmlab.slurm.failures import refusal_hint

OVER = ["srun: error: Unable to create step for job 2: More processors requested than permitted"]


def test_a_step_over_the_allocation_names_its_task_count() -> None:
    alloc = SimpleNamespace(job_id="2", view=SimpleNamespace(num_tasks=2))
    hint = _refusal_hint(alloc, OVER)  # type: ignore[arg-type]
    assert hint is not None and "allocation 2 holds 2 task(s)" in hint and "-n 2" in hint


def test_without_the_task_count_the_general_hint_stays() -> None:
    alloc = SimpleNamespace(job_id="2", view=None)
    hint = _refusal_hint(alloc, OVER)  # type: ignore[arg-type]
    assert hint == refusal_hint(OVER[0]) and hint is not None and "fewer tasks" in hint


def test_an_unknown_failure_gets_no_invented_hint() -> None:
    alloc = SimpleNamespace(job_id="2", view=SimpleNamespace(num_tasks=2))
    assert _refusal_hint(alloc, ["bash: line 1: foo: command not found"]) is None  # type: ignore[arg-type]
    assert refusal_hint("srun: error: Invalid generic resource (gres) specification") is not None
