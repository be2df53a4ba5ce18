"""MIG (Multi-Instance GPU) layouts on the slice grid, and the profile tables per GPU model.

A MIG-capable GPU has 7 compute slices and 8 memory slices (A30: 4 and 4). A GPU instance (GI) takes a profile
(``3g.40gb``), sits at a placement ``start:size`` in memory slices and holds one or more compute instances (CI).
Facts from NVIDIA's MIG user guide and real ``nvidia-smi mig -lgip/-lgipp`` captures (FACTS-mig-nvlink.md).
Pure data, no I/O.
"""

from __future__ import annotations

import re
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field, replace

from slurmlab.errors import ParseError, RequestError

__all__ = [
    "MIG_PROFILE_TABLES",
    "ComputeInstance",
    "GpuInstance",
    "GpuMig",
    "MigLayout",
    "MigProfile",
    "MigProfileTable",
    "is_mig_type",
    "mig_memory_gb",
    "parse_profile_name",
    "table_for_model",
    "table_for_profile_names",
    "tables_for_profile_names",
]

_NAME_RE = re.compile(r"^(?:(\d+)c\.)?(\d+)g\.(\d+)gb(\+me)?$")


def _show(value: object) -> str:
    """repr() for an error message: short, and safe on ints too long or nesting too deep for repr()."""
    try:
        return repr(value)[:200]
    except (ValueError, RecursionError):
        return f"<{type(value).__name__} too large or deep to show>"


def parse_profile_name(name: str) -> tuple[int | None, int, int, bool]:
    """``1c.3g.20gb`` -> (ci compute slices or None, gi compute slices, GB in the name, media extensions)."""
    m = _NAME_RE.match(name.strip())
    if m is None:
        raise ParseError("MIG profile name", name, hint="expected a name like 3g.40gb, 1g.10gb+me or 1c.3g.20gb")
    ci = int(m.group(1)) if m.group(1) else None
    return ci, int(m.group(2)), int(m.group(3)), bool(m.group(4))


def is_mig_type(name: str) -> bool:
    """Whether a GPU type names a MIG profile (``1g.18gb``, ``3g.71gb``, ``1g.10gb+me``; any case):
    Slurm gives a MIG instance the GRES type of its profile, and nothing else is named so."""
    return _NAME_RE.match(name.strip().lower()) is not None


def mig_memory_gb(name: str) -> int | None:
    """The GB in a MIG profile name (``1g.18gb`` -> 18); None when ``name`` is no profile name."""
    return parse_profile_name(name.lower())[2] if is_mig_type(name) else None


@dataclass(frozen=True)
class MigProfile:
    """A GPU-instance profile of one GPU model."""

    name: str  # 3g.40gb
    profile_id: int | None  # the GI profile id of `nvidia-smi mig -cgi`, None where no capture shows it
    compute_slices: int
    memory_slices: int
    max_instances: int
    starts: tuple[int, ...]  # allowed placement starts, in memory slices

    @property
    def placements(self) -> tuple[tuple[int, int], ...]:
        return tuple((s, self.memory_slices) for s in self.starts)


@dataclass(frozen=True)
class MigProfileTable:
    model: str  # A100-40GB, H200-141GB, ...
    compute_slices: int
    memory_slices: int
    profiles: tuple[MigProfile, ...]
    partial: bool = False  # True where only part of the table is documented by a capture

    def profile(self, name: str) -> MigProfile:
        for p in self.profiles:
            if p.name == name:
                return p
        raise RequestError(
            f"MIG profile {name!r} does not exist on {self.model}; "
            f"its profiles are {', '.join(p.name for p in self.profiles)}"
        )

    def by_id(self, profile_id: int) -> MigProfile | None:
        for p in self.profiles:
            if p.profile_id == profile_id:
                return p
        return None


