"""One grammar for every GRES / TRES-per-x string Slurm prints.

API::

    parse_gres(text: str) -> tuple[GresItem, ...]   # a comma-joined list; (null)/N/A/"" -> ()
    parse_gres_item(text: str) -> GresItem
    render_gres(items) -> str                        # render_gres(parse_gres(s)) == s for canonical s
    GresItem: name, type, count, indices, sockets, shares, prefix, sep
              (also what a ``--gres`` request holds: core.request's GresSpec is this class)
    ShareSlot: index, used (None when the GPU is taken whole, written "-"), total

Forms understood (22.05 and 24.11 output, plus the request forms)::

    gpu:h100:3(IDX:0-2)         typed, with the GPU indices held
    gpu:1g.18gb:1(IDX:4)        MIG profile as the type
    gpu:h100:4(S:0-1)           configured GRES with the sockets it is tied to
    shard:h100:4(IDX:3)         22.05: shards on GPU 3
    shard:h100:4(0/4,0/4,0/4,4/4)   24.11+: per-GPU used/total shards
    shard:h100:0(-/4,0/4,…)     "-": that GPU is taken whole as a gpu
    shard:h100:0(IDX:N/A)       nothing held
    mps:0  gpu  gpu:2           untyped; the count defaults to None (meaning 1 when requested)
    gres/gpu:2  gres:gpu:2  gres/gpu:h100=2  gres/gpu=1   TRES spellings (prefix and separator kept)

A string that does not match raises ParseError quoting it; nothing is dropped.
Index lists (``0-2,5``) are read by :mod:`slurmlab.core.slurm.ranges` (re-exported here).
"""

from __future__ import annotations

import re
from collections.abc import Iterable
from dataclasses import dataclass, field

from slurmlab.core.jsontypes import JSONObject
from slurmlab.core.slurm.hostlist import split_top
from slurmlab.core.slurm.ranges import parse_index_list, render_index_list
from slurmlab.errors import ParseError

__all__ = [
    "GresItem",
    "ShareSlot",
    "parse_gres",
    "parse_gres_item",
    "parse_index_list",
    "render_gres",
    "render_index_list",
]

_EMPTY = {"", "(null)", "N/A", "None", "(none)"}
_NAME = r"[A-Za-z][A-Za-z0-9_]*"
_TYPE = r"[A-Za-z0-9_][A-Za-z0-9_.\-]*"
_ITEM = re.compile(
    rf"^(?P<prefix>gres[:/])?(?P<name>{_NAME})"
    rf"(?::(?P<type>{_TYPE}?))??"
    r"(?:(?P<sep>[:=])(?P<count>[0-9]{1,18}[KMGT]?))?"
    r"(?:\((?P<detail>[^()]*)\))?$"
)
_NULL_TYPE = re.compile(r"^((?:gres[:/])?[A-Za-z][A-Za-z0-9_]*):\(null\)(?=[:=(]|$)")
_CACHE: dict[str, tuple[GresItem, ...]] = {}
_CACHE_SIZE = 8192
_UNITS = {"": 1, "K": 1024, "M": 1024**2, "G": 1024**3, "T": 1024**4}


@dataclass(frozen=True)
class ShareSlot:
    """Shards (or MPS share) of one GPU: ``used`` of ``total``; ``used`` None = GPU taken whole."""

    index: int
    used: int | None
    total: int

    def to_dict(self) -> JSONObject:
        return {"index": self.index, "used": self.used, "total": self.total}


@dataclass(frozen=True)
class GresItem:
    """One GRES entry. ``indices``/``sockets``/``shares`` are None when the string had no detail."""

    name: str
    type: str | None = None
    count: int | None = None
    indices: tuple[int, ...] | None = None
    sockets: tuple[int, ...] | None = None
    shares: tuple[ShareSlot, ...] | None = None
    prefix: str = ""
    sep: str = ":"
    count_text: str | None = field(default=None, compare=False)

    @property
    def amount(self) -> int:
        """The count, with Slurm's default of 1 for an item that names none (``--gres=gpu``)."""
        return 1 if self.count is None else self.count

    @property
    def is_gpu(self) -> bool:
        return self.name == "gpu"

    @property
    def is_shared(self) -> bool:
        """Shard or MPS: a fraction of a GPU rather than whole GPUs."""
        return self.name in ("shard", "mps")

    def render(self) -> str:
        out = self.prefix + self.name
        if self.type is not None:
            out += ":" + self.type
        if self.count is not None:
            out += self.sep + (self.count_text if self.count_text is not None else str(self.count))
        if self.indices is not None:
            out += f"(IDX:{render_index_list(self.indices) if self.indices else 'N/A'})"
        elif self.sockets is not None:
            out += f"(S:{render_index_list(self.sockets)})"
        elif self.shares is not None:
            out += "(" + ",".join(f"{'-' if s.used is None else s.used}/{s.total}" for s in self.shares) + ")"
        return out

    def to_dict(self) -> JSONObject:
        return {
            "name": self.name,
            "type": self.type,
            "count": self.count,
            "indices": list(self.indices) if self.indices is not None else None,
            "sockets": list(self.sockets) if self.sockets is not None else None,
            "shares": [s.to_dict() for s in self.shares] if self.shares is not None else None,
            "text": self.render(),
        }


