"""What a job holds on one node (:class:`GresAlloc`): GPU indices, typed GPUs (MIG slices among them), shards
per GPU, MPS share, and its CPU_IDs and memory there."""

from __future__ import annotations

from dataclasses import dataclass

from slurmlab.core.jsontypes import JSONObject
from slurmlab.core.slurm.gres import GresItem

__all__ = ["GresAlloc"]


@dataclass(frozen=True)
class GresAlloc:
    """What one job holds on one node, from a ``gres_detail`` / ``GRES=`` string."""

    node: str
    items: tuple[GresItem, ...]
    cpu_ids: str | None = None
    mem_mb: int | None = None

    @property
    def gpu_indices(self) -> tuple[int, ...]:
        """Global indices of whole GPUs held (MIG instances count as GPUs of their type)."""
        out: list[int] = []
        for g in self.items:
            if g.name == "gpu" and g.indices:
                out.extend(g.indices)
        return tuple(out)

    @property
    def gpu_types(self) -> dict[str, tuple[int, ...]]:
        """type -> indices held (``1g.18gb`` for a MIG slice); untyped GPUs under ''."""
        out: dict[str, list[int]] = {}
        for g in self.items:
            if g.name == "gpu":
                out.setdefault(g.type or "", []).extend(g.indices or ())
        return {k: tuple(v) for k, v in out.items()}

    def shares(self, name: str = "shard") -> dict[int, int | None]:
        """GPU index -> count of ``name`` (shard/mps) held on it.

        24.11+ lists used/total per GPU; 22.05 gives ``shard:h100:4(IDX:3)``: the whole count
        sits on the one listed GPU (with several GPUs listed the split is unknown: None)."""
        out: dict[int, int | None] = {}
        for g in self.items:
            if g.name != name:
                continue
            if g.shares is not None:
                for s in g.shares:
                    if s.used:
                        out[s.index] = s.used
            elif g.indices:
                if len(g.indices) == 1:
                    out[g.indices[0]] = g.count
                else:
                    for i in g.indices:
                        out[i] = None
        return out

    @property
    def shard_count(self) -> int:
        return sum(g.count or 0 for g in self.items if g.name == "shard")

    @property
    def mps_count(self) -> int:
        return sum(g.count or 0 for g in self.items if g.name == "mps")

    def to_dict(self) -> JSONObject:
        return {
            "node": self.node,
            "gres": [g.to_dict() for g in self.items],
            "gpu_indices": list(self.gpu_indices),
            "gpu_types": {k: list(v) for k, v in self.gpu_types.items()},
            "shards": {str(k): v for k, v in self.shares("shard").items()},
            "mps": self.mps_count,
            "cpu_ids": self.cpu_ids,
            "mem_mb": self.mem_mb,
        }
