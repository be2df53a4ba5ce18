"""Recognise a piece of Slurm output, JSON or text, and parse it into models.

API::

    detect_and_parse(text: str, tz=None) -> Parsed
    Parsed(kind, version, layout, items, notes); .to_dict()
    TextRow(columns, cells); .to_dict()       # rows of outputs that have no richer model

Kinds and the layouts recognised::

    jobs        squeue --json, scontrol --json show job -d (openapi/v0.0.38, data_parser/v0.0.40+),
                scontrol show job -d text (multi-line "scontrol-text" or one-line "scontrol-oneline")
    nodes       sinfo --json, scontrol --json show node, scontrol show node [-d] [-o]
    partitions  scontrol --json show partition, scontrol show partition
    steps       scontrol --json show steps, scontrol show steps / show step -d
    brief       squeue -h -o BRIEF_FORMAT  (-> JobBrief)
    version     sinfo --version
    submitted   sbatch output "Submitted batch job N" or --parsable "N[;cluster]"
    config      scontrol show config  (key/value rows)
    table       column output of squeue -o/-O/-l/-s and sinfo -o/-O (header -> cells; with -h, no header)
    hostnames   scontrol show hostnames

YAML (``--yaml``) is refused with a ParseError saying to use ``--json``. Anything else raises
ParseError quoting the start of the text. Rows are never dropped: a table whose rows have more
cells than its header keeps every cell and says so in ``notes``.
"""

from __future__ import annotations

import re
from collections.abc import Mapping
from dataclasses import dataclass
from datetime import tzinfo
from typing import Protocol

from slurmlab.core.jsontypes import JSONObject
from slurmlab.core.slurm import parse_json as pj
from slurmlab.core.slurm import parse_text as pt
from slurmlab.core.slurm.squeue_brief import BRIEF_FIELDS, parse_squeue_brief
from slurmlab.errors import ParseError

__all__ = ["Parsed", "TextRow", "detect_and_parse"]


class _HasDict(Protocol):
    def to_dict(self) -> JSONObject: ...


@dataclass(frozen=True)
class TextRow:
    """One row of an output with no richer model; ``columns`` may be shorter than ``cells``."""

    columns: tuple[str, ...]
    cells: tuple[str, ...]

    def to_dict(self) -> JSONObject:
        if len(self.columns) == len(self.cells):
            return dict(zip(self.columns, self.cells, strict=True))
        return {"columns": list(self.columns), "cells": list(self.cells)}


@dataclass(frozen=True)
class Parsed:
    kind: str
    version: str | None
    layout: str
    items: tuple[_HasDict, ...]
    notes: tuple[str, ...] = ()

    def to_dict(self) -> JSONObject:
        return {
            "kind": self.kind,
            "version": self.version,
            "layout": self.layout,
            "notes": list(self.notes),
            "items": [i.to_dict() for i in self.items],
        }


_DATE_LINE = re.compile(r"^\w{3} \w{3} +\d+ \d\d:\d\d:\d\d \d{4}$")
_HEADER_TOKEN = re.compile(r"^[A-Z][A-Z0-9_()%/:.\-]*$")
_SUBMITTED = re.compile(r"^Submitted batch job (\d+)(?: on cluster (\S+))?$")
_PARSABLE = re.compile(r"^(\d+)(?:;(\S+))?$")
_HOSTNAME = re.compile(r"^[A-Za-z][A-Za-z0-9_.\-]*$")
_CONFIG_LINE = re.compile(r"^(\S+)\s*=\s?(.*)$")


def _parse_json(text: str) -> Parsed:
    doc = pj.load_json(text)
    if not isinstance(doc, dict):
        raise ParseError(
            "Slurm JSON", text[:200], hint="expected an object with 'meta' and a list of records"
        )
    meta = pj.json_meta(doc)
    layout = meta.layout or "json"
    items: list[_HasDict]
    if "jobs" in doc:
        kind, items = "jobs", list(pj.parse_jobs_json(doc))
    elif "sinfo" in doc or "nodes" in doc:
        kind, items = "nodes", list(pj.parse_nodes_json(doc))
    elif "partitions" in doc:
        kind, items = "partitions", list(pj.parse_partitions_json(doc))
    elif "steps" in doc:
        kind, items = "steps", list(pj.parse_steps_json(doc))
    else:
        raise ParseError(
            "Slurm JSON",
            text[:200],
            hint="no jobs, nodes, sinfo, partitions or steps list found (keys: "
            + ", ".join(sorted(doc))
            + ")",
        )
    notes = tuple(f"Slurm reported: {e}" for e in _errors_of(doc))
    return Parsed(kind, meta.version, layout, tuple(items), notes)


def _errors_of(doc: Mapping[str, object]) -> list[object]:
    """Slurm's ``errors`` list; anything else there is a corrupted document, said so."""
    errors = doc.get("errors") or []
    if not isinstance(errors, list):
        raise ParseError("Slurm JSON 'errors'", repr(errors)[:200], hint="Slurm writes a list of errors here")
    return errors


