"""The devices of a node's topology, GPUs (with their CPU and NUMA affinity) and NICs, and the CPU lists
(``0-15,32-47``) their affinity is written in."""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass

from slurmlab.core.slurm.ranges import parse_index_list, render_index_list

__all__ = ["Gpu", "Nic", "format_cpu_list", "parse_cpu_list"]


def parse_cpu_list(text: str, *, what: str = "CPU list") -> frozenset[int]:
    """``0-15,32-47`` / ``4,6,9`` -> the set of ids; an empty string is the empty set."""
    return frozenset(parse_index_list(text, what))


def format_cpu_list(ids: Iterable[int]) -> str:
    """The compact form of a set of ids: ``{0,1,2,5}`` -> ``0-2,5``."""
    return render_index_list(sorted(set(ids)))


@dataclass(frozen=True)
class Gpu:
    index: int
    name: str  # as in the matrix: GPU0
    cpu_affinity: frozenset[int] | None = None  # None: the capture left the cell empty or had no column
    numa_affinity: frozenset[int] | None = None  # None: N/A or absent
    gpu_numa_id: int | None = None  # GH200/Grace: the GPU memory's own NUMA node
    model: str | None = None
    uuid: str | None = None

    @property
    def numa_label(self) -> str:
        if self.numa_affinity:
            return "NUMA " + format_cpu_list(self.numa_affinity)
        if self.cpu_affinity:
            return "CPUs " + format_cpu_list(self.cpu_affinity)
        return "NUMA ?"


@dataclass(frozen=True)
class Nic:
    name: str  # column name: NIC0 or mlx5_0
    device: str  # the device from the NIC legend (mlx5_2), or the column name itself
