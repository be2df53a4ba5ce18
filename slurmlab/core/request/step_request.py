"""What a step must ask for to get what the job's tasks were granted (pure).

On Slurm 22.05 an ``srun --overlap`` step in a GPU job gets no GPUs unless it asks for them,
and a step that asks differently from the job gets different GPUs per task. So a probe step
(binding explanation, isolation check) repeats the job's own per-task / per-node / per-job
GPU request and its shared GRES.
"""

from __future__ import annotations

from collections.abc import Sequence

from slurmlab.core.slurm.gres import GresItem
from slurmlab.core.slurm.models import Job

__all__ = ["gpu_items", "gres_count", "shared_items", "step_args_for"]


def gpu_items(items: Sequence[GresItem] | None) -> list[GresItem]:
    return [g for g in items or () if g.is_gpu]


def shared_items(items: Sequence[GresItem] | None) -> list[GresItem]:
    return [g for g in items or () if g.is_shared]


def gres_count(items: Sequence[GresItem]) -> int:
    """Total count of ``items`` (an entry without a count means 1)."""
    return sum(int(g.count if g.count is not None else 1) for g in items)


def step_args_for(job: Job, tasks: int) -> list[str]:
    """srun options that give a step's ``tasks`` what the job's tasks were granted."""
    args = [f"--ntasks={tasks}"]
    per_task, per_node, per_job = gpu_items(job.tres_per_task), gpu_items(job.tres_per_node), gpu_items(
        job.tres_per_job)
    if per_task:
        args.append(f"--gpus-per-task={gres_count(per_task)}")
    elif per_node:
        args.append(f"--gpus-per-node={gres_count(per_node)}")
    elif per_job:
        args.append(f"--gpus={gres_count(per_job)}")
    for group in (job.tres_per_task, job.tres_per_node, job.tres_per_job):
        for g in shared_items(group):
            args.append(f"--gres={g.name}:{gres_count([g])}")
    return args
