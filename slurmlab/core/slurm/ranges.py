"""Lists of small ids written as ranges: ``0-2,5`` <-> (0, 1, 2, 5).

API::

    parse_index_list(text, what="index list") -> tuple[int, ...]   # in the order written; "" -> ()
    render_index_list(ids) -> str                                   # the inverse; keeps the order
    MAX_IDS                                                         # the most ids one list may name

One grammar for every such list slurmlab reads: GPU indices in ``IDX:``/``SLURM_STEP_GPUS``,
sockets in ``S:``, ``CPU_IDs=``, the kernel's cpulist (``/proc/self/status``), nvidia-smi's CPU and
NUMA affinity, and the ranges of a sandbox profile. Pieces are ``N`` or ``N-M`` (ASCII digits,
M >= N) joined by commas; whitespace around a piece is allowed, an empty piece is not.
Slurm's words for "none" (``N/A``, ``(null)``) belong to the field that holds the list: the
caller decides what they mean there.
"""

from __future__ import annotations

import re
from collections.abc import Iterable

from slurmlab.errors import ParseError

__all__ = ["MAX_IDS", "parse_index_list", "render_index_list"]

# The largest nodes have a few thousand CPUs; a list past this is corrupt text, and counting
# before building keeps memory bounded whatever the ranges say.
MAX_IDS = 65_536
# ASCII digits only (str.isdigit takes other scripts), few enough for int()
_PIECE = re.compile(r"([0-9]{1,9})(?:-([0-9]{1,9}))?")


def parse_index_list(text: str, what: str = "index list") -> tuple[int, ...]:
    """``0-2,5`` -> (0, 1, 2, 5); the empty string -> (). Raises ParseError quoting the text."""
    text = text.strip()
    if not text:
        return ()
    bounds: list[tuple[int, int]] = []
    total = 0
    for piece in text.split(","):
        m = _PIECE.fullmatch(piece.strip())
        if m is None:
            raise ParseError(
                what, text[:200], hint=f"the piece {piece[:40]!r} is not N or N-M (e.g. 0-15,32-47)"
            )
        lo = int(m.group(1))
        hi = int(m.group(2)) if m.group(2) is not None else lo
        if hi < lo:
            raise ParseError(what, text[:200], hint=f"the range {piece[:40]!r} runs backwards")
        total += hi - lo + 1
        if total > MAX_IDS:
            raise ParseError(
                what, text[:200], hint=f"more than {MAX_IDS} ids: {piece[:40]!r} is implausibly large"
            )
        bounds.append((lo, hi))
    return tuple(i for lo, hi in bounds for i in range(lo, hi + 1))


def render_index_list(indices: Iterable[int]) -> str:
    """(0, 1, 2, 5) -> ``0-2,5`` (runs of consecutive numbers fold; the order is kept)."""
    runs: list[list[int]] = []
    for i in indices:
        if runs and runs[-1][1] + 1 == i:
            runs[-1][1] = i
        else:
            runs.append([i, i])
    return ",".join(str(a) if a == b else f"{a}-{b}" for a, b in runs)
