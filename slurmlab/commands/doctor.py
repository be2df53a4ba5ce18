"""``slurmlab doctor [--job ID] [--node NAME] [--json]``: the troubleshooting of a field guide as checks.

    slurmlab doctor                 # the controller, the GRES configuration, drained or down nodes
    slurmlab doctor --job 42        # also: why job 42 waits (or how it runs) and what would start it sooner
    slurmlab doctor --node node3    # also: why node3 takes no jobs
    slurmlab doctor --json          # the same as JSON, for scripts

Exit code 1 when a check FAILs (a WARN alone is advice: 0), 2 when the doctor itself could not run.
"""

from __future__ import annotations

import argparse
from typing import Any

__all__ = ["handle", "register"]


def register(subparsers: Any) -> None:
    p = subparsers.add_parser(
        "doctor",
        help="check the cluster, a job or a node, and say what is wrong and what to do",
        description="Troubleshooting as checks: controller reachable, GRES configuration, a job stuck pending "
        "(its reason, the jobs holding what it needs, changes `sbatch --test-only` says would start it sooner "
        "and no QOS or association limit would hold) or running (its nodes, steps, the GPU-node checks), drained "
        "or down nodes. Exit code 1 when a check fails.",
    )
    p.add_argument("--job", "-j", metavar="ID", help="a job to diagnose (pending, held or running)")
    p.add_argument("--node", "-n", metavar="NAME", help="a node to diagnose (drained, down ...)")
    p.add_argument("--json", action="store_true", help="print the report as JSON")
    p.set_defaults(func=handle)


def handle(args: argparse.Namespace) -> int:
    from slurmlab.slurm.doctor import doctor

    report = doctor(job=args.job, node=args.node)
    print(report.to_json() if args.json else report.text())
    return report.exit_code()
