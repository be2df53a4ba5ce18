"""A set of GPUs in a few words, and what the GPUs other jobs hold cost a placement, in words.

    "The best 4 would be 0-3 (NUMA 0, NV18 each); 0,2-3 are taken, so 4-7: same links, another NUMA node
     (NUMA 1 instead of NUMA 0)."
    "The best 4 would be 0-3 (...); 0 is taken. No free set of 4 shares NVLink: 1,4-6 — pairs 1-4, 1-5, 1-6 go
     over SYS."

Pure: reads a :class:`~slurmlab.core.gpu.topology.Topology` only.
"""

from __future__ import annotations

import itertools
from collections.abc import Sequence

from slurmlab.core.gpu.devices import format_cpu_list
from slurmlab.core.gpu.topology import Topology

__all__ = ["is_switched", "links_phrase", "numa_phrase", "set_phrase", "what_is_lost"]

_PAIRS_LISTED = 6  # non-NVLink pairs named before "…"


def is_switched(topo: Topology) -> bool:
    """True when the GPUs reach each other through an NVSwitch fabric (judged by
    :mod:`slurmlab.core.gpu.nvlink.fabric`): then ``topo -m`` shows each GPU's whole link count towards every peer,
    and every set of GPUs is linked alike."""
    return topo.fabric().switched


def links_phrase(topo: Topology, gpus: Sequence[int]) -> str:
    """How the GPUs of a set connect: ``NV18 each``, ``NV2 between every pair``, ``NVLink on 3 of 6 pairs``."""
    pairs = list(itertools.combinations(sorted(gpus), 2))
    if not pairs:
        return "a single GPU"
    nv = [topo.nvlinks(a, b) for a, b in pairs]
    if all(nv):
        if is_switched(topo):
            return f"NV{min(nv)} each"
        if min(nv) == max(nv):
            return f"NV{min(nv)} between every pair"
        return f"NVLink between every pair, weakest NV{min(nv)}"
    if any(nv):
        return f"NVLink on {sum(1 for x in nv if x)} of {len(pairs)} pairs"
    return f"no NVLink, weakest path {_weakest_path(topo, pairs)}"


def numa_phrase(topo: Topology, gpus: Sequence[int]) -> str:
    groups = sorted({topo.gpu(i).numa_label for i in gpus})
    return groups[0] if len(groups) == 1 else f"{len(groups)} NUMA groups"


def set_phrase(topo: Topology, gpus: Sequence[int]) -> str:
    """``NUMA 0, NV18 each``: where a set sits and how it is linked."""
    return f"{numa_phrase(topo, gpus)}, {links_phrase(topo, gpus)}"


def _weakest_path(topo: Topology, pairs: Sequence[tuple[int, int]]) -> str:
    links = [lk for lk in (topo.link(a, b) for a, b in pairs) if lk is not None]
    if not links:
        return "?"
    return max(links, key=lambda lk: (lk.kind.rank, -lk.nvlinks)).short


def _non_nvlink_pairs(topo: Topology, gpus: Sequence[int]) -> str:
    """``pairs 1-4, 1-5 go over SYS; 4-5 over NODE``: the pairs of a set that have no NVLink, by path."""
    by_path: dict[str, list[str]] = {}
    for a, b in itertools.combinations(sorted(gpus), 2):
        if topo.nvlinks(a, b):
            continue
        link = topo.link(a, b)
        by_path.setdefault(link.short if link is not None else "an unknown path", []).append(f"{a}-{b}")
    parts = []
    for path, names in sorted(by_path.items()):
        shown = ", ".join(names[:_PAIRS_LISTED]) + (
            f" and {len(names) - _PAIRS_LISTED} more" if len(names) > _PAIRS_LISTED else ""
        )
        parts.append(f"{shown} over {path}")
    text = "; ".join(parts)
    return f"pair{'s' if sum(len(v) for v in by_path.values()) > 1 else ''} {text.replace(' over ', ' go over ', 1)}"


def _gpus(items: Sequence[int]) -> str:
    return f"GPU{'' if len(items) == 1 else 's'} {format_cpu_list(items)}"


def _is_are(items: Sequence[int]) -> str:
    return "is" if len(items) == 1 else "are"


def what_is_lost(
    topo: Topology, ideal: Sequence[int], chosen: Sequence[int], taken: Sequence[int], *, same_links: bool
) -> str:
    """One sentence: the best set of an idle node, which of it is taken, and how the free choice differs.

    ``same_links``: the free choice is linked as well as the best set (the caller scores both the same way).
    """
    n = len(chosen)
    best, got = format_cpu_list(ideal), format_cpu_list(chosen)
    if set(ideal) == set(chosen):
        return (
            f"{_gpus(taken)} {_is_are(taken)} taken, but the best {n} ({best}: "
            f"{set_phrase(topo, ideal)}) are free: nothing lost."
        )
    hit = sorted(set(ideal) & set(taken))
    head = f"The best {n} would be {best} ({set_phrase(topo, ideal)}); {format_cpu_list(hit)} {_is_are(hit)} taken"
    ideal_nv = n > 1 and all(topo.nvlinks(a, b) for a, b in itertools.combinations(ideal, 2))
    got_nv = all(topo.nvlinks(a, b) for a, b in itertools.combinations(chosen, 2))
    if ideal_nv and not got_nv:
        return f"{head}. No free set of {n} shares NVLink: {got} — {_non_nvlink_pairs(topo, chosen)}."
    parts = [
        "same links"
        if same_links
        else f"weaker links ({links_phrase(topo, chosen)}, where the best has {links_phrase(topo, ideal)})"
    ]
    was = sorted({topo.gpu(i).numa_label for i in ideal})
    now = sorted({topo.gpu(i).numa_label for i in chosen})
    if same_links and now == was:
        where = "same NUMA node" if len(now) == 1 else f"the same {len(now)} NUMA groups"
        return f"{head}, so {got}: just as good (same links, {where})."
    if now == was:
        parts.append("same NUMA node" if len(now) == 1 else f"the same {len(now)} NUMA groups")
    elif len(now) == 1 and len(was) == 1:
        # labels are "NUMA 1", or the CPU list where the capture gives no NUMA node
        other = "another NUMA node" if now[0].startswith("NUMA") else "other CPUs"
        parts.append(f"{other} ({now[0]} instead of {was[0]})")
    elif len(now) > len(was):
        parts.append(
            f"spread over {len(now)} NUMA groups where the best sits on "
            f"{'one' if len(was) == 1 else len(was)}"
        )
    else:
        parts.append(f"on {', '.join(now)} instead of {', '.join(was)}")
    return f"{head}, so {got}: {', '.join(parts)}."
