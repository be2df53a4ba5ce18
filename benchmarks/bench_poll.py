"""How much one poll costs: the brief text form the poller uses vs the JSON forms.

    python benchmarks/bench_poll.py [--jobs 500] [--rounds 20]

Starts a sandbox (seed profile) with N held jobs queued, then times, per call:
``squeue -h -t all -j ID -o BRIEF`` (what the shared poller sends), ``squeue --json`` (whole
queue), ``squeue --json --jobs=ID`` and ``scontrol show job -d ID`` (the detail fetched only on a
change). Prints seconds and bytes per call and the ratios to the brief form (the brief form is
expected to be about 10x cheaper than JSON on 22.05, where --jobs does not filter JSON).
"""

from __future__ import annotations

import argparse
import statistics
import sys
import tempfile
import time
from pathlib import Path

if __package__ in (None, ""):  # run as a script: make `benchmarks.*` importable
    sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from benchmarks._bench import Row
from slurmlab.core.slurm.squeue_brief import BRIEF_FORMAT
from slurmlab.sandbox import Sandbox


def timed(runner, argv, rounds):  # type: ignore[no-untyped-def]
    times, size = [], 0
    for _ in range(rounds):
        t0 = time.perf_counter()
        res = runner.run(argv, check=False, timeout=120)
        times.append(time.perf_counter() - t0)
        size = len(res.stdout)
    return statistics.median(times), size


def _queries(ids: list[str]) -> list[tuple[str, list[str]]]:
    probe = ids[len(ids) // 2]
    return [
        ("brief text, one job (poller)", ["squeue", "-h", "-t", "all", "-j", probe, "-o", BRIEF_FORMAT]),
        ("brief text, 10 jobs", ["squeue", "-h", "-t", "all", "-j", ",".join(ids[:10]), "-o", BRIEF_FORMAT]),
        ("squeue --json, whole queue", ["squeue", "--json"]),
        ("squeue --json --jobs=ID", ["squeue", "--json", f"--jobs={probe}"]),
        ("scontrol show job -d ID (detail)", ["scontrol", "show", "job", "-d", probe]),
    ]


def run(jobs: int, rounds: int) -> tuple[str, list[tuple[str, float, int]]]:
    """Times of each query (median seconds, bytes) on a sandbox with ``jobs`` held jobs; and its version."""
    with tempfile.TemporaryDirectory(prefix="slurmlab-bench-") as d:
        sb = Sandbox.up(profile="seed", directory=d)
        try:
            runner = sb.runner(timeout=120)
            ids = []
            for _ in range(jobs):
                out = runner.run(
                    ["sbatch", "--parsable", "-H", "-t", "5", "-o", "/dev/null", "--wrap", "true"]
                )
                ids.append(out.stdout.strip().split(";")[0])
            results = [(name, *timed(runner, argv, rounds)) for name, argv in _queries(ids)]
            return f"{sb.version[0]}.{sb.version[1]:02d}", results
        finally:
            sb.down()


def measure(quick: bool = False) -> list[Row]:
    """The poll's brief query beside the JSON forms, on a real sandbox (skipped in --quick: no Slurm there)."""
    if quick:
        return [
            Row("poll cost (sandbox)", "skipped in --quick (starts a real Slurm)", 0.0, "", note="skipped")
        ]
    jobs = 200
    version, results = run(jobs, rounds=5)
    whole = next(secs for name, secs, _ in results if name.startswith("squeue --json, whole"))
    return [
        Row(
            "poll cost (sandbox)",
            name,
            secs,
            "s",
            baseline=whole,
            baseline_name="squeue --json, whole queue",
            size=f"{jobs} jobs queued, Slurm {version}",
            note=f"{size} bytes",
        )
        for name, secs, size in results
    ]


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0] if __doc__ else None)
    ap.add_argument("--jobs", type=int, default=500)
    ap.add_argument("--rounds", type=int, default=20)
    args = ap.parse_args()
    version, results = run(args.jobs, args.rounds)
    base = results[0][1]
    print(f"{args.jobs} jobs queued, Slurm {version}, median of {args.rounds} calls")
    print(f"{'query':<36} {'seconds':>9} {'bytes':>10} {'x brief':>8}")
    for name, secs, size in results:
        print(f"{name:<36} {secs:>9.4f} {size:>10} {secs / base:>8.1f}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
