"""Steps in an allocation: ``srun --jobid=J --overlap`` run to its end with its output streamed, or launched to
run beside others. The argv and the streaming are :mod:`slurmlab.slurm.steps`'; what is here is when an
allocation may take a step, and what it keeps of it.
"""

from __future__ import annotations

import os
from collections.abc import Callable, Iterable, Sequence
from typing import TYPE_CHECKING

from slurmlab.errors import AllocationError
from slurmlab.slurm.steps import (
    OutputCallback,
    RunningStep,
    StepResult,
    callable_argv,
    overlap_refused,
    print_output,
    step_argv,
    stream_step,
)

if TYPE_CHECKING:
    from slurmlab.slurm.allocation import Allocation

__all__ = ["launch", "srun"]


def srun(
    alloc: Allocation,
    command: Sequence[str] | Callable[[], object],
    *,
    args: Iterable[str],
    on_output: OutputCallback | None,
    label: bool,
    timeout: float | None,
) -> StepResult:
    """Run one step in ``alloc`` and wait for it (:meth:`Allocation.srun` says how)."""
    job_id = _ready_for_steps(alloc)
    if isinstance(command, str):
        raise TypeError("command must be an argv list, e.g. ['hostname'], or a Python callable")
    cleanup: list[str] = []
    if callable(command):
        argv_cmd, path = callable_argv(command)
        cleanup.append(path)
    else:
        argv_cmd = [str(a) for a in command]
    extra = [str(a) for a in args]
    try:
        argv = step_argv(job_id, extra, argv_cmd, label=label, overlap=True)
        result = _run_step(alloc, argv, on_output or print_output, timeout)
        if overlap_refused(result):
            # Slurm 22.05 cannot create an --overlap step in a job that asked for GPUs per
            # job (--gpus=N): "Insufficient GRES available in allocation". Nothing ran, so
            # run it once more as an ordinary step, which gets the job's GPUs.
            argv = step_argv(job_id, extra, argv_cmd, label=label, overlap=False)
            result = _run_step(alloc, argv, on_output or print_output, timeout)
        return result
    finally:
        for path in cleanup:
            try:
                os.unlink(path)
            except OSError:
                pass


def _ready_for_steps(alloc: Allocation) -> str:
    """The job id of an allocation that can take a step now; otherwise an AllocationError saying what to do."""
    if alloc.job_id is None:
        raise AllocationError("the allocation has no job id yet", hint="wait for it: alloc.wait()")
    if alloc.ended:
        raise AllocationError(
            f"allocation {alloc.job_id} has ended ({alloc.state})",
            hint="submit a new one with `%salloc …` / Allocation.submit(...)",
        )
    if alloc.state == "PENDING":
        raise AllocationError(
            f"allocation {alloc.job_id} is still pending" + (f" ({alloc.reason})" if alloc.reason else ""),
            hint="wait for it with alloc.wait() before running steps",
        )
    return alloc.job_id


def _run_step(alloc: Allocation, argv: list[str], on_output: OutputCallback, timeout: float | None) -> StepResult:
    result = stream_step(alloc.runner, argv, on_output, timeout)
    alloc._steps.append(result)
    alloc._notify()
    if result.interrupted and timeout is None:
        raise KeyboardInterrupt(f"step of allocation {alloc.job_id} interrupted; the allocation is still alive")
    return result


def launch(alloc: Allocation, command: Sequence[str], *, args: Iterable[str], overlap: bool) -> RunningStep:
    """Start one step in ``alloc`` without waiting for it (:meth:`Allocation.launch` says how)."""
    if alloc.job_id is None or alloc.state != "RUNNING":
        raise AllocationError(
            f"allocation {alloc.job_id} is {alloc.state}, not RUNNING", hint="wait for it: alloc.wait()"
        )
    if isinstance(command, str):
        raise TypeError("command must be an argv list")
    argv = step_argv(alloc.job_id, [str(a) for a in args], [str(c) for c in command], label=False,
                     overlap=overlap)
    return RunningStep(argv, alloc.runner.popen(argv), alloc.runner)