def _seven_by_eight(model: str, gb: Sequence[int], *, ids: bool = True, partial: bool = False) -> MigProfileTable:
    """The 7 compute x 8 memory table; ``gb`` = GB in the names of 1g, 1g(2 slices), 2g, 3g, 4g, 7g."""
    g1, g1x2, g2, g3, g4, g7 = gb
    rows = [
        (f"1g.{g1}gb", 19, 1, 1, 7, (0, 1, 2, 3, 4, 5, 6)),
        (f"1g.{g1}gb+me", 20, 1, 1, 1, (0, 1, 2, 3, 4, 5, 6)),
        (f"1g.{g1x2}gb", 15, 1, 2, 4, (0, 2, 4, 6)),
        (f"2g.{g2}gb", 14, 2, 2, 3, (0, 2, 4)),
        (f"3g.{g3}gb", 9, 3, 4, 2, (0, 4)),
        (f"4g.{g4}gb", 5, 4, 4, 1, (0,)),
        (f"7g.{g7}gb", 0, 7, 8, 1, (0,)),
    ]
    profiles = tuple(
        MigProfile(n, pid if ids else None, c, m, mx, st) for n, pid, c, m, mx, st in rows if not n.endswith(".0gb")
    )
    return MigProfileTable(model, 7, 8, profiles, partial)


MIG_PROFILE_TABLES: dict[str, MigProfileTable] = {
    "A100-40GB": _seven_by_eight("A100-40GB", (5, 10, 10, 20, 20, 40)),
    "A100-80GB": _seven_by_eight("A100-80GB", (10, 20, 20, 40, 40, 80)),
    "H100-80GB": _seven_by_eight("H100-80GB", (10, 20, 20, 40, 40, 80)),
    "H100-94GB": _seven_by_eight("H100-94GB", (12, 24, 24, 47, 47, 94)),
    "H100-96GB": _seven_by_eight("H100-96GB", (12, 24, 24, 48, 48, 96)),
    "H200-141GB": _seven_by_eight("H200-141GB", (18, 35, 35, 71, 71, 141)),
    # only 1g/1g+me/1g.36gb/2g rows were captured; larger GH200-144GB profiles are left out, not guessed
    "GH200-144GB": MigProfileTable(
        "GH200-144GB", 7, 8,
        tuple(p for p in _seven_by_eight("GH200-144GB", (18, 36, 36, 0, 0, 0)).profiles if p.compute_slices <= 2),
        partial=True,
    ),
    # B200 ids are not in any capture, so they stay unknown
    "B200-180GB": _seven_by_eight("B200-180GB", (23, 45, 45, 90, 90, 180), ids=False),
    "A30-24GB": MigProfileTable(
        "A30-24GB", 4, 4,
        (
            MigProfile("1g.6gb", 14, 1, 1, 4, (0, 1, 2, 3)),
            MigProfile("1g.6gb+me", 21, 1, 1, 1, (0, 1, 2, 3)),
            MigProfile("2g.12gb", 5, 2, 2, 2, (0, 2)),
            MigProfile("2g.12gb+me", None, 2, 2, 1, (0, 2)),
            MigProfile("4g.24gb", 0, 4, 4, 1, (0,)),
        ),
    ),
}

_MODEL_PATTERNS: list[tuple[str, str]] = [
    (r"GH200.*144|GH200.*HBM3E", "GH200-144GB"),
    (r"GH200|H100.*96\s*GB", "H100-96GB"),
    (r"H200", "H200-141GB"),
    (r"H100.*(NVL|94\s*GB)", "H100-94GB"),
    (r"H100", "H100-80GB"),
    (r"A100.*80\s*GB", "A100-80GB"),
    (r"A100", "A100-40GB"),
    (r"A30", "A30-24GB"),
    (r"B200", "B200-180GB"),
]


def table_for_model(model: str) -> MigProfileTable | None:
    """The profile table for a GPU name as nvidia-smi prints it (``NVIDIA H100 80GB HBM3``) or a table key."""
    if model in MIG_PROFILE_TABLES:
        return MIG_PROFILE_TABLES[model]
    upper = model.upper()
    for pattern, key in _MODEL_PATTERNS:
        if re.search(pattern, upper):
            return MIG_PROFILE_TABLES[key]
    return None


