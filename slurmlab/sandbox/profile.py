"""Hardware profiles of the sandbox: the data a fake cluster is built from.

A profile is a JSON file in ``slurmlab/sandbox/profiles/<name>.json``. The topology views read the same data,
so the schema is part of the public API. Every node of a profile has the same hardware::

    {
      "name": "dgx-h100",                 # the file's stem; what --profile selects
      "description": "...",
      "sources": ["where each fact comes from", ...],
      "nodes": 2,                         # node count (``--nodes N`` replaces it: the profile scaled to N nodes)
      "node_prefix": "node",              # nodes are node1..nodeN
      "features": ["h100", "nvlink"],     # slurm.conf Features=
      "cpu": {"sockets": 2, "cores_per_socket": 56, "threads_per_core": 1},
      "memory_mb": 2063937,               # RealMemory of a node
      "gres_types": ["gpu", "shard", "mps"],
      "shards_per_gpu": 4,                # 0 = no shards; shards go on whole GPUs, never on MIG instances
      "gpus": [                           # physical GPUs of one node, in index order
        {"index": 0, "model": "h100",     # the GRES type (null = untyped "gpu:N")
         "name": "NVIDIA H100 80GB HBM3", # the name nvidia-smi prints
         "numa": 0, "cores": "0-55",      # NUMA node and CPU cores (cores as a Slurm/Linux range list)
         "pci_bus_id": "00000000:18:00.0", "memory_mib": 81559}
      ],
      "nvlink": [[0, 18, ...], ...],       # NVLink count between GPU i and j (0 = none; diagonal 0)
      "mig": [                            # MIG instances; a GPU listed here is split and is not a whole GPU
        {"gpu": 0, "profile": "1g.18gb", "start": 0, "size": 1}   # placement start:size in memory slices 0..7
      ],
      "partitions": [{"name": "gpu", "default": true, "max_time": "INFINITE"}]
    }

Every node of the profile is in every partition. Loading validates the data and raises
:class:`~slurmlab.errors.SandboxError` naming the file and the field.
"""

from __future__ import annotations

import json
from dataclasses import dataclass, replace
from importlib import resources
from typing import Any

from slurmlab.core.gpu.devices import format_cpu_list
from slurmlab.core.slurm.ranges import parse_index_list
from slurmlab.errors import SandboxError

__all__ = [
    "CpuLayout",
    "Gpu",
    "MigInstance",
    "Partition",
    "Profile",
    "expand_ranges",
    "format_ranges",
    "list_profiles",
    "load_profile",
    "parse_profile",
]

# MIG placements (start memory slices) per compute-slice count, and the memory slices each takes (NVIDIA's MIG
# User Guide: the placement grid of the H100/H200 profiles)
_MIG_PLACEMENTS: dict[str, tuple[tuple[int, ...], int]] = {
    "1g": ((0, 1, 2, 3, 4, 5, 6), 1),
    "2g": ((0, 2, 4), 2),
    "3g": ((0, 4), 4),
    "4g": ((0,), 4),
    "7g": ((0,), 8),
}
# the 1g profile with two memory slices (1g.35gb on H200, 1g.20gb on H100, ID 15)
_MIG_1G_DOUBLE = ((0, 2, 4, 6), 2)


@dataclass(frozen=True)
class CpuLayout:
    sockets: int
    cores_per_socket: int
    threads_per_core: int = 1

    @property
    def cpus(self) -> int:
        return self.sockets * self.cores_per_socket * self.threads_per_core

    @property
    def cores(self) -> int:
        return self.sockets * self.cores_per_socket

    def socket_of_core(self, core: int) -> int:
        return core // self.cores_per_socket


@dataclass(frozen=True)
class Gpu:
    index: int
    model: str | None
    name: str
    numa: int
    cores: tuple[int, ...]
    pci_bus_id: str
    memory_mib: int


@dataclass(frozen=True)
class MigInstance:
    gpu: int
    profile: str
    start: int
    size: int


@dataclass(frozen=True)
class Partition:
    name: str
    default: bool = False
    max_time: str = "INFINITE"


