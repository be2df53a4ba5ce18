"""``slurmlab kernel install``: a Jupyter kernel spec whose kernels start as a step inside a Slurm allocation."""

from __future__ import annotations

import argparse
import json
import sys
from typing import Any

__all__ = ["register"]


def register(subparsers: Any) -> None:
    parser = subparsers.add_parser(
        "kernel",
        help="kernels that run on the GPU node (a kernel spec for slurmlab's kernel provisioner)",
        description="Kernel specs whose kernels start inside a Slurm allocation: the request below is the "
        "spec's default, checked by slurmlab before anything is submitted; one kernel may change it with "
        "SLURMLAB_KERNEL_REQUEST='{\"gpus\": 2}' in its environment.",
    )
    sub = parser.add_subparsers(dest="kernel_command", metavar="ACTION", required=True)
    install = sub.add_parser("install", help="install the kernel spec (for this user unless --prefix)")
    install.add_argument("--name", default="slurmlab-gpu", help="the kernel spec's name (slurmlab-gpu)")
    install.add_argument("--display-name", default=None, help="as the launcher shows it (from the request)")
    install.add_argument("--gpus", type=int, default=None, help="GPUs (default: none asked for)")
    install.add_argument("--gpu-type", default=None, help="GPU type, e.g. h100")
    install.add_argument("--shards", type=int, default=None, help="GPU shards instead of whole GPUs")
    install.add_argument("--mig", default=None, help="a MIG profile, e.g. 1g.10gb (--gpus slices of it)")
    install.add_argument("--time", type=int, default=None, help="time limit in minutes")
    install.add_argument("--partition", default=None)
    install.add_argument("--account", default=None)
    install.add_argument(
        "--option", action="append", default=[], metavar="TOKEN", help="a further salloc option (repeatable)"
    )
    where = install.add_mutually_exclusive_group()
    where.add_argument("--prefix", default=None, help="install under PREFIX/share/jupyter/kernels")
    where.add_argument("--sys-prefix", action="store_true", help="install into this Python's prefix")
    install.add_argument("--dry-run", action="store_true", help="print kernel.json instead of installing it")
    install.set_defaults(func=_install)


def _install(args: argparse.Namespace) -> int:
    from slurmlab.provisioner import install_kernel_spec, kernel_spec, request_from_config
    from slurmlab.slurm.allocation import check_request

    fields = {
        "gpus": args.gpus,
        "gpu_type": args.gpu_type,
        "shards": args.shards,
        "mig": args.mig,
        "time": args.time,
        "partition": args.partition,
        "account": args.account,
        "options": list(args.option),
    }
    request = request_from_config({k: v for k, v in fields.items() if v not in (None, [])})
    # malformed values stop here; what the cluster offers is checked again at each kernel's start
    checked = check_request(request.tokens(), need_cluster=False)
    for warning in checked.warnings:
        print(f"slurmlab: warning: {warning}", file=sys.stderr)
    if args.dry_run:
        print(json.dumps(kernel_spec(request, display_name=args.display_name), indent=1))
        return 0
    prefix = sys.prefix if args.sys_prefix else args.prefix
    where = install_kernel_spec(request, args.name, display_name=args.display_name, prefix=prefix)
    print(f"installed kernel spec {args.name!r} in {where}: {request.describe()}")
    if checked.checked is not None and checked.checked.why_not:
        print(f"(checked without the cluster: {checked.checked.why_not})")
    return 0
