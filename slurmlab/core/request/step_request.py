"""What a step must ask for to get what the job's tasks were granted (pure).

On Slurm 22.05 an ``srun --overlap`` step in a GPU job gets no GPUs unless it asks for them,
and a step that asks differently from the job gets different GPUs per task. So a probe step
(binding explanation, isolation check) repeats the job's own per-task / per-node / per-job
GPU request and its shared GRES. Every step's GPU options are built here, by :func:`step_gpu_args`.
"""

from __future__ import annotations

from collections.abc import Sequence

from slurmlab.core.slurm.gres import GresItem
from slurmlab.core.slurm.models import Job

__all__ = ["gpu_items", "gres_count", "shared_items", "step_args_for", "step_gpu_args"]


def gpu_items(items: Sequence[GresItem] | None) -> list[GresItem]:
    return [g for g in items or () if g.is_gpu]


def shared_items(items: Sequence[GresItem] | None) -> list[GresItem]:
    return [g for g in items or () if g.is_shared]


def gres_count(items: Sequence[GresItem]) -> int:
    """Total count of ``items`` (an entry without a count means 1)."""
    return sum(int(g.count if g.count is not None else 1) for g in items)


def step_gpu_args(job: Job | None, *, whole_node: bool = False, node: str | None = None) -> list[str]:
    """The srun GPU options of a step in ``job`` (none for no job).

    By default the step's tasks repeat the job's own request, per task, per node or per job, so each
    gets what the job's tasks got. With ``whole_node`` the step is one worker on ``node`` that must see
    all the job's GPUs there, as every other worker does: a job that asked per job (``--gpus=N``) must
    name GPUs in an ``--overlap`` step on Slurm 22.05, so the step asks for all the job holds on the
    node; jobs that asked per node or per task hand the step their GPUs without a request. Shards and
    MPS are never handed over unasked: each step asks for the job's count (a job's shards sit on one
    GPU per node, so all steps see that GPU).
    """
    if job is None:
        return []
    args: list[str] = []
    per_task, per_node, per_job = (
        gpu_items(job.tres_per_task),
        gpu_items(job.tres_per_node),
        gpu_items(job.tres_per_job),
    )
    if whole_node:
        if per_job:
            on_node = job.gpus_by_node().get(node or "", ())
            args.append(f"--gpus={len(on_node) or gres_count(per_job)}")
    elif per_task:
        args.append(f"--gpus-per-task={gres_count(per_task)}")
    elif per_node:
        args.append(f"--gpus-per-node={gres_count(per_node)}")
    elif per_job:
        args.append(f"--gpus={gres_count(per_job)}")
    for group in (job.tres_per_task, job.tres_per_node, job.tres_per_job):
        for g in shared_items(group):
            args.append(f"--gres={g.name}:{gres_count([g])}")
    return args


def step_args_for(job: Job, tasks: int) -> list[str]:
    """srun options that give a step's ``tasks`` what the job's tasks were granted."""
    return [f"--ntasks={tasks}", *step_gpu_args(job)]
