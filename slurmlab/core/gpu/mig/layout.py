"""MIG (Multi-Instance GPU) layouts on the slice grid, and the profile tables per GPU model.

A MIG-capable GPU has 7 compute slices and 8 memory slices (A30: 4 and 4). A GPU instance (GI) takes a profile
(``3g.40gb``), sits at a placement ``start:size`` in memory slices and holds one or more compute instances (CI).
Facts from NVIDIA's MIG user guide and real ``nvidia-smi mig -lgip/-lgipp`` captures.
Pure data, no I/O.

The profile tables live in :mod:`.tables`, the instances in :mod:`.instances`, and the inference of placements and
the room left per profile (what can still be carved) in :mod:`.placement`; the package
(:mod:`slurmlab.core.gpu.mig`) offers the public names of all of them.
"""

from __future__ import annotations

import re
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field, replace

from slurmlab.core.gpu.mig.instances import GpuInstance, GpuMig
from slurmlab.core.gpu.mig.placement import (
    MigCatalogue,
    ProfileRoom,
    infer_placements,
    room_left,
    room_sentence,
)
from slurmlab.core.gpu.mig.tables import (
    MIG_PROFILE_TABLES,
    MigProfileTable,
    table_for_model,
    table_for_profile_names,
)
from slurmlab.core.gpu.quoting import quoted
from slurmlab.errors import ParseError, RequestError

__all__ = ["MigLayout", "is_mig_type", "mig_memory_gb", "parse_profile_name"]

_NAME_RE = re.compile(r"^(?:(\d+)c\.)?(\d+)g\.(\d+)gb(\+me)?$")


def parse_profile_name(name: str) -> tuple[int | None, int, int, bool]:
    """``1c.3g.20gb`` -> (ci compute slices or None, gi compute slices, GB in the name, media extensions)."""
    m = _NAME_RE.match(name.strip())
    if m is None:
        raise ParseError(
            "MIG profile name", name, hint="expected a name like 3g.40gb, 1g.10gb+me or 1c.3g.20gb"
        )
    ci = int(m.group(1)) if m.group(1) else None
    return ci, int(m.group(2)), int(m.group(3)), bool(m.group(4))


def is_mig_type(name: str) -> bool:
    """Whether a GPU type names a MIG profile (``1g.18gb``, ``3g.71gb``, ``1g.10gb+me``; any case):
    Slurm gives a MIG instance the GRES type of its profile, and nothing else is named so."""
    return _NAME_RE.match(name.strip().lower()) is not None


def mig_memory_gb(name: str) -> int | None:
    """The GB in a MIG profile name (``1g.18gb`` -> 18); None when ``name`` is no profile name."""
    return parse_profile_name(name.lower())[2] if is_mig_type(name) else None


def _stranded(free_memory: list[int], free_compute: int) -> str:
    """Why free slices hold no further instance."""
    mem = f"memory slice{'s' if len(free_memory) > 1 else ''} {', '.join(map(str, free_memory))}"
    if not free_compute:
        return f"{mem} {'are' if len(free_memory) > 1 else 'is'} left over: every compute slice is taken"
    comp = f"{free_compute} compute slice{'s' if free_compute > 1 else ''}"
    if not free_memory:
        return f"{comp} left over: every memory slice is taken"
    return f"{comp} and {mem} are free, but no profile fits them (size or allowed start)"


