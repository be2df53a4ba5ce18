"""A small, pure model of what a cluster offers, for checking a request before it is submitted.

The Slurm layer builds it from parsed ``sinfo``/``scontrol`` output; tests and teachers build it by hand::

    node = NodeInventory("node1", cpus=48, memory_mb=64000, sockets=2, gpus={"h100": 4}, shards=16,
                         features=("h100", "nvlink"))
    mig = NodeInventory("node3", cpus=32, memory_mb=32000, sockets=2, gpus={"1g.18gb": 4, "3g.71gb": 1})
    cluster = ClusterInventory.build(
        nodes=[node, ..., mig],
        partitions={"gpu": ["node1", "node2"], "mig": ["node3"], "all": ["node1", "node2", "node3"]},
        default="gpu",
        max_time={"mig": 86400},  # seconds; partitions not named have no limit
    )

``gpus`` maps GPU type to count per node; untyped GPUs (``Gres=gpu:4``) use the type ``""``. MIG instances
are GPU types named after their profile, as Slurm shows them. ``shards`` and ``mps`` are per-node counts of
those shared GRES; ``gres`` holds any other GRES (``{"fpga": 1}``).
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from types import MappingProxyType

from slurmlab.errors import RequestError

__all__ = ["ClusterInventory", "NodeInventory", "PartitionInventory"]


def _frozen(mapping: Mapping[str, int]) -> Mapping[str, int]:
    return MappingProxyType(dict(mapping))


@dataclass(frozen=True)
class NodeInventory:
    """One node: CPUs, memory (MiB, Slurm's RealMemory), sockets, GPUs by type, shared GRES, features."""

    name: str
    cpus: int
    memory_mb: int
    sockets: int = 1
    gpus: Mapping[str, int] = field(default_factory=dict)
    shards: int = 0
    mps: int = 0
    features: tuple[str, ...] = ()
    gres: Mapping[str, int] = field(default_factory=dict)

    def __post_init__(self) -> None:
        # read-only views so a frozen inventory cannot be changed through its mappings
        object.__setattr__(self, "gpus", _frozen(self.gpus))
        object.__setattr__(self, "gres", _frozen(self.gres))
        object.__setattr__(self, "features", tuple(self.features))

    def gpu_count(self, gpu_type: str | None = None) -> int:
        """GPUs of ``gpu_type`` on this node, or of any type when None."""
        if gpu_type is None:
            return sum(self.gpus.values())
        return self.gpus.get(gpu_type, 0)

    def gres_count(self, name: str, gres_type: str | None = None) -> int:
        """Count of a GRES by name (``gpu``, ``shard``, ``mps`` or other), optionally of one type."""
        if name == "gpu":
            return self.gpu_count(gres_type)
        if name in ("shard", "mps"):
            total = self.shards if name == "shard" else self.mps
            # shared GRES are typed by the GPU they sit on
            return total if gres_type is None or gres_type in self.gpus else 0
        return self.gres.get(name, 0) if gres_type is None else 0

    @property
    def gres_names(self) -> frozenset[str]:
        names = {n for n, c in self.gres.items() if c}
        if self.gpu_count():
            names.add("gpu")
        if self.shards:
            names.add("shard")
        if self.mps:
            names.add("mps")
        return frozenset(names)


@dataclass(frozen=True)
class PartitionInventory:
    """A partition: its nodes, whether it is the default, and its MaxTime in seconds (None = INFINITE)."""

    name: str
    nodes: tuple[NodeInventory, ...]
    default: bool = False
    max_time_s: int | None = None

    @property
    def node_names(self) -> tuple[str, ...]:
        return tuple(n.name for n in self.nodes)

    @property
    def gpu_types(self) -> tuple[str, ...]:
        return tuple(sorted({t for n in self.nodes for t, c in n.gpus.items() if c}))

    @property
    def gres_names(self) -> tuple[str, ...]:
        return tuple(sorted({g for n in self.nodes for g in n.gres_names}))

    @property
    def features(self) -> tuple[str, ...]:
        return tuple(sorted({f for n in self.nodes for f in n.features}))

    def most_per_node(self, name: str, gres_type: str | None = None) -> int:
        return max((n.gres_count(name, gres_type) for n in self.nodes), default=0)

    def nodes_with_most(self, name: str, gres_type: str | None = None) -> tuple[str, ...]:
        most = self.most_per_node(name, gres_type)
        return tuple(n.name for n in self.nodes if most and n.gres_count(name, gres_type) == most)

    def total(self, name: str, gres_type: str | None = None) -> int:
        return sum(n.gres_count(name, gres_type) for n in self.nodes)

    @property
    def most_cpus(self) -> int:
        return max((n.cpus for n in self.nodes), default=0)

    @property
    def most_memory_mb(self) -> int:
        return max((n.memory_mb for n in self.nodes), default=0)


@dataclass(frozen=True)
class ClusterInventory:
    """Partitions of one cluster; ``default_partition`` is the one marked ``Default=YES``."""

    partitions: tuple[PartitionInventory, ...]
    name: str = ""

    @classmethod
    def build(
        cls,
        *,
        nodes: Iterable[NodeInventory],
        partitions: Mapping[str, Sequence[str]],
        default: str | None = None,
        max_time: Mapping[str, int] | None = None,
        name: str = "",
    ) -> ClusterInventory:
        """Build from plain values: nodes, partition name -> node names, the default partition, MaxTime (s)."""
        by_name = {n.name: n for n in nodes}
        limits = dict(max_time or {})
        built = []
        for part, members in partitions.items():
            missing = [m for m in members if m not in by_name]
            if missing:
                raise RequestError(
                    f"partition {part!r} lists nodes not in the inventory: {', '.join(missing)}",
                    hint="pass a NodeInventory for every node a partition names",
                )
            built.append(
                PartitionInventory(
                    part, tuple(by_name[m] for m in members), part == default, limits.get(part)
                )
            )
        if default is not None and default not in partitions:
            raise RequestError(
                f"default partition {default!r} is not one of the partitions: {', '.join(partitions)}",
                hint="name one of the partitions as the default, or None",
            )
        return cls(tuple(built), name)

    @property
    def partition_names(self) -> tuple[str, ...]:
        return tuple(p.name for p in self.partitions)

    @property
    def default_partition(self) -> PartitionInventory | None:
        return next((p for p in self.partitions if p.default), None)

    def partition(self, name: str) -> PartitionInventory | None:
        return next((p for p in self.partitions if p.name == name), None)

    @property
    def gres_names(self) -> tuple[str, ...]:
        return tuple(sorted({g for p in self.partitions for g in p.gres_names}))

    def partitions_with_gpu_type(self, gpu_type: str) -> tuple[str, ...]:
        return tuple(p.name for p in self.partitions if gpu_type in p.gpu_types)

    def partitions_with_gres(self, name: str) -> tuple[str, ...]:
        return tuple(p.name for p in self.partitions if name in p.gres_names)
