"""The values of a GPU request's options (``--gpus=h100:2``, ``--mem=8G``, ``--time=1:00:00`` …) as models that
render back to what Slurm reads."""

from __future__ import annotations

from dataclasses import dataclass

from slurmlab.core.slurm.gres import GresItem
from slurmlab.core.slurm.timefmt import duration_in_words, format_duration

__all__ = [
    "GPU_BIND_KINDS",
    "GRES_FLAGS",
    "UNIT_KIB",
    "GpuBind",
    "GpuCount",
    "GresSpec",
    "Memory",
    "NodeCount",
    "TimeLimit",
]


@dataclass(frozen=True)
class GpuCount:
    """``[type:]N`` as in ``--gpus=h100:2`` (``type`` None means any GPU type)."""

    count: int
    type: str | None = None

    def render(self) -> str:
        return f"{self.type}:{self.count}" if self.type else str(self.count)


# One ``--gres`` item ``name[:type][:count]`` is the GRES item Slurm prints back (count None = 1).
GresSpec = GresItem


GPU_BIND_KINDS = ("closest", "map_gpu", "mask_gpu", "single", "per_task", "none")


@dataclass(frozen=True)
class GpuBind:
    """``--gpu-bind=[verbose,]kind[:value]``."""

    kind: str
    value: str | None = None
    verbose: bool = False

    def render(self) -> str:
        body = f"{self.kind}:{self.value}" if self.value is not None else self.kind
        return f"verbose,{body}" if self.verbose else body


GRES_FLAGS = (
    "enforce-binding",
    "disable-binding",
    "one-task-per-sharing",
    "multiple-tasks-per-sharing",
    "allow-task-sharing",
)


@dataclass(frozen=True)
class NodeCount:
    """``-N min[-max]``."""

    min: int
    max: int | None = None

    def render(self) -> str:
        return f"{self.min}-{self.max}" if self.max is not None else str(self.min)


# the KiB in one of each unit a Slurm memory size may carry
UNIT_KIB = {"K": 1, "M": 1024, "G": 1024**2, "T": 1024**3}


@dataclass(frozen=True)
class Memory:
    """A Slurm memory size, held in KiB (Slurm's default unit is MiB; ``0`` means all of a node's)."""

    kib: int

    @property
    def mib(self) -> float:
        return self.kib / 1024

    def render(self) -> str:
        if self.kib == 0:
            return "0"
        for unit in ("T", "G", "M", "K"):
            if self.kib % UNIT_KIB[unit] == 0:
                return f"{self.kib // UNIT_KIB[unit]}{unit}"
        raise AssertionError("unreachable: K divides every size")

    def human(self) -> str:
        if self.kib == 0:
            return "all of each node's memory"
        for unit in ("T", "G", "M"):
            size = UNIT_KIB[unit]
            if self.kib >= size:
                value = self.kib / size
                shown = f"{value:.0f}" if value == int(value) else f"{value:.1f}"
                return f"{shown} {unit}iB"
        return f"{self.kib} KiB"


@dataclass(frozen=True)
class TimeLimit:
    """A wall-time limit in seconds; ``seconds`` None means INFINITE/UNLIMITED."""

    seconds: int | None

    @property
    def infinite(self) -> bool:
        return self.seconds is None

    def render(self) -> str:
        return format_duration(self.seconds, unlimited="INFINITE")

    def human(self) -> str:
        if self.seconds is None:
            return "no time limit"
        return duration_in_words(self.seconds) or "no time limit (0)"
