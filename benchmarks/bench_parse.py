"""Parsing Slurm's JSON at a real cluster's size (issue 14, point 3).

    python benchmarks/bench_parse.py [--quick]

Rows:

* ``parse squeue --json``: ``parse_jobs_json(load_json(text))`` over ``json.loads(text)`` of the same
  10,000-job text (22.05 and 24.11 layouts, scale inputs of benchmarks/scale.py). Target: ratio <= 2.
  The 24.11 parse in seconds at 1k / 5k / 10k jobs on 1,000 nodes, and at 250 / 500 / 1,000 nodes with 1k
  jobs, feeds the growth table (cost per nodes + jobs must stay flat).
* ``slurmlab parse``: ``python -m slurmlab parse FILE > /dev/null`` over ``jq . FILE`` (or, without jq,
  ``python -m json.tool FILE``), whole processes. Target: ratio <= 1.

Every ratio pairs the two sides in alternation (medians of 5; ``--quick``: small inputs, 1 repeat).
"""

from __future__ import annotations

import json
import shutil
import subprocess
import sys
from pathlib import Path

if __package__ in (None, ""):  # run as a script: make `benchmarks.*` importable
    sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from benchmarks._bench import Row, median_time, paired_times
from benchmarks.scale import ROOT, scale_inputs
from slurmlab.core.slurm.json_jobs import parse_jobs_json
from slurmlab.core.slurm.parse_json import load_json

GROUP_PARSE = "parse squeue --json"
GROUP_CLI = "slurmlab parse"


def _object(doc: object) -> dict[str, object]:
    assert isinstance(doc, dict)
    return doc


def _parse_row(text: str, version: str, size: str, repeat: int, warmup: int) -> tuple[Row, float]:
    ours, loads = paired_times(
        lambda: parse_jobs_json(_object(load_json(text))),
        lambda: json.loads(text),
        repeat=repeat,
        warmup=warmup,
    )
    row = Row(
        GROUP_PARSE,
        f"{version} layout, x json.loads",
        ours / loads,
        "x",
        target=2.0,
        baseline=loads,
        baseline_name="json.loads (s)",
        size=size,
        note=f"parse {ours:.3f} s, {len(text) / 1e6:.1f} MB",
    )
    return row, ours


def _cli_baseline(path: Path) -> tuple[list[str], str]:
    jq = shutil.which("jq")
    if jq:
        return [jq, ".", str(path)], "jq ."
    return [sys.executable, "-m", "json.tool", str(path)], "python -m json.tool"


def _run(argv: list[str]) -> None:
    subprocess.run(argv, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, check=True, cwd=ROOT, timeout=300)


def _cli_row(path: Path, version: str, size: str, repeat: int, warmup: int) -> Row:
    base_argv, base_name = _cli_baseline(path)
    ours, base = paired_times(
        lambda: _run([sys.executable, "-m", "slurmlab", "parse", str(path)]),
        lambda: _run(base_argv),
        repeat=repeat,
        warmup=warmup,
    )
    return Row(
        GROUP_CLI,
        f"{version} squeue --json, x {base_name}",
        ours / base,
        "x",
        target=1.0,
        baseline=base,
        baseline_name=f"{base_name} (s)",
        size=size,
        note=f"slurmlab parse {ours:.2f} s",
    )


def measure(quick: bool = False) -> list[Row]:
    repeat, warmup = (1, 0) if quick else (5, 0)
    nodes, big = (50, 400) if quick else (1000, 10000)
    rows: list[Row] = []
    for version in ("22.05", "24.11"):
        inputs = scale_inputs(nodes, big, version)
        ratio, seconds = _parse_row(inputs.text("squeue_json"), version, inputs.size, repeat, warmup)
        rows.append(ratio)
        if version == "24.11":
            rows.append(Row(GROUP_PARSE, f"{version} parse time", seconds, "s", size=inputs.size))
    # growth in jobs (1k / 5k / 10k on 1,000 nodes) and in nodes (250 / 500 / 1,000 with 1k jobs), 24.11 layout
    small = big // 10
    for n, jobs in ((nodes, small), (nodes, big // 2), (nodes // 4, small), (nodes // 2, small)):
        inputs = scale_inputs(n, jobs, "24.11")
        text = inputs.text("squeue_json")
        seconds = median_time(
            lambda text=text: parse_jobs_json(_object(load_json(text))), repeat=repeat, warmup=warmup
        )
        rows.append(Row(GROUP_PARSE, "24.11 parse time", seconds, "s", size=inputs.size))
    # 24.11 prints 2.5x the bytes per job of 22.05: its jq baseline alone takes ~9 s at 10k jobs
    for version, jobs in (("22.05", big), ("24.11", big // 2)):
        inputs = scale_inputs(nodes, jobs, version)
        assert inputs.path is not None
        rows.append(_cli_row(inputs.path / "squeue_json.txt", version, inputs.size, repeat, warmup))
    return rows


if __name__ == "__main__":
    import argparse

    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0] if __doc__ else None)
    ap.add_argument("--quick", action="store_true")
    for r in measure(ap.parse_args().quick):
        print(
            f"{r.group:<22} {r.name:<40} {r.size:<24} {r.value:9.3f} {r.unit:<2} target {r.target} {r.note}"
        )
