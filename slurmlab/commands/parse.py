"""``slurmlab parse FILE|-``: parse saved Slurm output and print the models.

Users attach the JSON to bug reports; ``--format table`` is for reading. Anything that does
not parse is one line on stderr (the file, what was wrong, the next step) and exit code 2,
never a traceback.

The JSON is one document, ``{"kind", "version", "layout", "notes", "items": [...]}``, written as it is
parsed: one item per line, compact (``--indent N`` indents each), so a 10,000-job ``squeue --json`` is
never held as one big dict nor dumped in one piece. Jobs of a JSON file are parsed one at a time; a job
that does not parse stops the output there (exit 2, the error on stderr), as ``jq`` stops on bad input.
"""

from __future__ import annotations

import argparse
import json
import sys
from collections.abc import Iterable, Iterator
from typing import Any, TextIO

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
    p.add_argument(
        "--indent",
        type=int,
        default=None,
        metavar="N",
        help="indent the JSON by N spaces (default: compact, one item per line)",
    )
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


def _one_line(text: str) -> str:
    return " ".join(text.split())


def _fail(path: str, message: str, hint: str) -> int:
    name = "standard input" if path == "-" else path
    print(f"slurmlab: error: {name}: {_one_line(message)} -> {_one_line(hint)}", file=sys.stderr)
    return 2


def _header(kind: str, version: str | None, layout: str, notes: Iterable[str]) -> dict[str, Any]:
    return {"kind": kind, "version": version, "layout": layout, "notes": list(notes)}


def _jobs_stream(text: str) -> tuple[dict[str, Any], Iterator[Any]] | None:
    """Header and lazily parsed jobs of a JSON job listing; None for any other input."""
    from slurmlab.core.slurm.json_jobs import iter_jobs_json
    from slurmlab.core.slurm.parse_json import json_meta, load_json

    if not text.lstrip().startswith(("{", "[")):
        return None
    doc = load_json(text)  # refuses JSON too deep or with numbers too long for Python, as ParseError
    if not isinstance(doc, dict) or "jobs" not in doc:
        return None
    errors = doc.get("errors") or []
    if not isinstance(errors, list):
        raise ParseError("Slurm JSON 'errors'", repr(errors)[:200], hint="Slurm writes a list of errors here")
    meta = json_meta(doc)
    header = _header("jobs", meta.version, meta.layout or "json", (f"Slurm reported: {e}" for e in errors))
    return header, iter_jobs_json(doc)


def _parsed(text: str) -> tuple[dict[str, Any], Iterator[Any]]:
    from slurmlab.core.slurm.detect import detect_and_parse

    stream = _jobs_stream(text)
    if stream is not None:
        return stream
    parsed = detect_and_parse(text)
    return _header(parsed.kind, parsed.version, parsed.layout, parsed.notes), iter(parsed.items)


def _write_json(header: dict[str, Any], items: Iterator[Any], indent: int | None, out: TextIO) -> None:
    """One JSON document, its items written as they come (each to_dict'ed and dumped on its own)."""
    head = json.dumps(header, indent=indent)
    out.write(head[:-1].rstrip() + (",\n" + " " * indent if indent is not None else ", ") + '"items": [')
    sep = "\n"
    for item in items:
        body = json.dumps(item.to_dict(), indent=indent)
        if indent is not None:
            body = body.replace("\n", "\n" + " " * (2 * indent))
            out.write(sep + " " * (2 * indent) + body)
        else:
            out.write(sep + body)
        sep = ",\n"
    out.write(
        "\n"
        + (" " * indent if indent is not None else "")
        + "]"
        + ("\n" if indent is not None else "")
        + "}\n"
    )


def handle(args: argparse.Namespace) -> int:
    """Parse and print; anything that does not parse is one line on stderr and exit code 2."""
    try:
        text = _read(args.file)
        header, items = _parsed(text)
        if args.format == "json":
            _write_json(header, items, args.indent, sys.stdout)
        else:
            print(render_table({**header, "items": [i.to_dict() for i in items]}))
    except ParseError as exc:
        sys.stdout.flush()
        return _fail(
            args.file, exc.message, exc.hint or "check that the file holds one Slurm output, unedited"
        )
    except (
        ValueError,
        TypeError,
        AttributeError,
        KeyError,
        IndexError,
        RecursionError,
        OverflowError,
    ) as exc:
        # a parser bug, not the file's fault: still no traceback, and say how to report it
        sys.stdout.flush()
        return _fail(
            args.file,
            f"slurmlab could not read it ({type(exc).__name__}: {exc})",
            "please report this with the file attached",
        )
    return 0
