"""The reader of ``scontrol show …`` text: records of ``KEY=VALUE`` fields, split and read the way Slurm prints
them (see :func:`parse_records`), so that a user's free text never becomes fields."""

from __future__ import annotations

import re
from collections import Counter
from dataclasses import dataclass, field

from slurmlab.core.slurm.scontrol_layouts import LAYOUTS, Layout
from slurmlab.errors import ParseError

__all__ = ["Record", "parse_records"]

_NULL = {"", "(null)", "N/A", "None", "n/a"}
_KEY_AT = re.compile(r"([A-Za-z_][A-Za-z0-9_/:.\-]*)=")
# a non-free value runs to the next whitespace-separated token that reads KEY=
_NEXT_KEY = re.compile(r"\s+(?=[A-Za-z_][A-Za-z0-9_/:.\-]*=)")
# keys of the per-node block "     Nodes=… CPU_IDs=… Mem=… GRES=…" of scontrol show job -d
_DETAIL_KEYS = ("Nodes", "CPU_IDs", "Mem", "GRES")
# Slurm prints the optional JOB_GRES line and the per-node block right after the line that
# ends with CoreSpec=/ThreadSpec= (Socks/Node=… NtasksPerN:B:S:C=… CoreSpec=…)
_BEFORE_DETAIL = frozenset({"CoreSpec", "ThreadSpec"})

_ONELINE_END: dict[str, re.Pattern[str]] = {k: lay.oneline_end() for k, lay in LAYOUTS.items()}


@dataclass
class Record:
    """One ``KEY=VALUE …`` record. ``fields`` holds each key's value (a key appears once);
    ``details`` the per-node blocks of ``show job -d``; ``record_id`` the first key's value."""

    text: str
    fields: dict[str, str] = field(default_factory=dict)
    details: list[dict[str, str]] = field(default_factory=list)
    record_id: str | None = None

    def get(self, key: str) -> str | None:
        value = self.fields.get(key)
        return None if value is None or value.strip() in _NULL else value.strip()

    def need(self, key: str, what: str) -> str:
        value = self.get(key)
        if value is None:
            raise ParseError(what, self.text, hint=f"the record has no {key}=", record_id=self.record_id)
        return value


_NOTHING = re.compile(r"No (?:jobs|job steps|nodes|partitions|reservations) in the system\.?")
_RECORD_ID = re.compile(r"=(\S{1,200})")


def _bad(lines: list[str], why: str, record_id: str | None) -> ParseError:
    return ParseError(
        "scontrol record",
        "\n".join(lines),
        hint=f"{why}; a record laid out otherwise than Slurm prints it is refused, not guessed at",
        record_id=record_id,
    )


def _line_fields(line: str, pos: int, lay: Layout, oneline: bool) -> list[tuple[str, str]]:
    """The KEY=VALUE fields of one printed line, from ``pos``. A free-text field ends where
    Slurm ends it (see Layout); any other value holds no space but the words of a value
    Slurm itself prints with spaces, which never read KEY=."""
    out: list[tuple[str, str]] = []
    end_all = len(line)
    while pos < end_all:
        while pos < end_all and line[pos] in " \t":
            pos += 1
        if pos >= end_all:
            break
        m = _KEY_AT.match(line, pos)
        if m is None:
            raise ValueError(f"{line[pos : pos + 40]!r} is not KEY=VALUE")
        key, start = m.group(1), m.end()
        if key in lay.free:
            if oneline:
                nxt = _ONELINE_END[lay.first_key].search(line, start)
                end = nxt.start() if nxt else end_all
            else:
                follower = lay.free[key]
                # the last one: whatever the user wrote comes before what Slurm prints after it
                end = line.rfind(f" {follower}=", start) if follower else -1
                end = end_all if end < 0 else end
        else:
            nxt = _NEXT_KEY.search(line, start)
            end = nxt.start() if nxt else end_all
        out.append((key, line[start:end]))
        pos = end
    return out


