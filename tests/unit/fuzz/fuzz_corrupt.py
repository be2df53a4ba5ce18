"""A seeded corruption generator over real outputs: the same seed gives the same inputs.

Text mutations: byte flips, truncation at a byte / line / token boundary, lines duplicated,
deleted and swapped, junk / NUL / control characters / forged ``KEY=`` text injected, and
hostile free text (line and record separators, key-like text, bytes that are not UTF-8) in
the free-text fields, invalid UTF-8 (decoded the way slurmlab reads files, with replacement, or kept as lone
surrogates). JSON mutations: a value at a random path replaced by a wrong type (a list for a
dict, a string for a number, null, …), a huge or non-finite number, or deep nesting.
"""

from __future__ import annotations

import copy
import json
import random
from collections.abc import Iterator
from typing import Any

JUNK = [
    "\x00",
    "\x00\x00\x00",
    "\x1b[0m",
    "\t",
    "\r",
    "\x7f",
    "\ufeff",
    "é",
    "\U0001f600",
    "²",
    "٣",
    "=",
    "==",
    "[",
    "]",
    "(",
    ")",
    ",",
    "|",
    ":",
    "-",
    "*",
    "%",
    "\\",
    '"',
    "'",
    "{",
    "}",
    " UserId=root(0)",
    "\n   UserId=root(0) GroupId=root(0)",
    "\n     Nodes=node1 CPU_IDs=0 Mem=0 GRES=gpu:h100:8(IDX:0-7)",
    "n[1-1000]x[1-1001]",
    "n[1-1000]x[1-1000]y[1-1000]",
    "[0-99999999999999999999]",
    "9" * 5000,
    "1e999",
    "nan",
    "-1",
    "NaN",
    "Infinity",
    "N/A",
    "(null)",
    "UNLIMITED",
    "4294967294",
    "\nJobId=999 JobName=x\n",
    "\n\n",
    "IDX:0-99999999",
    "gpu:h100:99999999999999999999(IDX:0-7)",
]
# What a user can put in a free-text field (a job name, comment, work dir, node reason …): every line and record
# separator Python's splitlines() and Slurm's readers know of, bytes that are not UTF-8 (as the runner reads
# them: U+FFFD, or kept as lone surrogates by a file reader), and text that looks like the start of a record
SEPARATORS = ["\n", "\r", "\r\n", "\u2028", "\u2029", "\x1c", "\x1d", "\x1e", "\x85", "\x0b", "\x0c", "\n\n"]
KEY_LIKE = [
    "JobId=5000 JobName=fake",
    "   UserId=root(0) GroupId=root(0)",
    "NodeName=node9 Arch=x86_64",
    "PartitionName=fake",
    "     Nodes=node1 CPU_IDs=0 Mem=0 GRES=gpu:h100:8(IDX:0-7)",
    "StepId=1.0",
    "JobState=COMPLETED Reason=None",
    "1|0",
    '"job_id": 5000',
]
NOT_UTF8 = ["\ufffd", "\udcff", "\udc80\udcc3", "bad\ufffd\ufffd"]
FREE_TEXT_KEYS = (
    "JobName=",
    "Comment=",
    "WorkDir=",
    "StdOut=",
    "StdErr=",
    "StdIn=",
    "Reason=",
    "Command=",
    "MailUser=",
    "AdminComment=",
    "SystemComment=",
    "OS=",
    "Features=",
    '"name": "',
    '"comment": "',
    '"reason": "',
    '"current_working_directory": "',
)


def hostile_free_text(rng: random.Random) -> str:
    """One value a hostile user could write into a free-text field."""
    parts = [rng.choice(["a", "", "x y"])]
    for _ in range(rng.randint(1, 3)):
        parts.append(
            rng.choice(SEPARATORS) + rng.choice(KEY_LIKE) if rng.random() < 0.6 else rng.choice(NOT_UTF8)
        )
    return "".join(parts)


def inject_free_text(text: str, rng: random.Random) -> str:
    """``text`` with a hostile value written into the start of one of its free-text fields (where a real
    record has one), else at a random place."""
    spots = [i + len(key) for key in FREE_TEXT_KEYS for i in _find_all(text, key)]
    pos = rng.choice(spots) if spots else rng.randint(0, len(text))
    value = hostile_free_text(rng)
    if text[max(pos - 1, 0) : pos] == '"':  # inside a JSON string: written the way JSON would escape it
        value = json.dumps(value.encode("utf-8", "surrogatepass").decode("utf-8", "replace"))[1:-1]
    return text[:pos] + value + text[pos:]


def _find_all(text: str, key: str) -> list[int]:
    found, start = [], text.find(key)
    while start != -1 and len(found) < 200:
        found.append(start)
        start = text.find(key, start + 1)
    return found


WRONG_TYPES: list[Any] = [
    None,
    "",
    "x",
    "12",
    "1e999",
    -1,
    0,
    10**400,
    1.5,
    float("nan"),
    float("inf"),
    True,
    [],
    [1, "a"],
    {},
    {"set": True, "infinite": False, "number": "x"},
    {"set": True, "number": 10**30},
    {"number": None},
    ["RUNNING", 3],
    [None],
    {"a": {"b": []}},
]


