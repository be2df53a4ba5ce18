"""The data side of the sandbox's stand-in ``nvidia-smi`` (see :mod:`.nvidia_smi`): the hardware file read into
small models, which devices a step sees, the names and the MIG grid the answers use.

Standard library only and no slurmlab import: the sandbox copies it into its ``bin/nvidia-smi`` (:mod:`.scripts`),
run by the nodes' ``python3``, where slurmlab may not be installed.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass

__all__ = [
    "GRID",
    "MEMORY_SLICES",
    "SUPPORTED",
    "GridRow",
    "StandinDevice",
    "StandinGpu",
    "StandinHardware",
    "StandinMig",
    "gb_names",
    "gi_ids",
    "grid_row",
    "mig_slice_label",
    "parents_of",
    "visible_devices",
]

SUPPORTED = "-L, topo -m, nvlink -s, mig -lgi, mig -lgip, and no option (the summary)"

# GPU-instance profiles of the 7 compute x 8 memory slice grid (A100/H100/H200/B200): compute slices, memory
# slices, "+me", the GI profile id nvidia-smi prints, how many fit, and per profile SM/DEC/ENC/CE/JPEG/OFA as
# real `mig -lgip` captures of H100/H200 show them (shared/fixtures/nvidia-smi/mig-lgip-*)
GRID: tuple[tuple[int, int, bool, int, int, tuple[int, ...], tuple[int, int, int, int, int, int]], ...] = (
    (1, 1, False, 19, 7, (0, 1, 2, 3, 4, 5, 6), (16, 1, 0, 1, 1, 0)),
    (1, 1, True, 20, 1, (0, 1, 2, 3, 4, 5, 6), (16, 1, 0, 1, 1, 1)),
    (1, 2, False, 15, 4, (0, 2, 4, 6), (26, 1, 0, 1, 1, 0)),
    (2, 2, False, 14, 3, (0, 2, 4), (32, 2, 0, 2, 2, 0)),
    (3, 4, False, 9, 2, (0, 4), (60, 3, 0, 3, 3, 0)),
    (4, 4, False, 5, 1, (0,), (64, 4, 0, 4, 4, 0)),
    (7, 8, False, 0, 1, (0,), (132, 7, 0, 8, 7, 1)),
)
MEMORY_SLICES = 8


def _int(value: object, default: int = 0) -> int:
    return value if isinstance(value, int) and not isinstance(value, bool) else default


def _text(value: object, default: str = "") -> str:
    return value if isinstance(value, str) else default


def _items(value: object) -> list[Mapping[str, object]]:
    return [v for v in value if isinstance(v, Mapping)] if isinstance(value, (list, tuple)) else []


def _ranges(values: Sequence[int]) -> str:
    nums = sorted(set(values))
    parts: list[str] = []
    i = 0
    while i < len(nums):
        j = i
        while j + 1 < len(nums) and nums[j + 1] == nums[j] + 1:
            j += 1
        parts.append(str(nums[i]) if i == j else f"{nums[i]}-{nums[j]}")
        i = j + 1
    return ",".join(parts)


@dataclass(frozen=True)
class StandinGpu:
    """A physical GPU of the profile."""

    index: int
    name: str
    numa: int | None
    cores: str  # its local CPUs as a range list, "0-55"
    pci_bus_id: str
    memory_mib: int


@dataclass(frozen=True)
class StandinMig:
    """A MIG instance of the profile (``pos``: its place in the profile's ``mig`` list)."""

    pos: int
    gpu: int
    profile: str
    start: int
    size: int


@dataclass(frozen=True)
class StandinDevice:
    """One GPU (or MIG slice) a step sees: Slurm's GRES index on the node and what the profile says it is."""

    idx: int  # Slurm's GRES index on the node (what SLURM_STEP_GPUS and the sandbox's CUDA_VISIBLE_DEVICES hold)
    gpu: StandinGpu  # the GPU, or the parent GPU of a MIG slice
    mig: StandinMig | None = None


@dataclass(frozen=True)
class StandinHardware:
    """The part of the hardware file the stand-in answers from."""

    name: str
    nodes: tuple[str, ...]
    gpus: tuple[StandinGpu, ...]
    migs: tuple[StandinMig, ...]
    nvlink: tuple[tuple[int, ...], ...]
    devices: tuple[StandinDevice, ...]  # per Slurm GRES index of a node

    @classmethod
    def from_doc(cls, doc: Mapping[str, object]) -> StandinHardware:
        prof = doc.get("profile")
        prof = prof if isinstance(prof, Mapping) else {}
        gpus = []
        for g in _items(prof.get("gpus")):
            cores = g.get("cores")
            text = (
                cores
                if isinstance(cores, str)
                else _ranges(
                    [c for c in cores if isinstance(c, int)] if isinstance(cores, (list, tuple)) else []
                )
            )
            numa = g.get("numa")
            gpus.append(
                StandinGpu(
                    _int(g.get("index")),
                    _text(g.get("name"), "GPU"),
                    numa if isinstance(numa, int) else None,
                    text or "N/A",
                    _text(g.get("pci_bus_id"), "N/A"),
                    _int(g.get("memory_mib")),
                )
            )
        migs = tuple(
            StandinMig(
                k,
                _int(m.get("gpu")),
                _text(m.get("profile"), "?"),
                _int(m.get("start")),
                _int(m.get("size"), 1),
            )
            for k, m in enumerate(_items(prof.get("mig")))
        )
        raw_links = prof.get("nvlink")
        nvlink = (
            tuple(tuple(_int(v) for v in row) for row in raw_links if isinstance(row, (list, tuple)))
            if isinstance(raw_links, (list, tuple))
            else ()
        )
        by_index = {g.index: g for g in gpus}
        devices = []
        for k, entry in enumerate(_items(doc.get("gres_idx"))):
            gpu = by_index.get(_int(entry.get("gpu"), -1))
            if gpu is None:
                continue
            pos = entry.get("mig")
            mig = migs[pos] if isinstance(pos, int) and 0 <= pos < len(migs) else None
            devices.append(StandinDevice(k, gpu, mig))
        raw_nodes = doc.get("nodes")
        nodes = tuple(n for n in raw_nodes if isinstance(n, str)) if isinstance(raw_nodes, list) else ()
        return cls(_text(prof.get("name"), "?"), nodes, tuple(gpus), migs, nvlink, tuple(devices))

    def links(self, a: StandinGpu, b: StandinGpu) -> int:
        try:
            return self.nvlink[a.index][b.index]
        except IndexError:
            return 0


# ---- what the step can see ----------------------------------------------------------------------


def _numbers(text: str) -> list[int] | None:
    """``"0,3"`` -> [0, 3] (Slurm writes these variables as comma lists); None when a token is not a number
    (a UUID, NoDevFiles)."""
    tokens = [t.strip() for t in text.split(",") if t.strip()]
    return [int(t) for t in tokens] if all(t.isdigit() for t in tokens) else None


def visible_devices(hw: StandinHardware, env: Mapping[str, str]) -> tuple[list[StandinDevice], str]:
    """The devices the step sees and where that came from: ``CUDA_VISIBLE_DEVICES``, else ``SLURM_STEP_GPUS``,
    else ``SLURM_JOB_GPUS``; outside any job, every device of the node; in a job that holds none, none."""
    by_idx = {d.idx: d for d in hw.devices}
    for var in ("CUDA_VISIBLE_DEVICES", "SLURM_STEP_GPUS", "SLURM_JOB_GPUS"):
        raw = env.get(var)
        idx = _numbers(raw) if raw is not None else None
        if idx is None:
            continue  # unset, or UUIDs: ask the next variable
        return [by_idx[i] for i in dict.fromkeys(idx) if i in by_idx], f"{var}={raw}"
    if env.get("SLURM_JOB_ID"):
        return [], "no GPU in this step (no CUDA_VISIBLE_DEVICES, SLURM_STEP_GPUS or SLURM_JOB_GPUS)"
    return list(hw.devices), "outside a job: every GPU of the node"


def parents_of(devices: Sequence[StandinDevice]) -> list[StandinGpu]:
    """The physical GPUs of the visible devices, in the order first seen (a MIG slice shows its parent)."""
    return list({d.gpu.index: d.gpu for d in devices}.values())


# ---- names ------------------------------------------------------------------------------------------


def mig_slice_label(
    gpu: int, profile: str, start: int | None, size: int | None, gi_id: int | None = None
) -> str:
    """The one name of a MIG slice in slurmlab's outputs (the same as ``slurmlab.core.gpu.mig.instances``'s)."""
    where = "?" if start is None else f"{start}:{size}"
    return f"GPU {gpu} · {profile} @ {where}" + ("" if gi_id is None else f" · GI {gi_id}")


GridRow = tuple[int, int, bool, int, int, tuple[int, ...], tuple[int, int, int, int, int, int]]


def grid_row(profile: str, size: int | None = None) -> GridRow | None:
    """The grid row of a GI profile name (``1g.18gb``, ``1g.18gb+me``) placed over ``size`` memory slices."""
    head = profile.split(".", 1)[0]
    if not head.endswith("g") or not head[:-1].isdigit():
        return None
    compute, me = int(head[:-1]), profile.endswith("+me")
    for row in GRID:
        if row[0] == compute and row[2] == me and (size is None or row[1] == size):
            return row
    return None


def gi_ids(hw: StandinHardware) -> dict[int, int]:
    """MIG position -> GI id: 1, 2, … per GPU in the profile's order (a real driver picks them when the instances
    are made; the stand-in has to choose)."""
    out: dict[int, int] = {}
    per_gpu: dict[int, int] = {}
    for m in hw.migs:
        per_gpu[m.gpu] = per_gpu.get(m.gpu, 0) + 1
        out[m.pos] = per_gpu[m.gpu]
    return out


# GB in the names of the 1g, 1g (2 memory slices), 2g, 3g, 4g and 7g profiles, by the GPU's memory in MiB
# (the names of slurmlab.core.gpu.mig.tables: A100-40GB, A100/H100-80GB, H100-94GB, H200-141GB, B200-180GB)
_NAME_GB: tuple[tuple[int, tuple[int, ...]], ...] = (
    (40960, (5, 10, 10, 20, 20, 40)),
    (81559, (10, 20, 20, 40, 40, 80)),
    (95830, (12, 24, 24, 47, 47, 94)),
    (143771, (18, 35, 35, 71, 71, 141)),
    (183359, (23, 45, 45, 90, 90, 180)),
)


def gb_names(gpu: StandinGpu, instances: Sequence[StandinMig]) -> dict[tuple[int, int], str]:
    """(compute, memory slices) -> the profile name on this GPU: the names its instances use, the others those
    of the GPU model nearest in memory (1g.18gb on an H200)."""
    known: dict[tuple[int, int], str] = {}
    for m in instances:
        row = grid_row(m.profile, m.size)
        if row is not None:
            known[(row[0], row[1])] = m.profile.removesuffix("+me")
    gb = min(_NAME_GB, key=lambda e: abs(e[0] - gpu.memory_mib))[1]
    for row, size_gb in zip((r for r in GRID if not r[2]), gb, strict=True):
        known.setdefault((row[0], row[1]), f"{row[0]}g.{size_gb}gb")
    return known