def _table(lines: list[str]) -> Parsed | None:
    notes: list[str] = []
    if lines and _DATE_LINE.match(lines[0].strip()):
        notes.append(f"report time: {lines[0].strip()}")
        lines = lines[1:]
    if not lines:
        return None
    first = lines[0].split()
    if len(first) >= 2 and all(_HEADER_TOKEN.match(t) for t in first):
        columns = tuple(first)
        rows: list[TextRow] = []
        widest = len(columns)
        for line in lines[1:]:
            cells = line.split()
            if len(cells) < len(columns):
                # squeue leaves the last column (e.g. NODELIST(REASON)) blank for some jobs
                cells += [""] * (len(columns) - len(cells))
            widest = max(widest, len(cells))
            rows.append(TextRow(columns, tuple(cells)))
        if widest > len(columns):
            notes.append(
                f"rows have up to {widest} cells but the header names {len(columns)} columns "
                "(narrow -O widths glue header names together); all cells are kept"
            )
        return Parsed("table", None, "table", tuple(rows), tuple(notes))
    # headerless (-h) column output: every line the same shape, with some numbers in it
    counts = {len(line.split()) for line in lines}
    if (
        len(lines) >= 2
        and len(counts) == 1
        and counts.pop() >= 2
        and all(re.search(r"\d", ln) for ln in lines)
    ):
        rows = [TextRow((), tuple(line.split())) for line in lines]
        return Parsed("table", None, "table-noheader", tuple(rows), tuple(notes))
    return None


def detect_and_parse(text: str, tz: tzinfo | None = None) -> Parsed:
    """Parse any output listed in the module docstring; ParseError for anything else."""
    stripped = text.strip()
    if not stripped:
        raise ParseError("Slurm output", text, hint="the input is empty")
    if stripped.startswith(("%YAML", "---")) or stripped.startswith("!!"):
        raise ParseError(
            "Slurm output",
            stripped[:80],
            hint="YAML output is not supported; run the command with --json instead of --yaml",
        )
    if stripped[0] in "{[":
        return _parse_json(stripped)
    lines = [ln for ln in stripped.splitlines() if ln.strip()]
    head = lines[0]
    if head.startswith("JobId="):
        items_j = pt.parse_scontrol_jobs(stripped, tz)
        layout = "scontrol-oneline" if len(lines) == len(items_j) else "scontrol-text"
        return Parsed("jobs", None, layout, tuple(items_j))
    if head.startswith("NodeName="):
        items_n = pt.parse_scontrol_nodes(stripped)
        layout = "scontrol-oneline" if len(lines) == len(items_n) else "scontrol-text"
        return Parsed("nodes", _node_version(stripped), layout, tuple(items_n))
    if head.startswith("PartitionName="):
        items_p = pt.parse_scontrol_partitions(stripped)
        layout = "scontrol-oneline" if len(lines) == len(items_p) else "scontrol-text"
        return Parsed("partitions", None, layout, tuple(items_p))
    if head.startswith("StepId="):
        return Parsed("steps", None, "scontrol-text", tuple(pt.parse_scontrol_steps(stripped, tz)))
    if head.startswith("slurm") and len(lines) == 1:
        version = pt.parse_version(head)
        return Parsed("version", version, "sinfo-version", (TextRow(("version",), (version,)),))
    if head.count("|") >= len(BRIEF_FIELDS) - 1:
        return Parsed("brief", None, "squeue-brief", tuple(parse_squeue_brief(stripped, tz)))
    submitted = [(_SUBMITTED.match(ln.strip()) or _PARSABLE.match(ln.strip())) for ln in lines]
    if all(submitted):
        rows = tuple(TextRow(("job_id", "cluster"), (m.group(1), m.group(2) or "")) for m in submitted if m)
        return Parsed("submitted", None, "sbatch", rows)
    if head.startswith("Configuration data as of"):
        return _config(lines)
    table = _table(lines)
    if table is not None:
        return table
    if all(len(ln.split()) == 1 and _HOSTNAME.match(ln.strip()) for ln in lines) and len(lines) >= 2:
        return Parsed(
            "hostnames", None, "hostnames", tuple(TextRow(("host",), (ln.strip(),)) for ln in lines)
        )
    raise ParseError(
        "Slurm output",
        stripped[:200],
        hint="not a recognised Slurm output (JSON of squeue/sinfo/scontrol, scontrol show text, "
        "squeue/sinfo columns, sinfo --version, sbatch)",
    )


def _node_version(text: str) -> str | None:
    m = re.search(r"\bVersion=(\d+\.\d+\.\d+)", text)
    return m.group(1) if m else None


def _config(lines: list[str]) -> Parsed:
    rows: list[TextRow] = []
    notes = [lines[0].strip()]
    for line in lines[1:]:
        m = _CONFIG_LINE.match(line.strip())
        if m is None:
            # sections such as "Cgroup Support Configuration:" carry no value; keep them visibly
            rows.append(TextRow(("key", "value"), (line.strip(), "")))
            continue
        rows.append(TextRow(("key", "value"), (m.group(1), m.group(2))))
    version = next((r.cells[1] for r in rows if r.cells[0] == "SLURM_VERSION"), None)
    return Parsed("config", version, "scontrol-config", tuple(rows), tuple(notes))
