"""``slurmlab timeslice`` and ``slurmlab isolation``: the time-slicing and isolation experiments from a shell."""

from __future__ import annotations

import argparse
import os
import sys
from pathlib import Path
from typing import Any


def register(subparsers: Any) -> None:
    ts = subparsers.add_parser(
        "timeslice",
        help="measure how N processes share a processor (CPU core or GPU)",
        description="Start N workers with a common start, log when each runs, and analyse the runs: "
        "slices, shares, overlap, fairness and a classification (every number measured).",
    )
    ts.add_argument("--backend", choices=("cpu", "cupy"), default="cpu")
    ts.add_argument("--procs", type=int, default=3, help="number of workers (default 3)")
    ts.add_argument("--duration", type=float, default=2.0, help="logging window D in seconds (default 2)")
    ts.add_argument(
        "--cores",
        default=None,
        help="CPUs for the cpu backend, e.g. 0,1 (workers pinned round-robin); default: all on one core",
    )
    ts.add_argument("--fma-iters", type=int, default=0, help="fixed work per worker for slowdown (0: none)")
    ts.add_argument("--solo", action="store_true", help="run the fixed work alone first as the baseline")
    ts.add_argument("--threshold-us", type=float, default=None, help="switch threshold (default: calibrated)")
    ts.add_argument("--nice", type=int, default=None, help="workers' niceness (negative needs privilege)")
    ts.add_argument("--device", type=int, default=0, help="GPU ordinal for --backend cupy")
    ts.add_argument(
        "--json", type=Path, default=None, metavar="OUT", help="write the result (with runs) as JSON"
    )
    ts.add_argument(
        "--html", type=Path, default=None, metavar="OUT", help="write a page with the summary and Gantt"
    )
    ts.set_defaults(func=timeslice)

    iso = subparsers.add_parser(
        "isolation",
        help="check what this task really got (GPU count, identity, cgroup, binding, …)",
        description="Run the worker's report in the current environment (inside an allocation step it "
        "sees the SLURM_* variables) and the isolation checks I1–I10 over it.",
    )
    iso.add_argument("--backend", choices=("auto", "cpu", "cupy"), default="auto")
    iso.add_argument("--gpus-per-task", type=int, default=None, help="override the granted GPU count")
    iso.add_argument("--sharing", choices=("exclusive", "shared", "mig"), default=None)
    iso.add_argument("--mig-profile", default=None, help="e.g. 1g.18gb")
    iso.add_argument("--gpu-bind", default=None, help="e.g. closest")
    iso.add_argument("--gpu-freq", default=None, help="e.g. 1500")
    iso.add_argument("--json", type=Path, default=None, metavar="OUT", help="write the checks as JSON")
    iso.set_defaults(func=isolation)


def timeslice(args: argparse.Namespace) -> int:
    from slurmlab.experiments.timeslice import TimeslicePlan, run
    from slurmlab.viz.gantt import ensure_available, timeslice_page

    # the same plan and entry point as in a notebook: without --cores, all CPU workers share one core
    plan = TimeslicePlan(
        procs=args.procs,
        duration=args.duration,
        backend=args.backend,
        cores=args.cores,
        fma_iters=args.fma_iters,
        solo=args.solo,
        threshold_us=args.threshold_us,
        nice=args.nice,
        device=args.device,
    )
    if args.html is not None:
        # before the run, not after it: a missing extra should not cost the measurement
        ensure_available("the HTML page with a Gantt chart (--html)")
    result = run(None, plan)
    print(result.summary())
    if args.json is not None:
        args.json.write_text(result.to_json(include_runs=True))
        print(f"wrote {args.json}")
    if args.html is not None:
        args.html.write_text(timeslice_page(result))
        print(f"wrote {args.html}")
    return 0


def isolation(args: argparse.Namespace) -> int:
    from dataclasses import replace

    from slurmlab.experiments.isolation import run_checks
    from slurmlab.experiments.isolation_result import Grant
    from slurmlab.experiments.node.worker import environment_report

    report = environment_report(args.backend)
    grant = Grant.from_env(os.environ)
    overrides = {
        k: v
        for k, v in {
            "gpus_per_task": args.gpus_per_task,
            "sharing": args.sharing,
            "mig_profile": args.mig_profile,
            "gpu_bind": args.gpu_bind,
            "gpu_freq": args.gpu_freq,
        }.items()
        if v is not None
    }
    grant = replace(grant, **overrides)
    checks = run_checks([report], grant)
    checks.meta["report"] = report
    print(checks.summary())
    if args.json is not None:
        args.json.write_text(checks.to_json())
        print(f"wrote {args.json}", file=sys.stderr)
    return 1 if checks.failed else 0
