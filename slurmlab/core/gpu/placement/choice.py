"""The best-connected set of N GPUs in a :class:`~slurmlab.core.gpu.topology.Topology`, and why.

Order of preference: every pair joined by NVLink, then the most bonded NVLinks in total, then the weakest pair
as strong as possible, then all GPUs on one NUMA node (so the job's CPUs and memory are local), then the
closest PCIe paths for pairs without NVLink, then the lowest indices (stable answers). On an NVSwitch fabric
every set of GPUs has the same links, so there the NUMA node decides.

GPUs that other jobs hold (``taken=``, e.g. from ``GresUsed=gpu:h100:3(IDX:0,2-3)`` of ``scontrol show node
-d``) are left out, and the choice says what they cost against the best set of an idle node
(:mod:`.loss`).
"""

from __future__ import annotations

import dataclasses
import itertools
import math
from collections.abc import Iterable
from dataclasses import dataclass

from slurmlab.core.gpu.devices import format_cpu_list
from slurmlab.core.gpu.links import LinkKind
from slurmlab.core.gpu.placement.loss import is_switched, links_phrase, what_is_lost
from slurmlab.core.gpu.topology import Topology
from slurmlab.errors import RequestError

__all__ = ["GpuChoice", "best_gpus"]

_EXHAUSTIVE_LIMIT = 50_000  # subsets scored exhaustively (about a second); beyond that grow greedily


@dataclass(frozen=True)
class GpuChoice:
    """The chosen GPUs, how they connect, and (when some GPUs were taken) what that cost."""

    gpus: tuple[int, ...]
    nvlink_total: int  # bonded NVLinks summed over chosen pairs (on an NVSwitch fabric: what topo -m shows)
    weakest_pair: str  # e.g. "NV12" or "SYS"
    all_nvlink: bool
    numa_groups: tuple[str, ...]
    weakest_pair_gbps: float | None  # one-direction NVLink bandwidth of the weakest chosen pair, if known
    reasons: tuple[str, ...]
    exhaustive: bool
    switched: bool = False  # the GPUs reach each other through an NVSwitch fabric
    taken: tuple[int, ...] = ()  # GPUs held by others, left out of the choice
    ideal: GpuChoice | None = None  # the best set had nothing been taken (only when ``taken`` is given)
    lost: str = ""  # what the taken GPUs cost, in words ("" when nothing was taken)

    def explain(self) -> str:
        text = f"GPUs {', '.join(map(str, self.gpus))}: " + "; ".join(self.reasons)
        return f"{text}.\n{self.lost}" if self.lost else text

    @property
    def gpu_list(self) -> str:
        """The chosen GPUs in Slurm's compact form (``4-7``)."""
        return format_cpu_list(self.gpus)


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
        # usable links per pair as the fabric judges them: on an NVSwitch the lesser of the two GPUs' links (a
        # GPU with inactive links counts less), not the NV# topo -m repeats for every peer
        fabric = topo.fabric()
        for a, b in itertools.combinations(idx, 2):
            link = topo.link(a, b)
            usable = fabric.pair_link_count(a, b) if link is not None and link.is_nvlink else 0
            for key in ((a, b), (b, a)):
                nv[key] = usable
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


def link_score(topo: Topology, gpus: Iterable[int]) -> tuple[int, int, int]:
    """How well a set is linked (all NVLink, NVLinks summed, weakest pair): equal means "same links"."""
    return _score(_Tables.of(topo), tuple(sorted(gpus)))[:3]


def _as_topology(topo: object) -> Topology:
    # a NodeTopology (what slurmlab.topology() and alloc.topology() return) carries the Topology
    inner = getattr(topo, "topology", topo)
    if not isinstance(inner, Topology):
        raise TypeError(f"best_gpus needs a Topology or NodeTopology, not {type(topo).__name__}")
    return inner


def best_gpus(
    topo: Topology | object, n: int, *, available: Iterable[int] | None = None, taken: Iterable[int] = ()
) -> GpuChoice:
    """Choose ``n`` GPUs that are best connected; see the module doc.

    ``available``: the GPUs to choose from (default all); ``taken``: GPUs other jobs hold (Slurm's IDX as
    topology indices), left out; the answer then says what they cost (:attr:`GpuChoice.lost`).
    ``topo`` is a :class:`Topology` or what ``slurmlab.topology()`` and ``alloc.topology(node)`` return.
    """
    topo = _as_topology(topo)
    known = {g.index for g in topo.gpus}
    base = sorted(set(available) if available is not None else known)
    unknown = [i for i in base if i not in known]
    if unknown:
        raise RequestError(f"GPUs {unknown} are not in this topology (it has {sorted(known)})")
    held = sorted(set(taken))
    stray = [i for i in held if i not in known]
    if stray:
        raise RequestError(
            f"taken GPU{'s' if len(stray) > 1 else ''} {format_cpu_list(stray)} "
            f"{'are' if len(stray) > 1 else 'is'} not in this topology (it has {format_cpu_list(known)})",
            hint="give the taken GPUs as indices of this topology; is the topology that of the node Slurm "
            "reported on?",
        )
    pool = [i for i in base if i not in held]
    if n < 1:
        raise RequestError(f"cannot choose {n} GPUs: ask for at least 1", hint="e.g. --best 2")
    if n > len(pool):
        message, hint = _too_many(n, base, pool, held)
        raise RequestError(message, hint=hint)
    tables = _Tables.of(topo)
    choice = _choose(topo, tables, pool, n, all_gpus=len(base) == len(known))
    if not held:
        return choice
    ideal = _choose(topo, tables, base, n, all_gpus=len(base) == len(known))
    lost = what_is_lost(
        topo,
        ideal.gpus,
        choice.gpus,
        held,
        same_links=link_score(topo, ideal.gpus) == link_score(topo, choice.gpus),
    )
    return dataclasses.replace(choice, taken=tuple(held), ideal=ideal, lost=lost)


