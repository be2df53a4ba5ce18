"""What ``%salloc`` says about a request before it submits it: no GPU asked for, no time limit given.

Pure: the request and the partitions in, the text out. Slurm accepts both requests without a word; a user who
forgot ``--gpus`` gets a job that holds a node's CPUs and no GPU, and one without ``-t`` a job that may hold
its GPUs for days (the partition's limit) once the notebook is forgotten.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import TYPE_CHECKING

from slurmlab.core.slurm.timefmt import format_duration

if TYPE_CHECKING:  # types only: the checks read what the request and the partitions hold
    from slurmlab.core.request.request import GpuRequest
    from slurmlab.core.slurm.models import Partition

__all__ = [
    "asks_for_gpu",
    "no_gpu_message",
    "partition_for",
    "time_limit_note",
    "unlimited",
    "zero_time_message",
]

_GPU_WORDS = ("gpu", "shard", "mps")


def asks_for_gpu(req: GpuRequest) -> bool:
    """Whole GPUs, MIG slices, shards or MPS, by a known option or one slurmlab passes through
    (``--tres-per-task=gres/gpu:1``)."""
    if req.wants_gpus or req.wants_shared_gpu:
        return True
    return any(word in token.lower() for group in req.extra for token in group for word in _GPU_WORDS)


def no_gpu_message(req: GpuRequest) -> str:
    """Why a request without a GPU is refused, and the three ways on."""
    zero = [f"{name}={count.render()}" for name, count in req.gpu_options if not count.count]
    zero += [f"--gres={s.render()}" for s in req.gres if (s.is_gpu or s.is_shared) and not s.amount]
    what = (
        f"{' '.join(zero)} asks for no GPU"
        if zero
        else "this request asks for no GPU (no --gpus, --gres=gpu/shard/mps)"
    )
    return (
        f"{what}, so nothing was submitted: ask for one with --gpus=1 (or a GRES such as --gres=shard:1 for "
        "a share of one), or add --no-gpu if a CPU-only job is meant"
    )


def partition_for(req: GpuRequest, partitions: Sequence[Partition], default: str | None) -> Partition | None:
    """The partition the job will run in: the one asked for (the first of a list), else the default."""
    wanted = (req.partition or "").split(",")[0] or default
    if wanted is None:
        wanted = next((p.name for p in partitions if p.default), None)
    return next((p for p in partitions if p.name == wanted), None)


def unlimited(req: GpuRequest) -> bool:
    """No ``-t``, ``-t UNLIMITED`` or ``-t 0`` (which Slurm reads as "no limit")."""
    return req.time is None or req.time.infinite or req.time.seconds == 0


def zero_time_message(req: GpuRequest) -> str | None:
    """Why ``-t 0`` is refused (None for any other time): it reads as "no time at all" but salloc(1) says "a
    time limit of zero requests that no time limit be imposed" (salloc sets 0 to INFINITE), so a user who
    wanted a quick test gets a job that holds its GPUs for as long as the partition allows."""
    if req.time is None or req.time.seconds != 0:
        return None
    return (
        "-t 0 does not mean a short job: Slurm reads a time limit of zero as no time limit at all, so the "
        "job would hold its GPUs until it is cancelled or this kernel ends (in a partition with a MaxTime it "
        "would never start: PartitionTimeLimit); nothing was submitted: give a real limit, e.g. -t 30 (minutes) or "
        "-t 2:00:00, or write -t UNLIMITED if no limit is meant"
    )


def time_limit_note(req: GpuRequest, partition: Partition | None) -> str | None:
    """One line for a request without ``-t`` (or with ``-t UNLIMITED``): the limit it will get and how to set
    one; None when it has a limit."""
    if not unlimited(req):
        return None
    asked = "no time limit given" if req.time is None else f"--time={req.time.render()}"
    how = "set one with -t 30 (minutes) or -t 2:00:00"
    if partition is None:
        gets = "the partition's default limit (unknown here; possibly no limit)"
    elif partition.default_time is not None and req.time is None:
        gets = f"partition {partition.name}'s DefaultTime, {format_duration(partition.default_time)}"
    elif partition.max_time is not None and req.time is None:
        gets = f"partition {partition.name}'s MaxTime, {format_duration(partition.max_time)}"
    elif partition.max_time is not None:
        # no limit asked for in a partition with one: Slurm does not cut the request down to MaxTime
        most = format_duration(partition.max_time)
        return (
            f"note: {asked} is more than partition {partition.name}'s MaxTime ({most}): Slurm does not shorten "
            "it to MaxTime, the job waits with reason PartitionTimeLimit and never starts (a cluster with "
            f"EnforcePartLimits refuses it at once); {how}, at most {most}"
        )
    else:
        gets = f"no limit in partition {partition.name}: it runs until cancelled or this kernel ends"
    return f"note: {asked}, so the job gets {gets}; {how}"
