"""MIG profile tables per GPU model: each GPU-instance profile's slices, instance count and allowed placements.

Facts from NVIDIA's MIG user guide and real ``nvidia-smi mig -lgip/-lgipp`` captures.
"""

from __future__ import annotations

import re
from collections.abc import Iterable, Sequence
from dataclasses import dataclass

from slurmlab.errors import RequestError

__all__ = [
    "MIG_PROFILE_TABLES",
    "MigProfile",
    "MigProfileTable",
    "TableChoice",
    "choose_table",
    "table_for_model",
    "table_for_profile_names",
    "tables_for_profile_names",
]


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
    # (a, b): a GPU instance of `a` compute slices cannot be created while one of `b` exists, though the slices
    # are free; created the other way round both fit. See _BLOCKED_4G_AFTER_3G.
    blocked_by: tuple[tuple[int, int], ...] = ()

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


# A 4g cannot be added once a 3g exists: the A100-80GB `-lgip` capture (mig-lgip-a100-80gb-partially-used.txt) shows
# 3g.40gb 1/2 free and 1g.10gb 4/7 free, so one 3g sits at 4:4 and memory slices 0-3 are free, yet 4g.40gb (whose
# only placement is 0:4) is 0/1; a `3g.40gb: 1, 4g.40gb: 1` config fails with "Insufficient Resources"
# (NVIDIA/mig-parted#29), while `-cgi 4g.20gb,3g.20gb` (4g first) is used in the field. The compute slices are
# handed out in creation order, not by memory placement, so a 3g created first takes slices a 4g needs.
_BLOCKED_4G_AFTER_3G = ((4, 3),)


def _seven_by_eight(
    model: str, gb: Sequence[int], *, ids: bool = True, partial: bool = False
) -> MigProfileTable:
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
        MigProfile(n, pid if ids else None, c, m, mx, st)
        for n, pid, c, m, mx, st in rows
        if not n.endswith(".0gb")
    )
    return MigProfileTable(model, 7, 8, profiles, partial, _BLOCKED_4G_AFTER_3G)


MIG_PROFILE_TABLES: dict[str, MigProfileTable] = {
    "A100-40GB": _seven_by_eight("A100-40GB", (5, 10, 10, 20, 20, 40)),
    "A100-80GB": _seven_by_eight("A100-80GB", (10, 20, 20, 40, 40, 80)),
    "H100-80GB": _seven_by_eight("H100-80GB", (10, 20, 20, 40, 40, 80)),
    "H100-94GB": _seven_by_eight("H100-94GB", (12, 24, 24, 47, 47, 94)),
    "H100-96GB": _seven_by_eight("H100-96GB", (12, 24, 24, 48, 48, 96)),
    "H200-141GB": _seven_by_eight("H200-141GB", (18, 35, 35, 71, 71, 141)),
    # only 1g/1g+me/1g.36gb/2g rows were captured; larger GH200-144GB profiles are left out, not guessed
    "GH200-144GB": MigProfileTable(
        "GH200-144GB",
        7,
        8,
        tuple(
            p for p in _seven_by_eight("GH200-144GB", (18, 36, 36, 0, 0, 0)).profiles if p.compute_slices <= 2
        ),
        partial=True,
        blocked_by=_BLOCKED_4G_AFTER_3G,
    ),
    # B200 ids are not in any capture, so they stay unknown
    "B200-180GB": _seven_by_eight("B200-180GB", (23, 45, 45, 90, 90, 180), ids=False),
    "A30-24GB": MigProfileTable(
        "A30-24GB",
        4,
        4,
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
class TableChoice:
    """The profile table of a capture, the GPU model to show, and the models its geometry fits when the capture
    names none."""

    table: MigProfileTable | None
    model: str | None
    fits: tuple[str, ...] = ()

    @property
    def notes(self) -> tuple[str, ...]:
        if len(self.fits) < 2:
            return ()
        return (
            f"the profile names fit {', '.join(self.fits)} (same slice geometry); "
            "pass the GPU model to tell (--model, or model= in Python)",
        )


def choose_table(names: Iterable[str], model: str | None = None, *, named: str | None = None) -> TableChoice:
    """The table for a capture's profile ``names``: from the model the capture ``named`` (``-L`` prints it), else
    the ``model`` the user gave, else the tables whose profiles hold every name.

    A ``model`` with no MIG table, one whose table lacks the capture's profiles, or one that contradicts the model
    the capture names is a :class:`RequestError` saying what to pass instead: a wrong model would put the wrong
    slice sizes and memory on every instance.
    """
    wanted = sorted({_gi_name(n) for n in names})
    fits = tuple(t.model for t in tables_for_profile_names(wanted))
    given = table_for_model(model) if model else None
    if model and given is None:
        raise RequestError(
            f"no MIG profile table for GPU model {model!r}: MIG exists on {', '.join(MIG_PROFILE_TABLES)}",
            hint=_fit_hint(fits) or "name one of those models, or leave the model out",
        )
    if named:
        own = table_for_model(named)
        if given is not None and own is not None and given is not own:
            raise RequestError(
                f"the capture names its GPU {named!r} ({own.model}), but the model given is {model!r} "
                f"({given.model})",
                hint="leave the model out: the capture already says which GPU it is",
            )
        if own is not None:
            return TableChoice(own, named, (own.model,))
    if given is not None:
        missing = [n for n in wanted if n not in {p.name for p in given.profiles}]
        if missing:
            raise RequestError(
                f"MIG profile{'s' if len(missing) > 1 else ''} {', '.join(missing)} "
                f"{'do' if len(missing) > 1 else 'does'} not exist on {given.model} (model given: {model!r}); "
                f"its profiles are {', '.join(p.name for p in given.profiles)}",
                hint=_fit_hint(fits) or "check the model: no known GPU has all these profiles",
            )
        return TableChoice(given, named or model, (given.model,))
    if not fits:
        return TableChoice(None, named, ())
    table = MIG_PROFILE_TABLES[fits[0]]
    return TableChoice(table, named or (fits[0] if len(fits) == 1 else None), fits)


def _fit_hint(fits: Sequence[str]) -> str:
    if not fits:
        return ""
    return f"the capture's profile names fit {' or '.join(fits)}: give one of those, or leave the model out"