@dataclass(frozen=True)
class MigLayout:
    """Per GPU, its GPU instances on the compute x memory slice grid."""

    gpus: tuple[GpuMig, ...]
    table: MigProfileTable | None = None
    complete: bool = True
    notes: tuple[str, ...] = ()
    fits: tuple[str, ...] = ()  # the models the profile geometry fits, when the source names none
    _by_index: dict[int, GpuMig] = field(default_factory=dict, init=False, repr=False, compare=False)

    def __post_init__(self) -> None:
        for g in self.gpus:
            self._by_index[g.index] = g
        self.check()

    @property
    def compute_slices(self) -> int:
        return self.table.compute_slices if self.table else 7

    @property
    def memory_slices(self) -> int:
        return self.table.memory_slices if self.table else 8

    def gpu(self, index: int) -> GpuMig:
        try:
            return self._by_index[index]
        except KeyError:
            raise KeyError(f"no GPU {index} in this MIG layout (GPUs: {sorted(self._by_index)})") from None

    def instances(self) -> list[GpuInstance]:
        return [i for g in self.gpus for i in g.instances]

    def matching(self, keys: Iterable[object]) -> list[GpuInstance]:
        """The instances ``keys`` name, in layout order: ``(gpu, gi_id)``, ``(gpu, "start:size")``, a MIG UUID (of
        the instance or one of its compute instances) or a profile name."""
        wanted = set(keys)
        found = []
        for inst in self.instances():
            own: set[object] = {(inst.gpu, inst.gi_id), (inst.gpu, inst.placement), inst.uuid, inst.profile}
            own |= {ci.uuid for ci in inst.compute_instances}
            own.discard(None)
            if own & wanted:
                found.append(inst)
        return found

    @property
    def model_label(self) -> str | None:
        """The GPU model to show: as the source names it (``-L`` prints ``NVIDIA H100 80GB HBM3``), else the
        table's model, else every model the geometry fits (``A100-80GB or H100-80GB``)."""
        named = list(dict.fromkeys(g.model for g in self.gpus if g.model))
        if named:
            return " / ".join(named)
        if len(self.fits) > 1:
            return " or ".join(self.fits)
        return self.table.model if self.table else None

    def free_memory_slices(self, index: int) -> list[int]:
        used = {s for i in self.gpu(index).instances for s in i.memory_slices}
        return [s for s in range(self.memory_slices) if s not in used]

    def free_compute_slices(self, index: int) -> int:
        """Compute slices no instance holds (they are counted, not placed: see :func:`room_left`)."""
        return self.compute_slices - sum(i.compute_slices for i in self.gpu(index).instances)

    def room(self, index: int) -> tuple[ProfileRoom, ...] | None:
        """Per profile, how many more instances GPU ``index`` can take and at which starts (what ``nvidia-smi
        mig -lgip`` would print as free, and ``-lgipp``'s placements still open); None when the profile table
        or a placement is unknown."""
        return room_left(self.gpu(index), self.table) if self.table else None

    def catalogue(self) -> MigCatalogue | None:
        """The catalogue of what can still be carved on every GPU (free counts and free placement starts per
        profile), derived from the layout; None when the profile table or a placement is unknown."""
        rows = [self.room(g.index) for g in self.gpus]
        if self.table is None or any(r is None for r in rows):
            return None
        notes = tuple(n for n in self.notes if "inferred" in n)
        return MigCatalogue(
            tuple(x for r in rows for x in r or ()), self.memory_slices, self.model_label, "layout", notes
        )

    def room_lines(self, index: int) -> list[str]:
        """The free slices of GPU ``index`` and what can still be carved, in words."""
        g = self.gpu(index)
        unplaced = sum(1 for i in g.instances if i.start is None)
        if self.table is None:
            return ["  free capacity unknown: no MIG profile table for this GPU (pass its model)"]
        if unplaced:
            return [
                f"  free capacity unknown: {unplaced} instance{'s' if unplaced > 1 else ''} without a placement"
            ]
        free_mem = self.free_memory_slices(index)
        free_c = self.free_compute_slices(index)
        where = (
            f" (slice{'s' if len(free_mem) > 1 else ''} {', '.join(map(str, free_mem))})" if free_mem else ""
        )
        lines = [
            f"  free: {free_c} of {self.compute_slices} compute slices, "
            f"{len(free_mem)} of {self.memory_slices} memory slices{where}"
        ]
        rooms = self.room(index) or ()
        sentence = room_sentence(rooms)
        if not any(r.free for r in rooms) and (free_mem or free_c):
            sentence += f" ({_stranded(free_mem, free_c)})"
        # an inferred placement matters only where the profile could have sat elsewhere
        if any(
            i.placement_inferred and len(self.table.profile(i.profile).starts) > 1
            for i in g.instances
            if i.profile in {p.name for p in self.table.profiles}
        ):
            sentence += " — if the placements are as inferred"
        return lines + [f"  {sentence}"]

    def check(self) -> None:
        """Placements stay on the grid and do not overlap; raise :class:`ParseError` quoting the culprit."""
        for g in self.gpus:
            taken: dict[int, GpuInstance] = {}
            for inst in g.instances:
                if inst.start is None:
                    continue
                if (
                    inst.size is None
                    or inst.size < 1
                    or inst.start < 0
                    or inst.start + inst.size > self.memory_slices
                ):
                    raise ParseError(
                        f"MIG placement on GPU {g.index}",
                        inst.placement,
                        hint=f"placements are start:size within {self.memory_slices} memory slices",
                    )
                for s in inst.memory_slices:
                    if s in taken:
                        raise ParseError(
                            f"MIG placement on GPU {g.index}",
                            f"{inst.profile} at {inst.placement} overlaps {taken[s].profile} at {taken[s].placement}",
                            hint="two GPU instances cannot share memory slices",
                        )
                    taken[s] = inst

    def with_inferred_placements(self) -> MigLayout:
        """Give instances without a placement one, marked inferred.

        Largest first, each at the highest free allowed start, backtracking when the rest would not fit: this
        reproduces the placements NVIDIA's driver printed in the captured ``-lgi`` tables (e.g. 3g at 4:4,
        2g at 2:2, 1g at 1:1 and 0:1 for 3g+2g+1g+1g).
        """
        table = self.table
        if table is None:
            return self
        return replace(self, gpus=tuple(infer_placements(g, table) for g in self.gpus))

    @classmethod
    def from_spec(cls, model: str, spec: Mapping[int, Sequence[str]]) -> MigLayout:
        """A layout from profile names per GPU, placed as ``nvidia-smi mig -cgi`` would (first fit, largest first).

        ``MigLayout.from_spec("H200-141GB", {0: ["3g.71gb", "2g.35gb", "1g.18gb", "1g.18gb"]})``
        """
        table = table_for_model(model)
        if table is None:
            raise RequestError(
                f"no MIG profile table for GPU model {model!r}; known: {', '.join(MIG_PROFILE_TABLES)}"
            )
        gpus = []
        for index, names in sorted(spec.items()):
            profiles = [table.profile(n) for n in names]
            if sum(p.compute_slices for p in profiles) > table.compute_slices:
                raise RequestError(
                    f"GPU {index}: {', '.join(names)} need more than the {table.compute_slices} compute slices"
                )
            insts = tuple(
                GpuInstance(
                    gpu=index, profile=p.name, compute_slices=p.compute_slices, profile_id=p.profile_id
                )
                for p in profiles
            )
            gpus.append(GpuMig(index=index, instances=insts, model=table.model))
        layout = cls(gpus=tuple(gpus), table=table).with_inferred_placements()
        for inst in layout.instances():
            if inst.start is None:
                raise RequestError(
                    f"GPU {inst.gpu}: no free placement left for {inst.profile}; "
                    f"the profiles {', '.join(spec[inst.gpu])} do not fit together"
                )
        # a spec is placed deterministically, so these are the placements, not guesses
        return replace(
            layout,
            gpus=tuple(
                replace(g, instances=tuple(replace(i, placement_inferred=False) for i in g.instances))
                for g in layout.gpus
            ),
        )

    @classmethod
    def from_profile(cls, data: Mapping[str, object]) -> MigLayout:
        """The MIG layout of a hardware profile: its ``mig`` list ``{gpu, profile, start, size}`` and ``gpus``."""
        raw = data.get("mig", [])
        gpus_raw = data.get("gpus", [])
        names: dict[int, str] = {}
        if isinstance(gpus_raw, Sequence):
            for g in gpus_raw:
                if isinstance(g, Mapping) and isinstance(g.get("index"), int):
                    label = g.get("name") or g.get("model") or ""
                    names[int(g["index"])] = label if isinstance(label, str) else ""
        if not isinstance(raw, Sequence) or isinstance(raw, str):
            raise ParseError(
                "hardware profile 'mig'", quoted(raw), hint="a list of {gpu, profile, start, size}"
            )
        per_gpu: dict[int, list[GpuInstance]] = {}
        for item in raw:
            if not isinstance(item, Mapping):
                raise ParseError(
                    "hardware profile MIG instance", quoted(item), hint="{gpu, profile, start, size}"
                )
            gpu, prof, start, size = item.get("gpu"), item.get("profile"), item.get("start"), item.get("size")
            if not (
                isinstance(gpu, int)
                and isinstance(prof, str)
                and isinstance(start, int)
                and isinstance(size, int)
            ):
                raise ParseError(
                    "hardware profile MIG instance", quoted(item), hint="{gpu, profile, start, size}"
                )
            _ci, gi_c, _gb, _me = parse_profile_name(prof)
            per_gpu.setdefault(gpu, []).append(
                GpuInstance(gpu=gpu, profile=prof, compute_slices=gi_c, gi_id=None, start=start, size=size)
            )
        if not per_gpu:
            raise RequestError("this hardware profile has no MIG instances (its 'mig' list is empty)")
        model = next((n for n in names.values() if n), None)
        table = (table_for_model(model) if model else None) or table_for_profile_names(
            i.profile for v in per_gpu.values() for i in v
        )
        gpus = tuple(
            GpuMig(index=g, instances=tuple(v), model=names.get(g) or (table.model if table else None))
            for g, v in sorted(per_gpu.items())
        )
        return cls(gpus=gpus, table=table, notes=("from a hardware profile",))

    def summary(self) -> str:
        lines: list[str] = []
        if self.table:
            which = " or ".join(self.fits) if len(self.fits) > 1 else self.table.model
            lines.append(
                f"MIG profile table: {which} "
                f"({self.table.compute_slices} compute x {self.table.memory_slices} memory slices)"
            )
        for g in self.gpus:
            head = f"GPU {g.index}" + (f": {g.model}" if g.model else "") + (f" ({g.uuid})" if g.uuid else "")
            lines.append(head)
            if not g.instances:
                lines.append("  (no GPU instances)")
            for inst in sorted(g.instances, key=lambda i: (i.start is None, i.start or 0, i.gi_id or 0)):
                lines.append(f"  {inst.label}" + (" (placement inferred)" if inst.placement_inferred else ""))
                for ci in inst.compute_instances:
                    extra = f" {ci.uuid}" if ci.uuid else ""
                    cid = "?" if ci.ci_id is None else str(ci.ci_id)
                    lines.append(f"      CI {cid}: {ci.name}{extra}")
            lines += self.room_lines(g.index)
        for note in self.notes:
            lines.append(f"note: {note}")
        return "\n".join(lines)
