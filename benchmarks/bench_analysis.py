"""Speed of the time-slicing analysis on 1,000,000 runs (target: under 1 s).

    python benchmarks/bench_analysis.py [--runs N] [--procs P] [--repeat R]

Builds P processes taking turns (round robin with jittered slices and switch gaps), then
times :func:`slurmlab.experiments.analysis.analyse` over them. Prints the best time and its
ratio to the target; exits 1 when the target is missed.
"""

from __future__ import annotations

import argparse
import sys
import time
from pathlib import Path

import numpy as np

if __package__ in (None, ""):  # run as a script: make `benchmarks.*` importable
    sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from benchmarks._bench import Row, median_time
from slurmlab.experiments.analysis import analyse

TARGET_S = 1.0


def build(runs: int, procs: int, seed: int = 0) -> tuple[list[np.ndarray], tuple[int, int]]:
    rng = np.random.default_rng(seed)
    lengths = rng.integers(800_000, 1_200_000, runs)  # ~1 ms slices
    gaps = rng.integers(5_000, 20_000, runs)  # switch overhead
    starts = np.concatenate(([0], np.cumsum(lengths + gaps)[:-1]))
    all_runs = np.stack([starts, starts + lengths], axis=1)
    owner = np.arange(runs) % procs
    per_proc = [all_runs[owner == p] for p in range(procs)]
    return per_proc, (0, int(all_runs[-1, 1]))


def measure(quick: bool = False) -> list[Row]:
    """The analysis of 10^6 runs (quick: 10^4) against its 1 s target."""
    n = 10_000 if quick else 1_000_000
    runs, window = build(n, 4)
    secs = median_time(
        lambda: analyse(runs, window, merge_below_ns=1_000),
        repeat=1 if quick else 5,
        warmup=0 if quick else 1,
    )
    return [
        Row(
            "time-slicing analysis",
            "analyse() of 4 processes' runs",
            secs,
            "s",
            target=TARGET_S,
            size=f"{n:,} runs",
        )
    ]


def main() -> int:
    p = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    p.add_argument("--runs", type=int, default=1_000_000)
    p.add_argument("--procs", type=int, default=4)
    p.add_argument("--repeat", type=int, default=3)
    args = p.parse_args()
    runs, window = build(args.runs, args.procs)
    best = float("inf")
    result = None
    for _ in range(args.repeat):
        t = time.perf_counter()
        result = analyse(runs, window, merge_below_ns=1_000)
        best = min(best, time.perf_counter() - t)
    assert result is not None
    print(f"analysed {args.runs:,} runs of {args.procs} processes: {result.classification}, "
          f"Jain {result.jain:.3f}")  # fmt: skip
    print(f"best of {args.repeat}: {best:.3f} s; ratio to the {TARGET_S:.0f} s target: {best / TARGET_S:.2f}")
    return 0 if best <= TARGET_S else 1


if __name__ == "__main__":
    sys.exit(main())