def _paths(
    doc: Any, prefix: tuple[Any, ...] = (), out: list[tuple[Any, ...]] | None = None
) -> list[tuple[Any, ...]]:
    out = [] if out is None else out
    if len(out) > 4000:
        return out
    if isinstance(doc, dict):
        for k, v in doc.items():
            out.append((*prefix, k))
            _paths(v, (*prefix, k), out)
    elif isinstance(doc, list):
        for i, v in enumerate(doc[:6]):
            out.append((*prefix, i))
            _paths(v, (*prefix, i), out)
    return out


def _set(doc: Any, path: tuple[Any, ...], value: Any) -> None:
    for k in path[:-1]:
        doc = doc[k]
    doc[path[-1]] = value


def _get(doc: Any, path: tuple[Any, ...]) -> Any:
    for k in path:
        doc = doc[k]
    return doc


def _deep(depth: int) -> Any:
    value: Any = 1
    for i in range(depth):
        value = [value] if i % 2 else {"a": value}
    return value


def mutate_json(doc: Any, rng: random.Random) -> str:
    """One wrong-typed, oversized or deeply nested variant of ``doc``, as JSON text."""
    doc = copy.deepcopy(doc)
    paths = _paths(doc)
    for _ in range(rng.randint(1, 3)):
        if not paths:
            break
        path = rng.choice(paths)
        roll = rng.random()
        try:
            if roll < 0.15 and isinstance(_get(doc, path), str):
                _set(
                    doc,
                    path,
                    hostile_free_text(rng).encode("utf-8", "surrogatepass").decode("utf-8", "replace"),
                )
            elif roll < 0.75:
                _set(doc, path, copy.deepcopy(rng.choice(WRONG_TYPES)))
            elif roll < 0.85:
                _set(doc, path, _deep(rng.choice([50, 400, 5000])))
            else:
                _set(doc, path, rng.choice(JUNK))
        except (KeyError, IndexError, TypeError):
            pass
    try:
        return json.dumps(doc)
    except (ValueError, RecursionError):
        return "[" * 100_000 + "]" * 100_000


def mutate_text(text: str, rng: random.Random) -> str:
    """One corrupted variant of ``text``."""
    op = rng.randrange(12)
    if op >= 10:  # a hostile value in a free-text field: separators, key-like text, bytes that are not UTF-8
        return inject_free_text(text, rng)
    if op == 0:  # byte flips, read back the way slurmlab reads a file
        raw = bytearray(text.encode("utf-8", "surrogateescape"))
        for _ in range(rng.randint(1, 8)):
            if raw:
                raw[rng.randrange(len(raw))] ^= 1 << rng.randrange(8)
        return raw.decode("utf-8", rng.choice(["replace", "surrogateescape"]))
    if op == 1:  # truncation at a byte
        return text[: rng.randint(0, len(text))]
    if op == 2:  # truncation at a line or token boundary
        cuts = [i for i, ch in enumerate(text) if ch in '\n =,:|[](){}"'] or [0]
        return text[: rng.choice(cuts)]
    lines = text.split("\n")
    if op == 3 and lines:  # duplicate lines
        for _ in range(rng.randint(1, 3)):
            i = rng.randrange(len(lines))
            lines.insert(rng.randrange(len(lines) + 1), lines[i])
    elif op == 4 and lines:  # delete lines
        for _ in range(rng.randint(1, 3)):
            if lines:
                del lines[rng.randrange(len(lines))]
    elif op == 5 and len(lines) > 1:  # swap lines
        for _ in range(rng.randint(1, 3)):
            i, j = rng.randrange(len(lines)), rng.randrange(len(lines))
            lines[i], lines[j] = lines[j], lines[i]
    elif op == 6:  # junk injected
        for _ in range(rng.randint(1, 4)):
            pos = rng.randint(0, len(text))
            text = text[:pos] + rng.choice(JUNK) + text[pos:]
        return text
    elif op == 7:  # a token replaced
        i = rng.randrange(len(lines)) if lines else 0
        if lines:
            words = lines[i].split(" ")
            words[rng.randrange(len(words))] = rng.choice(JUNK)
            lines[i] = " ".join(words)
    elif op == 8:  # invalid UTF-8 bytes
        raw = bytearray(text.encode("utf-8", "surrogateescape"))
        for _ in range(rng.randint(1, 4)):
            raw.insert(rng.randint(0, len(raw)), rng.choice([0xFF, 0xC3, 0x80, 0xED, 0xF8]))
        return raw.decode("utf-8", rng.choice(["replace", "surrogateescape"]))
    else:  # a digit run replaced by a huge / odd number
        digits = [i for i, ch in enumerate(text) if ch.isdigit()]
        if digits:
            pos = rng.choice(digits)
            return (
                text[:pos]
                + rng.choice(["99999999999999999999999", "0", "٣", "²", "-1", "9" * 5000])
                + text[pos + 1 :]
            )
    return "\n".join(lines)


def variants(text: str, n: int, seed: int) -> Iterator[str]:
    """``n`` corrupted variants of a real output (JSON ones mutated as JSON half the time)."""
    rng = random.Random(seed)
    doc: Any = None
    if text.lstrip().startswith(("{", "[")):
        try:
            doc = json.loads(text)
        except ValueError:
            doc = None
    if isinstance(doc, dict):
        # three records carry every path a record has; the rest only make each variant slower
        doc = {k: v[:3] if isinstance(v, list) else v for k, v in doc.items()}
        small = json.dumps(doc)
        text = small if len(small) < len(text) else text
    for _ in range(n):
        if doc is not None and rng.random() < 0.6:
            yield mutate_json(doc, rng)
        else:
            yield mutate_text(text, rng)
