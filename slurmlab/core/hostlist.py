"""Slurm hostlist expressions: ``node[1-3,7],gpu-a[01-04]``.

API::

    expand(expr: str) -> list[str]        # "node[1-2],gpu[01-02]" -> ["node1", "node2", "gpu01", "gpu02"]
    compress(names: Iterable[str]) -> str # the inverse; keeps the order, so expand(compress(x)) == x

Grammar (as Slurm writes it): a comma-separated list (commas inside brackets do not split) of
items ``text[ranges]text[ranges]...``; a range list is ``a``, ``a-b`` or a mix joined by commas.
Zero padding comes from the lower bound (``[01-10]`` -> ``01 … 10``). Several bracket groups in
one item expand as a product, leftmost slowest (``r[1-2]n[1-2]`` -> r1n1 r1n2 r2n1 r2n2).
``(null)``, ``N/A`` and the empty string are the empty list. Malformed text raises ParseError.
"""

from __future__ import annotations

import re
from collections.abc import Iterable

from slurmlab.errors import ParseError

__all__ = ["compress", "expand"]

_EMPTY = {"", "(null)", "N/A", "None", "(none)"}
_RANGE = re.compile(r"(\d+)(?:-(\d+))?")
_TAIL_NUMBER = re.compile(r"^(.*?)(\d+)(\D*)$")
# Ranges this long are almost certainly a typo; refuse rather than allocate millions of names.
_MAX_NAMES = 1_000_000


def _split_top(expr: str) -> list[str]:
    parts: list[str] = []
    depth = 0
    start = 0
    for i, ch in enumerate(expr):
        if ch == "[":
            depth += 1
            if depth > 1:
                raise ParseError("hostlist", expr, hint="brackets cannot nest")
        elif ch == "]":
            depth -= 1
            if depth < 0:
                raise ParseError("hostlist", expr, hint="a ']' has no matching '['")
        elif ch == "," and depth == 0:
            parts.append(expr[start:i])
            start = i + 1
    if depth != 0:
        raise ParseError("hostlist", expr, hint="a '[' is never closed")
    parts.append(expr[start:])
    return parts


def _expand_ranges(body: str, expr: str) -> list[str]:
    out: list[str] = []
    for piece in body.split(","):
        m = _RANGE.fullmatch(piece.strip())
        if m is None:
            raise ParseError("hostlist range", piece, hint=f"in {expr!r}; expected N or N-M")
        lo_s, hi_s = m.group(1), m.group(2)
        lo = int(lo_s)
        hi = int(hi_s) if hi_s is not None else lo
        if hi < lo:
            raise ParseError("hostlist range", piece, hint=f"in {expr!r}; the upper bound is below the lower")
        if hi - lo >= _MAX_NAMES:
            raise ParseError("hostlist range", piece, hint="more than a million names")
        width = len(lo_s)
        out.extend(str(n).zfill(width) for n in range(lo, hi + 1))
    return out


def _expand_item(item: str, expr: str) -> list[str]:
    names = [""]
    pos = 0
    while pos < len(item):
        open_at = item.find("[", pos)
        if open_at < 0:
            text = item[pos:]
            names = [n + text for n in names]
            break
        close_at = item.index("]", open_at)  # _split_top guaranteed it is closed
        prefix = item[pos:open_at]
        choices = _expand_ranges(item[open_at + 1 : close_at], expr)
        names = [n + prefix + c for n in names for c in choices]
        if len(names) > _MAX_NAMES:
            raise ParseError("hostlist", expr, hint="more than a million names")
        pos = close_at + 1
    if any(ch.isspace() for ch in item) or not item:
        raise ParseError("hostlist", expr, hint="an empty name or whitespace inside a name")
    return names


def expand(expr: str) -> list[str]:
    """Every host name of a Slurm hostlist expression, in Slurm's order."""
    text = expr.strip()
    if text in _EMPTY:
        return []
    out: list[str] = []
    for item in _split_top(text):
        out.extend(_expand_item(item, text))
    return out


def _fits(digits: str, width: int) -> bool:
    return str(int(digits)).zfill(width) == digits


def compress(names: Iterable[str]) -> str:
    """A hostlist expression for ``names`` that expands back to the same list, in order.

    Consecutive names that share text around a trailing number fold into one bracket group;
    runs of consecutive numbers become ``a-b``. Names holding ``[``, ``]``, ``,`` or
    whitespace cannot be written as a hostlist and raise ParseError.
    """
    items: list[str] = []
    # current group: (prefix, suffix, width, list of [lo, hi] runs)
    group: tuple[str, str, int, list[list[int]]] | None = None

    def flush() -> None:
        nonlocal group
        if group is None:
            return
        prefix, suffix, width, runs = group
        pieces = [
            str(lo).zfill(width) if lo == hi else f"{str(lo).zfill(width)}-{str(hi).zfill(width)}"
            for lo, hi in runs
        ]
        if len(pieces) == 1 and runs[0][0] == runs[0][1]:
            items.append(f"{prefix}{pieces[0]}{suffix}")
        else:
            items.append(f"{prefix}[{','.join(pieces)}]{suffix}")
        group = None

    for name in names:
        if not name or any(ch in name for ch in "[],") or any(ch.isspace() for ch in name):
            raise ParseError(
                "host name", name, hint="a host name cannot be empty or hold '[', ']', ',' or spaces"
            )
        m = _TAIL_NUMBER.match(name)
        if m is None:
            flush()
            items.append(name)
            continue
        prefix, digits, suffix = m.group(1), m.group(2), m.group(3)
        number = int(digits)
        if group is not None and group[0] == prefix and group[1] == suffix and _fits(digits, group[2]):
            runs = group[3]
            if runs[-1][1] + 1 == number and runs[-1][1] >= runs[-1][0]:
                runs[-1][1] = number
            else:
                runs.append([number, number])
            continue
        flush()
        # A zero-padded number fixes the width; otherwise width 1 lets node9,node10 share a group.
        width = len(digits) if digits.startswith("0") and len(digits) > 1 else 1
        if not _fits(digits, width):
            width = len(digits)
        group = (prefix, suffix, width, [[number, number]])
    flush()
    return ",".join(items)
