"""``make bench``: every benchmark beside its baseline and target, one table, build/bench.json.

    python benchmarks/run_all.py [--quick] [--only parse,server] [--out build/bench.json]

1. Builds the scale inputs (benchmarks/scale.py: real Slurm output replicated to 1,000 nodes x 8 GPUs and
   1k / 5k / 10k jobs, 22.05 and 24.11 layouts), cached under build/bench-inputs/, so no module times that.
2. Runs ``measure(quick)`` of every benchmarks/bench_*.py that has one, each in its own process (a module
   that fails, hangs or crashes is a row with its error, not the end of the run).
3. Prints one table (group, figure, measured, baseline, ratio, target, verdict) and the growth tables: the
   rows of one figure measured at several sizes ``N nodes x M jobs``, their cost per (nodes + jobs), and the
   exponent of a least-squares fit of time ~ (nodes + jobs)^k (k <= 1.25 counts as linear).
4. Writes build/bench.json (rows, growth, errors) and exits 1 when a target is missed, a growth is
   superlinear or a module failed; 0 otherwise. ``--quick`` (small inputs, 1 repeat) is for the tests: its
   verdicts are printed but do not set the exit code.
"""

from __future__ import annotations

import argparse
import importlib
import importlib.util
import json
import math
import os
import platform
import re
import subprocess
import sys
import time
from collections.abc import Sequence
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[1]
if str(ROOT) not in sys.path:
    sys.path.insert(0, str(ROOT))

BENCH_DIR = ROOT / "benchmarks"
DEFAULT_OUT = ROOT / "build" / "bench.json"
LINEAR_MAX = 1.25
_SIZE = re.compile(r"^(\d+) nodes x (\d+) jobs$")
# seconds one module may take (its whole measure()); the modules that count RPCs on a sandbox sit through 60 s
# windows (their counts are per minute), so they get longer; bench_ssh (under a minute here) gets room too: a
# module stopped at its limit is killed outright and leaves the sandbox, sshd and Unix user it started
MODULE_TIMEOUT = {"quick": 240, "full": 420}
SLOW_MODULES = {"bench_rpc_kernel": 600, "bench_ssh": 600, "bench_workshop": 1200}


def modules(only: list[str] | None = None, folder: Path = BENCH_DIR) -> list[str]:
    names = sorted(p.stem for p in folder.glob("bench_*.py"))
    if only:
        names = [n for n in names if n in only or n.removeprefix("bench_") in only]
    return names


def build_inputs(quick: bool) -> float:
    """Build (or find cached) every scale input the modules ask for; seconds it took."""
    from benchmarks.scale import scale_inputs

    t0 = time.perf_counter()
    if quick:
        sizes = [(50, j) for j in (40, 200, 400)] + [(12, 40), (25, 40)]
    else:
        sizes = [(1000, j) for j in (1000, 5000, 10000)] + [(250, 1000), (500, 1000)]
    for version in ("22.05", "24.11"):
        for nodes, jobs in sizes:
            scale_inputs(nodes, jobs, version)
    return time.perf_counter() - t0


def run_module(name: str, quick: bool, folder: Path = BENCH_DIR) -> list[dict[str, Any]]:
    """``measure(quick)`` of one module in this process, as row dicts (the child's side of run_in_child)."""
    if folder.resolve() == BENCH_DIR:
        mod = importlib.import_module(f"benchmarks.{name}")
    else:  # another folder of benchmarks (the tests'): by path
        spec = importlib.util.spec_from_file_location(name, folder / f"{name}.py")
        assert spec is not None and spec.loader is not None
        mod = importlib.util.module_from_spec(spec)
        spec.loader.exec_module(mod)
    measure = getattr(mod, "measure", None)
    if measure is None:
        return []
    return [dict(r.to_dict(), module=name) for r in measure(quick)]


def _error_row(name: str, error: str) -> dict[str, Any]:
    return {
        "group": name,
        "name": "module failed",
        "module": name,
        "value": None,
        "unit": "",
        "target": None,
        "baseline": None,
        "baseline_name": "",
        "size": "",
        "note": error,
        "ok": False,
        "error": error,
    }