def tables_for_profile_names(names: Iterable[str]) -> list[MigProfileTable]:
    """Every table that holds all the GI profile names given (CI names like ``1c.3g.20gb`` count as the GI)."""
    wanted = {_gi_name(n) for n in names}
    if not wanted:
        return []
    return [t for t in MIG_PROFILE_TABLES.values() if wanted <= {p.name for p in t.profiles}]


def table_for_profile_names(names: Iterable[str]) -> MigProfileTable | None:
    """The first table that fits the names (A100-80GB and H100-80GB share names and geometry)."""
    found = tables_for_profile_names(names)
    return found[0] if found else None


def _gi_name(name: str) -> str:
    m = re.match(r"^\d+c\.(.+)$", name)
    return m.group(1) if m else name


@dataclass(frozen=True)
class ComputeInstance:
    ci_id: int | None
    name: str  # profile name as printed: 1c.3g.20gb, or the GI's name for a full-size CI
    compute_slices: int
    profile_id: int | None = None
    uuid: str | None = None  # MIG-<uuid> where the listing shows one per CI
    device: int | None = None  # "Device N" index in `nvidia-smi -L`


@dataclass(frozen=True)
class GpuInstance:
    gpu: int
    profile: str  # GI profile name, 3g.40gb
    compute_slices: int
    gi_id: int | None = None
    profile_id: int | None = None
    start: int | None = None  # placement in memory slices; None = unknown
    size: int | None = None
    compute_instances: tuple[ComputeInstance, ...] = ()
    uuid: str | None = None
    placement_inferred: bool = False

    @property
    def placement(self) -> str:
        return "?" if self.start is None else f"{self.start}:{self.size}"

    @property
    def memory_slices(self) -> range:
        if self.start is None or self.size is None:
            return range(0)
        return range(self.start, self.start + self.size)

    def compute_range(self, compute_total: int = 7) -> range:
        """Compute slices the GI occupies: ``compute_slices`` slices from its start, within the grid."""
        if self.start is None:
            return range(0)
        return range(self.start, min(self.start + self.compute_slices, compute_total))

    @property
    def label(self) -> str:
        ids = []
        if self.gi_id is not None:
            ids.append(f"GI {self.gi_id}")
        if self.compute_instances:
            cis = [str(c.ci_id) for c in self.compute_instances if c.ci_id is not None]
            if cis:
                ids.append(f"CI {','.join(cis)}")
        return self.profile + (f" ({'; '.join(ids)})" if ids else "")


@dataclass(frozen=True)
class GpuMig:
    index: int
    instances: tuple[GpuInstance, ...] = ()
    model: str | None = None
    uuid: str | None = None


