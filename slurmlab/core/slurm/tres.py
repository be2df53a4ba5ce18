"""A TRES string (``cpu=4,mem=4000M,node=2,billing=4,gres/gpu=2``) as numbers, and Slurm memory sizes in MiB."""

from __future__ import annotations

import re
from dataclasses import dataclass

from slurmlab.core.jsontypes import JSONObject
from slurmlab.core.slurm.gres import GresItem, parse_gres
from slurmlab.errors import ParseError

__all__ = ["Tres", "parse_mem_mb"]

_CACHE_SIZE = 8192
_MEM_UNITS = {"K": 1 / 1024, "M": 1.0, "G": 1024.0, "T": 1024.0 * 1024, "P": 1024.0**3}


@dataclass(frozen=True)
class Tres:
    """A TRES string as numbers. ``mem_mb`` in MiB; ``gres`` keeps the gres/… entries; the
    original text is kept in ``text``; entries not named here stay in ``other``."""

    text: str
    cpus: int | None = None
    mem_mb: int | None = None
    nodes: int | None = None
    billing: int | None = None
    gres: tuple[GresItem, ...] = ()
    other: tuple[tuple[str, str], ...] = ()

    @classmethod
    def parse(cls, text: str | None) -> Tres | None:
        if text is None:
            return None
        # jobs of one queue share few TRES strings, and a Tres is frozen: parse each string once
        hit = _CACHE.get(text)
        if hit is not None and type(hit) is cls:
            return hit
        parsed = cls._parse(text)
        if parsed is not None:
            if len(_CACHE) >= _CACHE_SIZE:
                _CACHE.clear()
            _CACHE[text] = parsed
        return parsed

    @classmethod
    def _parse(cls, text: str) -> Tres | None:
        raw = text.strip()
        if raw in {"", "(null)", "N/A"}:
            return None
        cpus = mem = nodes = billing = None
        gres: list[GresItem] = []
        other: list[tuple[str, str]] = []
        for piece in raw.split(","):
            key, eq, value = piece.partition("=")
            if not eq or not key:
                raise ParseError("TRES", raw, hint=f"the entry {piece!r} is not KEY=VALUE")
            if key == "cpu":
                cpus = _int(value, raw)
            elif key == "mem":
                mem = parse_mem_mb(value)
            elif key == "node":
                nodes = _int(value, raw)
            elif key == "billing":
                billing = _int(value, raw)
            elif key.startswith("gres/"):
                gres.extend(parse_gres(piece))
            else:
                other.append((key, value))
        return cls(raw, cpus, mem, nodes, billing, tuple(gres), tuple(other))

    @property
    def gpus(self) -> int | None:
        """GPUs counted by the untyped ``gres/gpu=N`` entry (typed entries repeat it)."""
        for g in self.gres:
            if g.name == "gpu" and g.type is None:
                return g.count
        return None

    def to_dict(self) -> JSONObject:
        return {
            "text": self.text,
            "cpus": self.cpus,
            "mem_mb": self.mem_mb,
            "nodes": self.nodes,
            "billing": self.billing,
            "gres": [g.to_dict() for g in self.gres],
            "other": dict(self.other),
        }


_CACHE: dict[str, Tres] = {}


def _int(value: str, whole: str) -> int:
    if not (value.isascii() and value.isdigit() and len(value) <= 18):
        raise ParseError("TRES", whole, hint=f"{value!r} is not a whole number")
    return int(value)


_MEM_NUMBER = re.compile(r"[0-9]{1,15}(?:\.[0-9]{1,6})?")


def parse_mem_mb(text: str) -> int:
    """``1000M``, ``62.50G``, ``8G``, ``1000`` (MiB) -> MiB."""
    raw = text.strip()
    unit = raw[-1:].upper()
    number = raw[:-1] if unit in _MEM_UNITS else raw
    factor = _MEM_UNITS.get(unit, 1.0)
    # plain decimals only: float() would also take "nan", "1e999", "1_0" and other scripts' digits
    if _MEM_NUMBER.fullmatch(number) is None:
        raise ParseError("memory size", text, hint="expected a number with K/M/G/T")
    return round(float(number) * factor)
