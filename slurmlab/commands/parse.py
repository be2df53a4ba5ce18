"""``slurmlab parse FILE|-``: parse saved Slurm output and print the models.

Users attach the JSON to bug reports; ``--format table`` is for reading. Exit code 2 and a
one-line error for anything that does not parse.
"""

from __future__ import annotations

import argparse
import json
import sys
from typing import Any

from slurmlab.errors import ParseError


def register(subparsers: Any) -> None:
    p = subparsers.add_parser(
        "parse",
        help="parse saved Slurm output (squeue/sinfo/scontrol JSON or text) and print it",
        description="Recognise and parse Slurm output (any version's JSON, scontrol text, squeue/sinfo "
        "columns, sinfo --version, sbatch) and print the models as JSON or a table.",
    )
    p.add_argument("file", help="a file of Slurm output, or - for standard input")
    p.add_argument("--format", choices=("json", "table"), default="json", help="output format (default json)")
    p.set_defaults(func=handle)


def _read(path: str) -> str:
    if path == "-":
        return sys.stdin.read()
    try:
        with open(path, encoding="utf-8", errors="replace") as fh:
            return fh.read()
    except OSError as exc:
        raise ParseError("input file", path, hint=f"cannot read it: {exc.strerror}") from None


def _cell(value: Any) -> str:
    if value is None:
        return "-"
    if isinstance(value, (list, dict)):
        return json.dumps(value, separators=(",", ":"))
    return str(value)


_TABLE_COLUMNS = {
    "jobs": ("display_id", "name", "state", "reason", "partition", "nodelist", "time_limit", "gpus"),
    "nodes": ("name", "state", "partitions", "gpu_total", "gpu_used", "gpu_used_indices", "shard_usage"),
    "partitions": ("name", "state", "nodelist", "max_time", "total_cpus"),
    "steps": ("step_id", "name", "state", "nodelist", "tres_alloc"),
    "brief": ("display_id", "state", "reason", "nodelist", "time_left", "name"),
}


def _row(kind: str, d: dict[str, Any]) -> dict[str, Any]:
    if kind == "jobs":
        d = dict(d, gpus={a["node"]: a["gpu_indices"] or a["shards"] for a in d["gpu_allocs"]})
    if kind == "steps" and d.get("tres_alloc"):
        d = dict(d, tres_alloc=d["tres_alloc"]["text"])
    return d


def render_table(parsed_dict: dict[str, Any]) -> str:
    kind = parsed_dict["kind"]
    items = [_row(kind, i) for i in parsed_dict["items"]]
    cols = _TABLE_COLUMNS.get(kind)
    if cols is None and items and all(set(i) == {"columns", "cells"} for i in items):
        # rows wider than their header (see detect.TextRow): show the cells as Slurm printed them
        width = max(len(i["cells"]) for i in items)
        cols = tuple(f"c{n}" for n in range(width))
        items = [dict(zip(cols, i["cells"], strict=False)) for i in items]
    if cols is None:
        cols = tuple(dict.fromkeys(k for i in items for k in i))
    rows = [[_cell(i.get(c)) if c in i else "" for c in cols] for i in items]
    widths = [max([len(c)] + [len(r[n]) for r in rows]) for n, c in enumerate(cols)]
    head = (
        f"# {kind} ({parsed_dict['layout']}"
        + (f", Slurm {parsed_dict['version']}" if parsed_dict["version"] else "")
        + ")"
    )
    lines = [head] + [f"# {n}" for n in parsed_dict["notes"]]
    lines.append("  ".join(c.upper().ljust(w) for c, w in zip(cols, widths, strict=True)).rstrip())
    lines += ["  ".join(v.ljust(w) for v, w in zip(r, widths, strict=True)).rstrip() for r in rows]
    return "\n".join(lines)


def handle(args: argparse.Namespace) -> int:
    from slurmlab.core.detect import detect_and_parse

    parsed = detect_and_parse(_read(args.file)).to_dict()
    if args.format == "json":
        print(json.dumps(parsed, indent=2))
    else:
        print(render_table(parsed))
    return 0
