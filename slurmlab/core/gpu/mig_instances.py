"""The MIG instances of a GPU as listed or placed: GPU instances (GI) on the memory-slice grid, each with its
compute instances (CI)."""

from __future__ import annotations

from dataclasses import dataclass

__all__ = ["ComputeInstance", "GpuInstance", "GpuMig"]


@dataclass(frozen=True)
class ComputeInstance:
    ci_id: int | None
    name: str  # profile name as printed: 1c.3g.20gb, or the GI's name for a full-size CI
    compute_slices: int
    profile_id: int | None = None
    uuid: str | None = None  # MIG-<uuid> where the listing shows one per CI
    device: int | None = None  # "Device N" index in `nvidia-smi -L`


@dataclass(frozen=True)
class GpuInstance:
    gpu: int
    profile: str  # GI profile name, 3g.40gb
    compute_slices: int
    gi_id: int | None = None
    profile_id: int | None = None
    start: int | None = None  # placement in memory slices; None = unknown
    size: int | None = None
    compute_instances: tuple[ComputeInstance, ...] = ()
    uuid: str | None = None
    placement_inferred: bool = False

    @property
    def placement(self) -> str:
        return "?" if self.start is None else f"{self.start}:{self.size}"

    @property
    def memory_slices(self) -> range:
        if self.start is None or self.size is None:
            return range(0)
        return range(self.start, self.start + self.size)

    def compute_range(self, compute_total: int = 7) -> range:
        """Compute slices the GI occupies: ``compute_slices`` slices from its start, within the grid."""
        if self.start is None:
            return range(0)
        return range(self.start, min(self.start + self.compute_slices, compute_total))

    @property
    def label(self) -> str:
        ids = []
        if self.gi_id is not None:
            ids.append(f"GI {self.gi_id}")
        if self.compute_instances:
            cis = [str(c.ci_id) for c in self.compute_instances if c.ci_id is not None]
            if cis:
                ids.append(f"CI {','.join(cis)}")
        return self.profile + (f" ({'; '.join(ids)})" if ids else "")


@dataclass(frozen=True)
class GpuMig:
    index: int
    instances: tuple[GpuInstance, ...] = ()
    model: str | None = None
    uuid: str | None = None
