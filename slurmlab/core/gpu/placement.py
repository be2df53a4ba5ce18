"""The best-connected set of N GPUs in a :class:`~slurmlab.core.gpu.topology.Topology`, and why.

Order of preference: every pair joined by NVLink, then the most bonded NVLinks in total, then the weakest pair
as strong as possible, then all GPUs on one NUMA node (so the job's CPUs and memory are local), then the
closest PCIe paths for pairs without NVLink, then the lowest indices (stable answers).
"""

from __future__ import annotations

import itertools
import math
from collections.abc import Iterable
from dataclasses import dataclass

from slurmlab.core.gpu.topology import LinkKind, Topology
from slurmlab.errors import RequestError

__all__ = ["GpuChoice", "best_gpus"]

_EXHAUSTIVE_LIMIT = 50_000  # subsets scored exhaustively (about a second); beyond that grow greedily


@dataclass(frozen=True)
class GpuChoice:
    gpus: tuple[int, ...]
    nvlink_total: int  # bonded NVLinks summed over chosen pairs
    weakest_pair: str  # e.g. "NV12" or "SYS"
    all_nvlink: bool
    numa_groups: tuple[str, ...]
    bandwidth_gbps: float | None  # summed one-direction NVLink bandwidth between chosen pairs, if known
    reasons: tuple[str, ...]
    exhaustive: bool

    def explain(self) -> str:
        return f"GPUs {', '.join(map(str, self.gpus))}: " + "; ".join(self.reasons)


@dataclass(frozen=True)
class _Tables:
    """Pairwise NVLink counts, PCIe ranks and NUMA labels looked up once, so scoring stays cheap."""

    nv: dict[tuple[int, int], int]
    rank: dict[tuple[int, int], int]
    group: dict[int, str]

    @classmethod
    def of(cls, topo: Topology) -> _Tables:
        nv: dict[tuple[int, int], int] = {}
        rank: dict[tuple[int, int], int] = {}
        idx = [g.index for g in topo.gpus]
        for a, b in itertools.combinations(idx, 2):
            link = topo.link(a, b)
            for key in ((a, b), (b, a)):
                nv[key] = link.nvlinks if link is not None else 0
                rank[key] = link.kind.rank if link is not None else len(LinkKind)
        return cls(nv, rank, {g.index: g.numa_label for g in topo.gpus})


def _score(t: _Tables, combo: tuple[int, ...]) -> tuple[int, int, int, int, int, tuple[int, ...]]:
    pairs = list(itertools.combinations(combo, 2))
    nv = [t.nv[p] for p in pairs]
    all_nv = int(all(n > 0 for n in nv))
    weakest = min(nv) if nv else 0
    groups = {t.group[i] for i in combo}
    pcie = sum(t.rank[p] for p in pairs)
    # bigger is better for every component (negate the ones to minimise)
    return (all_nv, sum(nv), weakest, -len(groups), -pcie, tuple(-i for i in combo))


def best_gpus(topo: Topology, n: int, *, available: Iterable[int] | None = None) -> GpuChoice:
    """Choose ``n`` GPUs (from ``available``, default all) that are best connected; see the module doc."""
    pool = sorted(set(available) if available is not None else {g.index for g in topo.gpus})
    known = {g.index for g in topo.gpus}
    unknown = [i for i in pool if i not in known]
    if unknown:
        raise RequestError(f"GPUs {unknown} are not in this topology (it has {sorted(known)})")
    if n < 1 or n > len(pool):
        raise RequestError(f"cannot choose {n} GPUs from {len(pool)} available ({pool})")
    tables = _Tables.of(topo)
    exhaustive = math.comb(len(pool), n) <= _EXHAUSTIVE_LIMIT
    if exhaustive:
        best = max(itertools.combinations(pool, n), key=lambda c: _score(tables, c))
    else:
        best = _greedy(tables, pool, n)
    return _describe(topo, tuple(sorted(best)), pool, exhaustive)


def _greedy(t: _Tables, pool: list[int], n: int) -> tuple[int, ...]:
    chosen: list[int] = []
    start = max(itertools.combinations(pool, 2), key=lambda c: _score(t, c)) if n >= 2 else (pool[0],)
    chosen.extend(start)
    while len(chosen) < n:
        rest = [i for i in pool if i not in chosen]
        nxt = max(rest, key=lambda i: _score(t, (*chosen, i)))
        chosen.append(nxt)
    return tuple(chosen)


def _describe(topo: Topology, combo: tuple[int, ...], pool: list[int], exhaustive: bool) -> GpuChoice:
    pairs = list(itertools.combinations(combo, 2))
    nv = [topo.nvlinks(a, b) for a, b in pairs]
    groups = tuple(sorted({topo.gpu(i).numa_label for i in combo}))
    reasons: list[str] = []
    weakest_label = "-"
    if pairs:
        links = [topo.link(a, b) for a, b in pairs]
        # weakest = the worst kind; among NVLinks, the fewest bonded links
        ranked = sorted((lk for lk in links if lk is not None), key=lambda lk: (lk.kind.rank, -lk.nvlinks))
        weakest_link = ranked[-1] if ranked else None
        weakest_label = weakest_link.short if weakest_link is not None else "?"
        if all(x > 0 for x in nv):
            reasons.append(f"every pair is joined by NVLink ({sum(nv)} bonded links in total, weakest "
                           f"{weakest_label})")
        elif any(nv):
            reasons.append(f"{sum(1 for x in nv if x)} of {len(pairs)} pairs use NVLink ({sum(nv)} links); "
                           f"the rest go over {weakest_label}")
        else:
            reasons.append(f"no NVLink between these GPUs; the weakest path is {weakest_label}")
    else:
        reasons.append("a single GPU needs no peer links")
    if len(groups) == 1:
        reasons.append(f"all on {groups[0]}")
    else:
        sizes: dict[str, int] = {}
        for i in pool:
            label = topo.gpu(i).numa_label
            sizes[label] = sizes.get(label, 0) + 1
        why = (f"no NUMA group holds {len(combo)} available GPUs" if max(sizes.values()) < len(combo)
               else "staying on one NUMA group would cost NVLink connectivity")
        reasons.append(f"spans {len(groups)} NUMA groups ({', '.join(groups)}): {why}")
    bandwidth: float | None = None
    if topo.nvlink_generation is not None and any(nv):
        bandwidth = sum(topo.nvlink_generation.bandwidth_gbps(x) for x in nv)
        reasons.append(f"{topo.nvlink_generation.name}: {bandwidth:g} GB/s per direction summed over pairs")
    if not exhaustive:
        reasons.append("chosen greedily (too many combinations to compare all)")
    if len(pool) < len(topo.gpus):
        reasons.append(f"chosen among the available GPUs {pool}")
    return GpuChoice(combo, sum(nv), weakest_label, bool(pairs) and all(x > 0 for x in nv), groups, bandwidth,
                     tuple(reasons), exhaustive)
