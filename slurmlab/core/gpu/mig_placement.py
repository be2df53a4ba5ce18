"""Placements inferred for MIG instances a listing shows without one (``nvidia-smi mig -lgi`` of some drivers, a
spec of profile names): largest first, each at the highest free allowed start, backtracking when the rest would
not fit. This reproduces the placements NVIDIA's driver printed in the captured ``-lgi`` tables."""

from __future__ import annotations

from dataclasses import replace

from slurmlab.core.gpu.mig_instances import GpuInstance, GpuMig
from slurmlab.core.gpu.mig_tables import MigProfile, MigProfileTable
from slurmlab.errors import RequestError

__all__ = ["infer_placements"]


def infer_placements(g: GpuMig, table: MigProfileTable) -> GpuMig:
    """``g`` with a placement, marked inferred, for each instance that has none and fits."""
    used = frozenset(s for i in g.instances for s in i.memory_slices)
    placed = [i for i in g.instances if i.start is not None]
    listing = [i for i in g.instances if i.start is None]
    unplaced = sorted(listing, key=lambda i: -i.compute_slices)
    options: list[tuple[GpuInstance, MigProfile | None]] = []
    for inst in unplaced:
        try:
            options.append((inst, table.profile(inst.profile)))
        except RequestError:
            options.append((inst, None))
    need = sum(i.compute_slices for i in g.instances)
    fitted = _fit(options, used) if need <= table.compute_slices else None
    if fitted is None:  # no arrangement fits: place what fits greedily, leave the rest unplaced
        fitted = _greedy(options, used)
    return replace(g, instances=tuple(placed + _in_listing_order(listing, fitted)))


def _greedy(options: list[tuple[GpuInstance, MigProfile | None]], used: frozenset[int]) -> list[GpuInstance]:
    """Each instance at the highest free allowed start, in turn, without backtracking; unplaced where none is."""
    fitted = []
    taken = set(used)
    for inst, prof in options:
        for start in sorted(prof.starts, reverse=True) if prof else ():
            span = set(range(start, start + prof.memory_slices)) if prof else set()
            if prof and not span & taken:
                taken |= span
                inst = replace(inst, start=start, size=prof.memory_slices, placement_inferred=True)
                break
        fitted.append(inst)
    return fitted


def _fit(
    options: list[tuple[GpuInstance, MigProfile | None]], used: frozenset[int]
) -> list[GpuInstance] | None:
    """Depth-first: a placement for every instance (highest start first), or None when none exists."""
    if not options:
        return []
    (inst, prof), rest = options[0], options[1:]
    if prof is None:
        tail = _fit(rest, used)
        return None if tail is None else [inst, *tail]
    for start in sorted(prof.starts, reverse=True):
        span = frozenset(range(start, start + prof.memory_slices))
        if span & used:
            continue
        tail = _fit(rest, used | span)
        if tail is not None:
            return [replace(inst, start=start, size=prof.memory_slices, placement_inferred=True), *tail]
    return None


def _in_listing_order(listing: list[GpuInstance], fitted: list[GpuInstance]) -> list[GpuInstance]:
    """Among instances of one profile, hand the lower starts to the earlier-listed ones (stable pictures)."""
    spots: dict[str, list[tuple[int | None, int | None]]] = {}
    for inst in fitted:
        spots.setdefault(inst.profile, []).append((inst.start, inst.size))
    for found in spots.values():
        found.sort(key=lambda p: 99 if p[0] is None else p[0])
    out = []
    for inst in listing:
        start, size = spots[inst.profile].pop(0)
        out.append(replace(inst, start=start, size=size, placement_inferred=start is not None))
    return out
