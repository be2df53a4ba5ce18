"""Where MIG instances sit and where more can go.

- Placements inferred for instances a listing shows without one (``nvidia-smi -L``, a ``-cgi`` log, a spec of
  profile names): largest first, each at the highest free allowed start, backtracking when the rest would not
  fit. This reproduces the placements NVIDIA's driver printed in the captured ``-lgi`` tables.
- The room left on a GPU (:func:`room_left`): per profile, how many more instances fit and at which free starts,
  derived from the profile geometry the way ``nvidia-smi mig -lgip`` counts "Free".
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass, replace

from slurmlab.core.gpu.mig.instances import GpuInstance, GpuMig
from slurmlab.core.gpu.mig.tables import MigProfile, MigProfileTable
from slurmlab.errors import RequestError

__all__ = [
    "MigCatalogue",
    "ProfileRoom",
    "infer_placements",
    "layouts_with_room",
    "room_left",
    "room_sentence",
]


@dataclass(frozen=True)
class ProfileRoom:
    """One profile's row of the catalogue of what can still be carved on a GPU (what ``-lgip`` prints, and the
    ``-lgipp`` placements with the ones still free).

    ``free``: instances of this profile that could still be created, each count alone (profiles compete for
    the same slices). ``free_starts``: the placement starts an instance could take now; None when unknown
    (an ``-lgip``/``-lgipp`` capture without a layout). ``memory_gib``/``sm`` come from ``-lgip`` when given.
    """

    gpu: int
    profile: str
    profile_id: int | None
    free: int | None
    total: int | None
    size: int | None  # memory slices per instance
    starts: tuple[int, ...]  # every allowed placement start
    free_starts: tuple[int, ...] | None = None
    memory_gib: float | None = None
    sm: int | None = None

    @property
    def label(self) -> str:
        return self.profile if self.profile_id is None else f"{self.profile} (ID {self.profile_id})"


@dataclass(frozen=True)
class MigCatalogue:
    """What can still be carved on each GPU: one :class:`ProfileRoom` per GPU and profile, from an ``-lgip``
    capture (counts as the driver printed them), an ``-lgipp`` capture (placements only) or a layout (derived
    from its geometry, with the free starts)."""

    rows: tuple[ProfileRoom, ...]
    memory_slices: int = 8
    model: str | None = None
    source: str = ""  # "-lgip", "-lgipp" or "layout"
    notes: tuple[str, ...] = ()

    @property
    def gpus(self) -> list[int]:
        return sorted({r.gpu for r in self.rows})

    def of(self, gpu: int) -> list[ProfileRoom]:
        return [r for r in self.rows if r.gpu == gpu]


def room_left(g: GpuMig, table: MigProfileTable) -> tuple[ProfileRoom, ...] | None:
    """Per profile of ``table``, how many more instances fit on ``g`` now and where; None while an instance of
    ``g`` has no placement (its slices are unknown, so the room is too).

    An instance needs its memory slices free at an allowed start and its compute slices among those left
    (compute slices are counted, not placed: the driver hands them out in creation order); a profile cannot
    exceed its instance limit (one ``+me`` instance); ``table.blocked_by`` rules apply (no 4g after a 3g).
    """
    if any(i.start is None for i in g.instances):
        return None
    used_memory = {s for i in g.instances for s in i.memory_slices}
    free_compute = table.compute_slices - sum(i.compute_slices for i in g.instances)
    sizes_present = {i.compute_slices for i in g.instances}
    rows = []
    for p in table.profiles:
        blocked = any(a == p.compute_slices and b in sizes_present for a, b in table.blocked_by)
        left = p.max_instances - sum(1 for i in g.instances if i.profile == p.name)
        fits_compute = free_compute >= p.compute_slices
        starts = tuple(s for s in p.starts if not used_memory & set(range(s, s + p.memory_slices)))
        if blocked or left < 1 or not fits_compute:
            starts = ()
        count = (
            min(_disjoint(starts, p.memory_slices), left, free_compute // p.compute_slices) if starts else 0
        )
        rows.append(
            ProfileRoom(
                g.index, p.name, p.profile_id, count, p.max_instances, p.memory_slices, p.starts, starts
            )
        )
    return tuple(rows)


def layouts_with_room(table: MigProfileTable, free: Mapping[str, int], gpu: int = 0) -> list[GpuMig]:
    """Every set of instances on one GPU that leaves exactly the ``free`` counts (profile -> free, as ``-lgip``
    prints them; profiles not named are not compared). ``-lgip`` gives counts, not placements: where all these
    layouts agree, the free placements follow from the counts."""
    spots = [(p, s) for p in table.profiles for s in p.starts]
    found: list[GpuMig] = []

    def grow(i: int, chosen: tuple[GpuInstance, ...], used: frozenset[int], compute: int) -> None:
        g = GpuMig(index=gpu, instances=chosen)
        rooms = room_left(g, table) or ()
        if all(free.get(r.profile, r.free) == r.free for r in rooms):
            found.append(g)
        for j in range(i, len(spots)):
            prof, start = spots[j]
            span = frozenset(range(start, start + prof.memory_slices))
            if (
                span & used
                or compute + prof.compute_slices > table.compute_slices
                or sum(1 for x in chosen if x.profile == prof.name) >= prof.max_instances
            ):
                continue
            inst = GpuInstance(
                gpu=gpu,
                profile=prof.name,
                compute_slices=prof.compute_slices,
                profile_id=prof.profile_id,
                start=start,
                size=prof.memory_slices,
            )
            grow(j + 1, (*chosen, inst), used | span, compute + prof.compute_slices)

    grow(0, (), frozenset(), 0)
    return found


def _disjoint(starts: Sequence[int], size: int) -> int:
    """The most instances of one size that the free ``starts`` hold side by side (earliest first is optimal
    for equal lengths)."""
    count, end = 0, -1
    for s in sorted(starts):
        if s >= end:
            count, end = count + 1, s + size
    return count


def room_sentence(rooms: Sequence[ProfileRoom]) -> str:
    """What can still be carved, in words: ``room for one more 1g.10gb or 1g.10gb+me``."""
    free = [r for r in rooms if r.free]
    if not free:
        return "no room for another instance"
    if all(r.free == 1 for r in free):
        return "room for one more " + " or ".join(r.profile for r in free)
    listed = ", ".join(f"{r.free}x {r.profile}" for r in free)
    return f"room for up to {listed} (each count alone: they share the free slices)"


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