@dataclass(frozen=True)
class MigLayout:
    """Per GPU, its GPU instances on the compute x memory slice grid."""

    gpus: tuple[GpuMig, ...]
    table: MigProfileTable | None = None
    complete: bool = True
    notes: tuple[str, ...] = ()
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

    def free_memory_slices(self, index: int) -> list[int]:
        used = {s for i in self.gpu(index).instances for s in i.memory_slices}
        return [s for s in range(self.memory_slices) if s not in used]

    def check(self) -> None:
        """Placements stay on the grid and do not overlap; raise :class:`ParseError` quoting the culprit."""
        for g in self.gpus:
            taken: dict[int, GpuInstance] = {}
            for inst in g.instances:
                if inst.start is None:
                    continue
                if inst.size is None or inst.size < 1 or inst.start < 0 or inst.start + inst.size > self.memory_slices:
                    raise ParseError(
                        f"MIG placement on GPU {g.index}", inst.placement,
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
        new_gpus = []
        for g in self.gpus:
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
            new_gpus.append(replace(g, instances=tuple(placed + _in_listing_order(listing, fitted))))
        return replace(self, gpus=tuple(new_gpus))

    @classmethod
    def from_spec(cls, model: str, spec: Mapping[int, Sequence[str]]) -> MigLayout:
        """A layout from profile names per GPU, placed as ``nvidia-smi mig -cgi`` would (first fit, largest first).

        ``MigLayout.from_spec("H200-141GB", {0: ["3g.71gb", "2g.35gb", "1g.18gb", "1g.18gb"]})``
        """
        table = table_for_model(model)
        if table is None:
            raise RequestError(f"no MIG profile table for GPU model {model!r}; known: {', '.join(MIG_PROFILE_TABLES)}")
        gpus = []
        for index, names in sorted(spec.items()):
            profiles = [table.profile(n) for n in names]
            if sum(p.compute_slices for p in profiles) > table.compute_slices:
                raise RequestError(
                    f"GPU {index}: {', '.join(names)} need more than the {table.compute_slices} compute slices"
                )
            insts = tuple(
                GpuInstance(gpu=index, profile=p.name, compute_slices=p.compute_slices, profile_id=p.profile_id)
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
        return replace(layout, gpus=tuple(
            replace(g, instances=tuple(replace(i, placement_inferred=False) for i in g.instances))
            for g in layout.gpus
        ))

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
            raise ParseError("hardware profile 'mig'", _show(raw), hint="a list of {gpu, profile, start, size}")
        per_gpu: dict[int, list[GpuInstance]] = {}
        for item in raw:
            if not isinstance(item, Mapping):
                raise ParseError("hardware profile MIG instance", _show(item), hint="{gpu, profile, start, size}")
            gpu, prof, start, size = item.get("gpu"), item.get("profile"), item.get("start"), item.get("size")
            if not (isinstance(gpu, int) and isinstance(prof, str) and isinstance(start, int)
                    and isinstance(size, int)):
                raise ParseError("hardware profile MIG instance", _show(item), hint="{gpu, profile, start, size}")
            _ci, gi_c, _gb, _me = parse_profile_name(prof)
            per_gpu.setdefault(gpu, []).append(GpuInstance(gpu=gpu, profile=prof, compute_slices=gi_c,
                                                           gi_id=None, start=start, size=size))
        if not per_gpu:
            raise RequestError("this hardware profile has no MIG instances (its 'mig' list is empty)")
        model = next((n for n in names.values() if n), None)
        table = (table_for_model(model) if model else None) or table_for_profile_names(
            i.profile for v in per_gpu.values() for i in v)
        gpus = tuple(GpuMig(index=g, instances=tuple(v), model=names.get(g) or (table.model if table else None))
                     for g, v in sorted(per_gpu.items()))
        return cls(gpus=gpus, table=table, notes=("from a hardware profile",))

    def summary(self) -> str:
        lines: list[str] = []
        if self.table:
            lines.append(f"MIG profile table: {self.table.model} "
                         f"({self.table.compute_slices} compute x {self.table.memory_slices} memory slices)")
        for g in self.gpus:
            head = f"GPU {g.index}" + (f": {g.model}" if g.model else "") + (f" ({g.uuid})" if g.uuid else "")
            lines.append(head)
            if not g.instances:
                lines.append("  (no GPU instances)")
            for inst in sorted(g.instances, key=lambda i: (i.start is None, i.start or 0, i.gi_id or 0)):
                where = inst.placement + (" (inferred)" if inst.placement_inferred else "")
                lines.append(f"  {inst.label:<28} placement {where}")
                for ci in inst.compute_instances:
                    extra = f" {ci.uuid}" if ci.uuid else ""
                    cid = "?" if ci.ci_id is None else str(ci.ci_id)
                    lines.append(f"      CI {cid}: {ci.name}{extra}")
            if self.table and any(i.start is not None for i in g.instances):
                free = self.free_memory_slices(g.index)
                lines.append(f"  free memory slices: {', '.join(map(str, free)) or 'none'}")
        for note in self.notes:
            lines.append(f"note: {note}")
        return "\n".join(lines)


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