def _too_many(n: int, base: list[int], pool: list[int], held: list[int]) -> tuple[str, str]:
    if not held:
        return (
            f"cannot choose {n} GPUs from {len(pool)} available ({pool})",
            f"ask for {len(pool)} or fewer" if pool else "there are no GPUs to choose from",
        )
    free = f"free: {format_cpu_list(pool)}" if pool else "none is free"
    return (
        f"cannot choose {n} GPUs: only {len(pool)} of the {len(base)} are free "
        f"(taken: {format_cpu_list(held)}; {free})",
        (f"ask for {len(pool)} or fewer, " if pool else "") + "wait for the jobs holding them to end, "
        "or choose another node",
    )


def _choose(topo: Topology, tables: _Tables, pool: list[int], n: int, *, all_gpus: bool) -> GpuChoice:
    exhaustive = math.comb(len(pool), n) <= _EXHAUSTIVE_LIMIT
    if exhaustive:
        best = max(itertools.combinations(pool, n), key=lambda c: _score(tables, c))
    else:
        best = _greedy(tables, pool, n)
    return _describe(topo, tuple(sorted(best)), pool, exhaustive, all_gpus=all_gpus)


def _greedy(t: _Tables, pool: list[int], n: int) -> tuple[int, ...]:
    chosen: list[int] = []
    start = max(itertools.combinations(pool, 2), key=lambda c: _score(t, c)) if n >= 2 else (pool[0],)
    chosen.extend(start)
    while len(chosen) < n:
        rest = [i for i in pool if i not in chosen]
        nxt = max(rest, key=lambda i: _score(t, (*chosen, i)))
        chosen.append(nxt)
    return tuple(chosen)


def _describe(
    topo: Topology, combo: tuple[int, ...], pool: list[int], exhaustive: bool, *, all_gpus: bool
) -> GpuChoice:
    pairs = list(itertools.combinations(combo, 2))
    nv = [topo.nvlinks(a, b) for a, b in pairs]
    groups = tuple(sorted({topo.gpu(i).numa_label for i in combo}))
    switched = is_switched(topo)
    reasons: list[str] = []
    weakest_label = "-"
    if pairs:
        links = [topo.link(a, b) for a, b in pairs]
        # weakest = the worst kind; among NVLinks, the fewest bonded links
        ranked = sorted((lk for lk in links if lk is not None), key=lambda lk: (lk.kind.rank, -lk.nvlinks))
        weakest_link = ranked[-1] if ranked else None
        weakest_label = weakest_link.short if weakest_link is not None else "?"
        if all(x > 0 for x in nv) and switched:
            # a switched fabric: each GPU's links go to the switches, so NV# is per GPU, not per cable
            reasons.append(
                f"every pair is joined by NVLink through the NVSwitch fabric ({links_phrase(topo, combo)}"
                "; any set of GPUs has the same links)"
            )
        elif all(x > 0 for x in nv):
            reasons.append(
                f"every pair is joined by NVLink ({sum(nv)} bonded links in total, weakest {weakest_label})"
            )
        elif any(nv):
            reasons.append(
                f"{sum(1 for x in nv if x)} of {len(pairs)} pairs use NVLink ({sum(nv)} links); "
                f"the rest go over {weakest_label}"
            )
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
        why = (
            f"no NUMA group holds {len(combo)} available GPUs"
            if max(sizes.values()) < len(combo)
            else "staying on one NUMA group would cost NVLink connectivity"
        )
        reasons.append(f"spans {len(groups)} NUMA groups ({', '.join(groups)}): {why}")
    fabric = topo.fabric()
    gen = fabric.generation or topo.nvlink_generation
    name = gen.name if gen is not None else "NVLink"
    pair_gbps = [fabric.pair_gbps(a, b) for a, b in pairs]
    known = [x for x in pair_gbps if x is not None]
    weakest_gbps: float | None = None
    if known and len(known) == len(pairs):
        weakest_gbps = min(known)
        if switched:
            reasons.append(
                f"{name}: {weakest_gbps:g} GB/s per direction from each GPU, to any peer "
                "(shared by its peers, not added up over pairs)"
            )
        elif max(known) == weakest_gbps:
            reasons.append(f"{name}: {weakest_gbps:g} GB/s per direction between each pair")
        else:
            reasons.append(f"{name}: {weakest_gbps:g}–{max(known):g} GB/s per direction between pairs")
    elif known:
        reasons.append(
            f"{name}: up to {max(known):g} GB/s per direction between NVLink pairs; the others go over PCIe"
        )
    if not exhaustive:
        reasons.append("chosen greedily (too many combinations to compare all)")
    if not all_gpus:
        reasons.append(f"chosen among the available GPUs {pool}")
    return GpuChoice(
        combo,
        sum(nv),
        weakest_label,
        bool(pairs) and all(x > 0 for x in nv),
        groups,
        weakest_gbps,
        tuple(reasons),
        exhaustive,
        switched,
    )
