"""Slurm hostlist expressions: ``node[1-3,7],gpu-a[01-04]``.

API::

    expand(expr: str) -> list[str]        # "node[1-2],gpu[01-02]" -> ["node1", "node2", "gpu01", "gpu02"]
    count(expr: str) -> int               # len(expand(expr)), computed without expanding
    compress(names: Iterable[str]) -> str # the inverse; keeps the order, so expand(compress(x)) == x

Grammar (as Slurm writes it): a comma-separated list (commas inside brackets do not split) of
items ``text[ranges]text[ranges]...``; a range list is ``a``, ``a-b`` or a mix joined by commas.
Zero padding comes from the lower bound (``[01-10]`` -> ``01 … 10``). Several bracket groups in
one item expand as a product, leftmost slowest (``r[1-2]n[1-2]`` -> r1n1 r1n2 r2n1 r2n2).
``(null)``, ``N/A`` and the empty string are the empty list. Malformed text raises ParseError,
and so does a list of more than MAX_NAMES names (counted before anything is built).
"""

from __future__ import annotations

import re
from collections.abc import Iterable

from slurmlab.errors import ParseError

__all__ = ["MAX_NAMES", "compress", "count", "expand", "split_top"]

_EMPTY = {"", "(null)", "N/A", "None", "(none)"}
# ASCII digits only, and few enough that int() never meets Python's 4300-digit limit
_RANGE = re.compile(r"([0-9]{1,18})(?:-([0-9]{1,18}))?")
_TAIL_NUMBER = re.compile(r"^(.*?)([0-9]+)(\D*)$")
# The largest Slurm clusters run tens of thousands of nodes, so no real hostlist comes near
# 200k names; past that the text is hostile or broken (a job name can hold a hostlist that
# reaches scontrol's output). 200k short strings is ~15 MB, so one expansion stays bounded.
MAX_NAMES = 200_000


def split_top(text: str, what: str, brackets: str = "[]", *, nest: bool = False) -> list[str]:
    """``text`` split at the commas outside ``brackets`` (a ParseError naming ``what`` for unbalanced ones, and
    for nested ones unless ``nest``): hostlists (``n[1,3],m``) and GRES lists (``gpu:a:1(IDX:0,2),shard``)."""
    opening, closing = brackets[0], brackets[1]
    parts: list[str] = []
    depth = 0
    start = 0
    for i, ch in enumerate(text):
        if ch == opening:
            depth += 1
            if depth > 1 and not nest:
                raise ParseError(what, text, hint="brackets cannot nest")
        elif ch == closing:
            depth -= 1
            if depth < 0:
                raise ParseError(what, text, hint=f"a '{closing}' has no matching '{opening}'")
        elif ch == "," and depth == 0:
            parts.append(text[start:i])
            start = i + 1
    if depth != 0:
        raise ParseError(what, text, hint=f"a '{opening}' is never closed")
    parts.append(text[start:])
    return parts


def _split_top(expr: str) -> list[str]:
    return split_top(expr, "hostlist")


def _ranges(body: str, expr: str) -> list[tuple[int, int, int]]:
    """The (lo, hi, width) ranges of one bracket group, checked but not expanded."""
    out: list[tuple[int, int, int]] = []
    for piece in body.split(","):
        m = _RANGE.fullmatch(piece.strip())
        if m is None:
            raise ParseError("hostlist range", piece, hint=f"in {expr[:200]!r}; expected N or N-M")
        lo_s, hi_s = m.group(1), m.group(2)
        lo = int(lo_s)
        hi = int(hi_s) if hi_s is not None else lo
        if hi < lo:
            raise ParseError(
                "hostlist range", piece, hint=f"in {expr[:200]!r}; the upper bound is below the lower"
            )
        out.append((lo, hi, len(lo_s)))
    return out


def _parse_item(item: str, expr: str) -> tuple[list[tuple[str, list[tuple[int, int, int]]]], str]:
    """``pre[ranges]pre[ranges]tail`` -> ([(pre, ranges), …], tail)."""
    if not item or any(ch.isspace() or ord(ch) < 32 or ch == "\x7f" for ch in item):
        raise ParseError(
            "hostlist", expr, hint="an empty name, or whitespace or a control character in a name"
        )
    groups: list[tuple[str, list[tuple[int, int, int]]]] = []
    pos = 0
    while True:
        open_at = item.find("[", pos)
        if open_at < 0:
            return groups, item[pos:]
        close_at = item.index("]", open_at)  # _split_top guaranteed it is closed
        groups.append((item[pos:open_at], _ranges(item[open_at + 1 : close_at], expr)))
        pos = close_at + 1


def count(expr: str) -> int:
    """How many names ``expr`` expands to, without building them (ParseError if malformed)."""
    text = expr.strip()
    if text in _EMPTY:
        return 0
    total = 0
    for item in _split_top(text):
        groups, _tail = _parse_item(item, text)
        n = 1
        for _pre, ranges in groups:
            n *= sum(hi - lo + 1 for lo, hi, _w in ranges)
        total += n
    return total


def expand(expr: str) -> list[str]:
    """Every host name of a Slurm hostlist expression, in Slurm's order.

    The names are counted before any is built: past MAX_NAMES it raises ParseError at once,
    whatever the product of the ranges would have been."""
    text = expr.strip()
    if text in _EMPTY:
        return []
    parsed = [_parse_item(item, text) for item in _split_top(text)]
    total = 0
    for groups, _tail in parsed:
        n = 1
        for _pre, ranges in groups:
            n *= sum(hi - lo + 1 for lo, hi, _w in ranges)
        total += n
    if total > MAX_NAMES:
        raise ParseError(
            "hostlist",
            text,
            hint=f"it names {total:,} hosts, more than the {MAX_NAMES:,} any real cluster has",
        )
    out: list[str] = []
    for groups, tail in parsed:
        names = [""]
        for pre, ranges in groups:
            choices = [str(n).zfill(w) for lo, hi, w in ranges for n in range(lo, hi + 1)]
            names = [a + pre + c for a in names for c in choices]
        out.extend(a + tail for a in names)
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
        if m is None or len(m.group(2)) > 18:  # no number, or one too long to be a node's index
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