def _split_top(text: str) -> list[str]:
    return split_top(text, "GRES list", "()", nest=True)


def _index_list(text: str, what: str) -> tuple[int, ...]:
    return () if text.strip() in _EMPTY else parse_index_list(text, what)


def _parse_shares(detail: str, whole: str) -> tuple[ShareSlot, ...]:
    slots: list[ShareSlot] = []
    for i, piece in enumerate(detail.split(",")):
        m = re.fullmatch(r"(-|[0-9]{1,9})/([0-9]{1,9})", piece.strip())
        if m is None:
            raise ParseError(
                "GRES share list", whole, hint=f"the piece {piece!r} is not USED/TOTAL or -/TOTAL"
            )
        used = None if m.group(1) == "-" else int(m.group(1))
        slots.append(ShareSlot(index=i, used=used, total=int(m.group(2))))
    return tuple(slots)


def parse_gres_item(text: str) -> GresItem:
    """One GRES entry (see the module docstring for the forms)."""
    raw = text.strip()
    # 22.05 prints untyped GPUs in use as "gpu:(null):0(IDX:N/A)": "(null)" is no type
    m = _ITEM.match(_NULL_TYPE.sub(r"\1", raw))
    if m is None or not raw:
        raise ParseError("GRES", text, hint="expected NAME[:TYPE][:COUNT][(IDX:…|S:…|used/total,…)]")
    gtype = m.group("type")
    count_s = m.group("count")
    sep = m.group("sep") or ":"
    # "gpu:h100" reads as a type; "gpu:2" as a count: the regex prefers the count, so a
    # trailing type made only of digits is impossible to tell apart (Slurm has the same rule).
    if gtype == "":
        raise ParseError("GRES", text, hint="an empty type between ':'")
    count: int | None = None
    count_text: str | None = None
    if count_s is not None:
        unit = count_s[-1] if count_s[-1] in _UNITS and not count_s[-1].isdigit() else ""
        count = int(count_s[: len(count_s) - len(unit)]) * _UNITS[unit]
        count_text = count_s if unit else None
    indices = sockets = None
    shares = None
    detail = m.group("detail")
    if detail is not None:
        try:
            # "IDX:N/A": a GRES configured but none of it held
            if detail.startswith("IDX:"):
                indices = _index_list(detail[4:], "GRES index list")
            elif detail.startswith("S:"):
                sockets = _index_list(detail[2:], "GRES socket list")
            else:
                shares = _parse_shares(detail, raw)
        except ParseError as exc:
            raise ParseError("GRES", raw, hint=exc.hint) from None
    return GresItem(
        name=m.group("name"),
        type=gtype,
        count=count,
        indices=indices,
        sockets=sockets,
        shares=shares,
        prefix=m.group("prefix") or "",
        sep=sep,
        count_text=count_text,
    )


def parse_gres(text: str | None) -> tuple[GresItem, ...]:
    """A comma-joined GRES list; ``(null)``, ``N/A`` and empty give ()."""
    if text is None:
        return ()
    # a queue repeats a handful of strings (gpu:h100:1(IDX:0), gres/gpu:1 ...) thousands of times; the items
    # are frozen, so one parse serves every job that printed the same string
    hit = _CACHE.get(text)
    if hit is not None:
        return hit
    raw = text.strip()
    items = () if raw in _EMPTY else tuple(parse_gres_item(part) for part in _split_top(raw))
    if len(_CACHE) >= _CACHE_SIZE:
        _CACHE.clear()
    _CACHE[text] = items
    return items


def render_gres(items: Iterable[GresItem]) -> str:
    return ",".join(item.render() for item in items)