def _read_record(lines: list[str], lay: Layout, oneline: bool) -> Record:
    first = _RECORD_ID.search(lines[0][: len(lay.first_key) + 202])
    rid = first.group(1) if first else None
    rec = Record(text="\n".join(lines), record_id=rid)
    prev: str | None = None
    for n, line in enumerate(lines):
        if not line.strip():
            continue
        indent = len(line) - len(line.lstrip(" "))
        is_detail = False
        if not oneline and n > 0:
            if indent == 5 and lay.detail and line.startswith("Nodes=", 5):
                is_detail = True
            elif indent != 3:
                raise _bad(lines, f"line {n + 1} is indented {indent} spaces (Slurm indents 3)", rid)
        try:
            pairs = _line_fields(line, indent, lay, oneline)
        except ValueError as exc:
            raise _bad(lines, f"line {n + 1}: {exc}", rid) from None
        if not oneline and lay.second and pairs and prev in lay.first_line and pairs[0][0] not in lay.second:
            raise _bad(
                lines, f"the second line starts with {pairs[0][0]}=, not {' or '.join(lay.second)}=", rid
            )
        for key, value in pairs:
            if not oneline and n > 0 and key in lay.first_line:
                raise _bad(lines, f"{key}= is printed on the first line only, not on line {n + 1}", rid)
            if lay.detail and key == "Nodes":
                if prev not in _BEFORE_DETAIL | {"JOB_GRES", "GRES"} or (not oneline and not is_detail):
                    raise _bad(lines, "a per-node Nodes= block where Slurm prints none", rid)
                rec.details.append({"Nodes": value})
            elif lay.detail and rec.details and (is_detail or (oneline and prev in _DETAIL_KEYS)):
                if key in rec.details[-1]:
                    raise _bad(lines, f"{key}= twice in one per-node block", rid)
                rec.details[-1][key] = value
            else:
                if key in rec.fields:
                    raise _bad(lines, f"{key}= appears twice (a value holding a forged line?)", rid)
                if lay.detail and key == "JOB_GRES" and prev not in _BEFORE_DETAIL:
                    raise _bad(lines, "JOB_GRES= away from where Slurm prints it", rid)
                rec.fields[key] = value
            prev = key
    if rid is None or rec.fields.get(lay.first_key) is None:
        raise _bad(lines, f"the record does not start with {lay.first_key}=VALUE", rid)
    return rec


def _chunks(text: str, first_key: str) -> tuple[list[list[str]], bool]:
    """The records' lines, and whether this is the one-line (``-o``) form."""
    lines = text.splitlines()
    oneline = not any(line.startswith(" ") and line.strip() for line in lines)
    chunks: list[list[str]] = []
    for line in lines:
        if line.startswith(first_key + "="):
            chunks.append([line])
        elif not line.strip():
            continue
        elif chunks and not oneline:
            chunks[-1].append(line)
        elif chunks:
            chunks.append([line])  # a stray line of the one-line form: its own (bad) record
        else:
            raise ParseError(f"scontrol output (records start with {first_key}=)", line)
    return chunks, oneline


def parse_records(text: str, first_key: str, problems: list[ParseError] | None = None) -> list[Record]:
    """Split ``text`` into records starting with ``first_key=`` and read their fields.

    The multi-line form (what slurmlab runs) is read the way Slurm prints it: records start at
    column 0, their lines are indented 3 spaces (a job's per-node lines 5), and a free-text
    value (JobName, Comment, WorkDir, StdOut, node Reason, …) ends only where Slurm ends it,
    so a name such as ``y UserId=root(0)`` stays the name. A record that does not fit (a key
    twice, a forged line, a per-node block out of place) is refused with ParseError; so are
    two records with the same id. The one-line ``-o`` form is read on a best-effort basis
    (free text ends at the next known key): slurmlab never takes a decision from it.

    With ``problems`` a list, a bad record is skipped and its ParseError appended there;
    without, the first one raises. scontrol's answer for an empty list (``No jobs in the
    system``, …) is no records, not an error.
    """
    if _NOTHING.fullmatch(text.strip()):
        return []
    lay = LAYOUTS.get(first_key) or Layout(first_key=first_key, free={})
    chunks, oneline = _chunks(text, first_key)
    read: list[Record | ParseError] = []
    for lines in chunks:
        try:
            read.append(_read_record(lines, lay, oneline))
        except ParseError as exc:
            read.append(exc)
    counts = Counter(r.record_id for r in read if isinstance(r, Record))
    records: list[Record] = []
    for r in read:
        if isinstance(r, Record) and counts[r.record_id] > 1:
            r = _bad(r.text.splitlines(), f"{first_key}={r.record_id} is printed more than once", r.record_id)
        if isinstance(r, ParseError):
            if problems is None:
                raise r
            problems.append(r)
        else:
            records.append(r)
    return records