def run_in_child(name: str, quick: bool, folder: Path = BENCH_DIR) -> tuple[list[dict[str, Any]], float]:
    """Run one module in a child process with a time limit; its rows, or one row with its error."""
    limit = MODULE_TIMEOUT["quick"] if quick else SLOW_MODULES.get(name, MODULE_TIMEOUT["full"])
    argv = [sys.executable, str(Path(__file__).resolve()), "--child", name, "--dir", str(folder)]
    argv += ["--quick"] if quick else []
    t0 = time.perf_counter()
    try:
        done = subprocess.run(argv, capture_output=True, text=True, timeout=limit, cwd=ROOT, check=False)
    except subprocess.TimeoutExpired:
        return [_error_row(name, f"did not finish within {limit} s")], time.perf_counter() - t0
    took = time.perf_counter() - t0
    lines = [ln for ln in done.stdout.splitlines() if ln.startswith("BENCH-ROWS ")]
    if done.returncode != 0 or not lines:
        tail = (done.stderr.strip().splitlines() or ["no output"])[-1]
        return [_error_row(name, f"exit {done.returncode}: {tail}")], took
    rows: list[dict[str, Any]] = json.loads(lines[-1][len("BENCH-ROWS ") :])
    return rows, took


def _sized(row: dict[str, Any]) -> int | None:
    m = _SIZE.match(str(row.get("size") or ""))
    return int(m.group(1)) + int(m.group(2)) if m else None


def fit_exponent(points: list[tuple[int, float]]) -> float | None:
    """k of time ~ n^k by least squares on logs; None with fewer than two distinct sizes."""
    pts = [(math.log(n), math.log(v)) for n, v in points if n > 0 and v > 0]
    if len({x for x, _ in pts}) < 2:
        return None
    mx = sum(x for x, _ in pts) / len(pts)
    my = sum(y for _, y in pts) / len(pts)
    return sum((x - mx) * (y - my) for x, y in pts) / sum((x - mx) ** 2 for x, _ in pts)


