"""How much one poll costs: the brief text form the poller uses vs the JSON forms.

    python benchmarks/bench_poll.py [--jobs 500] [--rounds 20]

Starts a sandbox (seed profile) with N held jobs queued, then times, per call:
``squeue -h -t all -j ID -o BRIEF`` (what the shared poller sends), ``squeue --json`` (whole
queue), ``squeue --json --jobs=ID`` and ``scontrol show job -d ID`` (the detail fetched only on a
change). Prints seconds and bytes per call and the ratios to the brief form (DESIGN §2 expects
the brief form to be about 10x cheaper than JSON on 22.05, where --jobs does not filter JSON).
"""

from __future__ import annotations

import argparse
import statistics
import sys
import tempfile
import time

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


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0] if __doc__ else None)
    ap.add_argument("--jobs", type=int, default=500)
    ap.add_argument("--rounds", type=int, default=20)
    args = ap.parse_args()
    with tempfile.TemporaryDirectory(prefix="slurmlab-bench-") as d:
        sb = Sandbox.up(profile="seed", directory=d)
        try:
            runner = sb.runner(timeout=120)
            ids = []
            for _ in range(args.jobs):
                out = runner.run(["sbatch", "--parsable", "-H", "-t", "5", "-o", "/dev/null", "--wrap", "true"])
                ids.append(out.stdout.strip().split(";")[0])
            probe = ids[len(ids) // 2]
            rows = [
                ("brief text, one job (poller)", ["squeue", "-h", "-t", "all", "-j", probe, "-o", BRIEF_FORMAT]),
                ("brief text, 10 jobs", ["squeue", "-h", "-t", "all", "-j", ",".join(ids[:10]), "-o", BRIEF_FORMAT]),
                ("squeue --json, whole queue", ["squeue", "--json"]),
                ("squeue --json --jobs=ID", ["squeue", "--json", f"--jobs={probe}"]),
                ("scontrol show job -d ID (detail)", ["scontrol", "show", "job", "-d", probe]),
            ]
            results = [(name, *timed(runner, argv, args.rounds)) for name, argv in rows]
            base = results[0][1]
            print(f"{args.jobs} jobs queued, Slurm {sb.version[0]}.{sb.version[1]:02d}, median of {args.rounds} calls")
            print(f"{'query':<36} {'seconds':>9} {'bytes':>10} {'x brief':>8}")
            for name, secs, size in results:
                print(f"{name:<36} {secs:>9.4f} {size:>10} {secs / base:>8.1f}")
        finally:
            sb.down()
    return 0


if __name__ == "__main__":
    sys.exit(main())