@dataclass(frozen=True)
class Profile:
    name: str
    description: str
    sources: tuple[str, ...]
    nodes: int
    node_prefix: str
    features: tuple[str, ...]
    cpu: CpuLayout
    memory_mb: int
    gres_types: tuple[str, ...]
    shards_per_gpu: int
    gpus: tuple[Gpu, ...]
    nvlink: tuple[tuple[int, ...], ...]
    mig: tuple[MigInstance, ...]
    partitions: tuple[Partition, ...]

    @property
    def node_names(self) -> tuple[str, ...]:
        return tuple(f"{self.node_prefix}{i}" for i in range(1, self.nodes + 1))

    @property
    def mig_gpus(self) -> frozenset[int]:
        """Indices of the GPUs that are split into MIG instances."""
        return frozenset(m.gpu for m in self.mig)

    @property
    def whole_gpus(self) -> tuple[Gpu, ...]:
        """GPUs offered whole (not split into MIG instances)."""
        return tuple(g for g in self.gpus if g.index not in self.mig_gpus)

    def gpu(self, index: int) -> Gpu:
        for g in self.gpus:
            if g.index == index:
                return g
        raise KeyError(index)

    def scaled(self, nodes: int) -> Profile:
        """The same hardware on ``nodes`` nodes (what ``--nodes`` does)."""
        if not isinstance(nodes, int) or nodes < 1 or nodes > 64:
            raise SandboxError(
                f"--nodes must be a whole number from 1 to 64, not {nodes!r}",
                hint="e.g. `slurmlab sandbox up --profile dgx-h100 --nodes 2`",
            )
        return replace(self, nodes=nodes)


# ---- ranges ------------------------------------------------------------------------------------


def expand_ranges(text: str) -> tuple[int, ...]:
    """``"0-3,8,10-11"`` -> (0, 1, 2, 3, 8, 10, 11). Raises ValueError (ParseError) on anything else."""
    if not text.strip() or any(not part.strip() for part in text.split(",")):
        raise ValueError(f"empty item in range list {text!r}")
    return parse_index_list(text, "range list")


def format_ranges(values: tuple[int, ...] | list[int]) -> str:
    """(0, 1, 2, 3, 8) -> ``"0-3,8"``."""
    return format_cpu_list(values)


# ---- loading -----------------------------------------------------------------------------------


def list_profiles() -> list[str]:
    """Names of the profiles shipped in the package."""
    folder = resources.files("slurmlab.sandbox") / "profiles"
    return sorted(p.name[: -len(".json")] for p in folder.iterdir() if p.name.endswith(".json"))


def load_profile(name: str) -> Profile:
    """The profile called ``name``, or SandboxError listing the known ones."""
    known = list_profiles()
    if name not in known:
        raise SandboxError(
            f"unknown sandbox profile {name!r}",
            hint=f"choose one of: {', '.join(known)} (e.g. `slurmlab sandbox up --profile {known[0]}`)",
        )
    text = (resources.files("slurmlab.sandbox") / "profiles" / f"{name}.json").read_text()
    try:
        data = json.loads(text)
    except json.JSONDecodeError as exc:
        raise SandboxError(f"profile file {name}.json is not valid JSON: {exc}") from exc
    return parse_profile(data, source=f"{name}.json")


class _Fields:
    """Typed access to one JSON object, with errors that name the file and field."""

    def __init__(self, data: Any, where: str) -> None:
        if not isinstance(data, dict):
            raise SandboxError(f"{where}: expected an object, got {type(data).__name__}")
        self.data = data
        self.where = where

    def _fail(self, key: str, want: str) -> SandboxError:
        return SandboxError(f"{self.where}: field {key!r} must be {want}, got {self.data.get(key)!r}")

    def integer(self, key: str, default: int | None = None, minimum: int = 0) -> int:
        value = self.data.get(key, default)
        if isinstance(value, bool) or not isinstance(value, int) or value < minimum:
            raise self._fail(key, f"an integer >= {minimum}")
        return value

    def text(self, key: str, default: str | None = None) -> str:
        value = self.data.get(key, default)
        if not isinstance(value, str) or not value:
            raise self._fail(key, "a non-empty string")
        return value

    def opt_text(self, key: str) -> str | None:
        value = self.data.get(key)
        if value is not None and (not isinstance(value, str) or not value):
            raise self._fail(key, "a non-empty string or null")
        return value

    def items(self, key: str, default: list[Any] | None = None) -> list[Any]:
        value = self.data.get(key, default)
        if not isinstance(value, list):
            raise self._fail(key, "a list")
        return value

    def strings(self, key: str, default: list[str] | None = None) -> tuple[str, ...]:
        value = self.items(key, default)
        if not all(isinstance(v, str) and v for v in value):
            raise self._fail(key, "a list of non-empty strings")
        return tuple(value)


def _parse_gpu(raw: Any, where: str, cpu: CpuLayout) -> Gpu:
    f = _Fields(raw, where)
    cores_text = f.text("cores")
    try:
        cores = expand_ranges(cores_text)
    except ValueError as exc:
        raise SandboxError(f"{where}: field 'cores' {exc}") from exc
    if max(cores) >= cpu.cores:
        raise SandboxError(f"{where}: cores {cores_text!r} exceed the node's {cpu.cores} cores")
    return Gpu(
        index=f.integer("index"),
        model=f.opt_text("model"),
        name=f.text("name"),
        numa=f.integer("numa"),
        cores=cores,
        pci_bus_id=f.text("pci_bus_id"),
        memory_mib=f.integer("memory_mib", minimum=1),
    )


