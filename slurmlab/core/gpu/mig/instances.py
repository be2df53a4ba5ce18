"""The MIG instances of a GPU as listed or placed: GPU instances (GI) on the memory-slice grid, each with its
compute instances (CI), and the one way a slice is named everywhere (:func:`mig_slice_label`)."""

from __future__ import annotations

from dataclasses import dataclass

__all__ = ["ComputeInstance", "GpuInstance", "GpuMig", "mig_slice_label"]


def mig_slice_label(
    gpu: int, profile: str, start: int | None, size: int | None, gi_id: int | None = None
) -> str:
    """The one name of a MIG slice (GPU instance) in every slurmlab output: ``GPU 0 · 3g.71gb @ 4:4 · GI 2``.

    Why this form: the parent GPU, the profile and the placement ``start:size`` (in memory slices) are known from
    every source (a hardware profile or the sandbox, ``nvidia-smi mig -lgi``, and, inferred, ``nvidia-smi -L``),
    say where the slice physically sits whatever order the instances were made in, and read the same as the MIG
    figure's grid. The GI id is added where the source prints it (``mig -lgi``): the driver picks it when the
    instance is created, so the sandbox and ``-L`` cannot know it. ``-L``'s ``MIG … Device N`` is not used: it is
    an enumeration order that changes with ``CUDA_VISIBLE_DEVICES``. An unknown placement reads ``@ ?``.
    """
    where = "?" if start is None else f"{start}:{size}"
    return f"GPU {gpu} · {profile} @ {where}" + ("" if gi_id is None else f" · GI {gi_id}")


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
        """The slice's one name (:func:`mig_slice_label`): ``GPU 0 · 3g.71gb @ 4:4 · GI 2``."""
        return mig_slice_label(self.gpu, self.profile, self.start, self.size, self.gi_id)


@dataclass(frozen=True)
class GpuMig:
    index: int
    instances: tuple[GpuInstance, ...] = ()
    model: str | None = None
    uuid: str | None = None