def growth(rows: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """One growth table per figure measured in time at several sizes."""
    by_figure: dict[tuple[str, str], list[dict[str, Any]]] = {}
    for r in rows:
        if r.get("unit") in ("s", "ms") and isinstance(r.get("value"), (int, float)) and _sized(r):
            # a figure may name its size too ("one poll, 1000 nodes x 1000 jobs"): one figure at several sizes
            name = " ".join(str(r["name"]).replace(r["size"], "").replace(", ,", ",").split()).strip(" ,")
            by_figure.setdefault((r["group"], name), []).append(r)
    out = []
    for (group, name), rs in by_figure.items():
        if len({r["size"] for r in rs}) < 2:
            continue
        rs = sorted(rs, key=lambda r: (_sized(r), r["size"]))
        unit = rs[0]["unit"]
        points = [(int(_sized(r) or 0), float(r["value"])) for r in rs]
        k = fit_exponent(points)
        out.append(
            {
                "group": group,
                "name": name,
                "unit": unit,
                "exponent": k,
                "ok": None if k is None else k <= LINEAR_MAX,
                "points": [
                    {"size": r["size"], "nodes_plus_jobs": n, "value": v, "per_1000": v / n * 1000}
                    for r, (n, v) in zip(rs, points, strict=True)
                ],
            }
        )
    return out


def _fmt(value: object, unit: str = "") -> str:
    if not isinstance(value, (int, float)) or isinstance(value, bool):
        return "-"
    text = f"{value:.3g}" if abs(value) < 1000 else f"{value:,.0f}"
    return f"{text} {unit}".rstrip()


def verdict(row: dict[str, Any]) -> str:
    if row.get("error"):
        return "FAILED"
    ok = row.get("ok")
    return "-" if ok is None else "ok" if ok else "MISSED"


def table(rows: list[dict[str, Any]]) -> str:
    head = ("group", "figure", "size", "measured", "baseline", "ratio", "target", "verdict")
    body = []
    for r in rows:
        base = r.get("baseline")
        ratio = (
            r["value"]
            if r.get("unit") == "x"
            else (
                r["value"] / base
                if isinstance(base, (int, float)) and base and isinstance(r.get("value"), (int, float))
                else None
            )
        )
        base_txt = f"{_fmt(base)} {r.get('baseline_name') or ''}".strip() if base is not None else "-"
        body.append(
            (
                r["group"],
                r["name"],
                r.get("size") or "",
                _fmt(r.get("value"), r.get("unit") or ""),
                base_txt,
                _fmt(ratio, "x") if ratio is not None else "-",
                _fmt(r.get("target"), r.get("unit") or ""),
                verdict(r),
            )
        )
    return _columns(head, body)


def _columns(head: tuple[str, ...], body: Sequence[tuple[str, ...]]) -> str:
    widths = [max(len(h), *(len(b[i]) for b in body)) if body else len(h) for i, h in enumerate(head)]
    lines = ["  ".join(h.upper().ljust(w) for h, w in zip(head, widths, strict=True)).rstrip()]
    lines += ["  ".join(c.ljust(w) for c, w in zip(b, widths, strict=True)).rstrip() for b in body]
    return "\n".join(lines)


def growth_text(tables: list[dict[str, Any]]) -> str:
    out = []
    for g in tables:
        k = g["exponent"]
        state = "linear" if g["ok"] else "SUPERLINEAR" if g["ok"] is False else "?"
        out.append(
            f"\n{g['group']} / {g['name']}: fitted exponent {_fmt(k)} ({state}; <= {LINEAR_MAX} is linear)"
        )
        out.append(
            _columns(
                ("size", "nodes+jobs", "measured", f"per 1000 ({g['unit']})"),
                [
                    (p["size"], str(p["nodes_plus_jobs"]), _fmt(p["value"], g["unit"]), _fmt(p["per_1000"]))
                    for p in g["points"]
                ],
            )
        )
    return "\n".join(out)


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0] if __doc__ else None)
    ap.add_argument("--quick", action="store_true", help="small inputs, one repeat (for the tests)")
    ap.add_argument("--only", default="", help="comma-separated modules (parse, server, ...)")
    ap.add_argument("--out", type=Path, default=DEFAULT_OUT)
    ap.add_argument("--child", help=argparse.SUPPRESS)
    ap.add_argument("--dir", type=Path, default=BENCH_DIR, help=argparse.SUPPRESS)  # the tests' modules
    args = ap.parse_args(argv)
    if args.child:
        print("BENCH-ROWS " + json.dumps(run_module(args.child, args.quick, args.dir)))
        return 0
    t0 = time.perf_counter()
    if args.dir.resolve() == BENCH_DIR:  # the project's modules read them; another folder's need not
        print("building scale inputs ... ", end="", flush=True)
        print(f"{build_inputs(args.quick):.1f} s")
    rows: list[dict[str, Any]] = []
    timings = {}
    for name in modules([s.strip() for s in args.only.split(",") if s.strip()] or None, args.dir):
        print(f"{name} ... ", end="", flush=True)
        got, took = run_in_child(name, args.quick, args.dir)
        timings[name] = took
        failed = [r for r in got if r.get("error")]
        print(f"{len(got)} rows, {took:.1f} s" + (f" FAILED: {failed[0]['error']}" if failed else ""))
        rows += got
    tables = growth(rows)
    print()
    print(table(rows))
    print(growth_text(tables))
    missed = [r for r in rows if r.get("ok") is False]
    superlinear = [g for g in tables if g["ok"] is False]
    total = time.perf_counter() - t0
    report = {
        "generated": time.strftime("%Y-%m-%dT%H:%M:%S%z"),
        "quick": args.quick,
        "seconds": total,
        "machine": {
            "cpus": os.cpu_count(),
            "python": platform.python_version(),
            "platform": platform.platform(),
        },
        "module_seconds": timings,
        "rows": rows,
        "growth": tables,
        "missed": [f"{r['group']}: {r['name']}" for r in missed]
        + [f"growth {g['group']}: {g['name']}" for g in superlinear],
    }
    args.out.parent.mkdir(parents=True, exist_ok=True)
    args.out.write_text(json.dumps(report, indent=1) + "\n")
    print(
        f"\n{len(rows)} rows, {len(missed)} missed or failed, {len(superlinear)} superlinear; "
        f"{total:.0f} s; wrote {args.out}"
    )
    if args.quick:
        print("(--quick: small inputs and one repeat; the verdicts say nothing about speed)")
        return 0
    return 1 if missed or superlinear else 0


if __name__ == "__main__":
    sys.exit(main())