def _parse_mig(raw: Any, where: str, gpu_indices: set[int]) -> MigInstance:
    f = _Fields(raw, where)
    inst = MigInstance(
        gpu=f.integer("gpu"),
        profile=f.text("profile"),
        start=f.integer("start"),
        size=f.integer("size", minimum=1),
    )
    if inst.gpu not in gpu_indices:
        raise SandboxError(f"{where}: MIG instance on GPU {inst.gpu}, which the profile does not have")
    slices = inst.profile.split(".")[0]
    if slices not in _MIG_PLACEMENTS:
        raise SandboxError(f"{where}: MIG profile {inst.profile!r} is not one of 1g/2g/3g/4g/7g.<memory>")
    starts, size = _MIG_PLACEMENTS[slices]
    valid = {(s, size) for s in starts}
    if slices == "1g":
        valid |= {(s, _MIG_1G_DOUBLE[1]) for s in _MIG_1G_DOUBLE[0]}
    if (inst.start, inst.size) not in valid:
        shown = ", ".join(f"{s}:{z}" for s, z in sorted(valid))
        raise SandboxError(
            f"{where}: {inst.profile} cannot be placed at {inst.start}:{inst.size}",
            hint=f"valid placements (start:size in memory slices) are {shown}",
        )
    return inst


def parse_profile(data: Any, *, source: str = "<profile>") -> Profile:
    """Validate the JSON data of a profile and build the frozen model."""
    f = _Fields(data, source)
    cf = _Fields(data.get("cpu"), f"{source}: cpu")
    cpu = CpuLayout(
        sockets=cf.integer("sockets", minimum=1),
        cores_per_socket=cf.integer("cores_per_socket", minimum=1),
        threads_per_core=cf.integer("threads_per_core", 1, minimum=1),
    )
    gpus = tuple(_parse_gpu(g, f"{source}: gpus[{i}]", cpu) for i, g in enumerate(f.items("gpus")))
    indices = [g.index for g in gpus]
    if indices != list(range(len(gpus))):
        raise SandboxError(f"{source}: GPU indices must be 0..{len(gpus) - 1} in order, got {indices}")
    n = len(gpus)
    raw_links = f.items("nvlink", [])
    if raw_links:
        if len(raw_links) != n or any(not isinstance(r, list) or len(r) != n for r in raw_links):
            raise SandboxError(f"{source}: 'nvlink' must be a {n}x{n} matrix of link counts")
        if any(not isinstance(v, int) or isinstance(v, bool) or v < 0 for r in raw_links for v in r):
            raise SandboxError(f"{source}: 'nvlink' counts must be integers >= 0")
        if any(raw_links[i][j] != raw_links[j][i] for i in range(n) for j in range(n)):
            raise SandboxError(
                f"{source}: 'nvlink' must be symmetric (links between i and j = between j and i)"
            )
        nvlink = tuple(tuple(r) for r in raw_links)
    else:
        nvlink = tuple(tuple(0 for _ in range(n)) for _ in range(n))
    mig = tuple(_parse_mig(m, f"{source}: mig[{i}]", set(indices)) for i, m in enumerate(f.items("mig", [])))
    for g in {m.gpu for m in mig}:
        used: set[int] = set()
        for m in (m for m in mig if m.gpu == g):
            span = set(range(m.start, m.start + m.size))
            if used & span:
                raise SandboxError(
                    f"{source}: MIG instances on GPU {g} overlap at memory slices {sorted(used & span)}"
                )
            used |= span
    partitions = []
    for i, raw in enumerate(f.items("partitions")):
        pf = _Fields(raw, f"{source}: partitions[{i}]")
        default = raw.get("default", False)
        if not isinstance(default, bool):
            raise SandboxError(f"{source}: partitions[{i}].default must be true or false")
        partitions.append(Partition(pf.text("name"), default, pf.text("max_time", "INFINITE")))
    if not partitions:
        raise SandboxError(f"{source}: a profile needs at least one partition")
    gres_types = f.strings("gres_types", ["gpu", "shard", "mps"])
    shards = f.integer("shards_per_gpu", 0)
    if shards and "shard" not in gres_types:
        raise SandboxError(f"{source}: shards_per_gpu needs 'shard' in gres_types")
    return Profile(
        name=f.text("name"),
        description=f.text("description"),
        sources=f.strings("sources"),
        nodes=f.integer("nodes", minimum=1),
        node_prefix=f.text("node_prefix", "node"),
        features=f.strings("features", []),
        cpu=cpu,
        memory_mb=f.integer("memory_mb", minimum=1),
        gres_types=gres_types,
        shards_per_gpu=shards,
        gpus=gpus,
        nvlink=nvlink,
        mig=mig,
        partitions=tuple(partitions),
    )
