"""``slurmlab cluster-cache``: the one poll per host of :mod:`slurmlab.server.shared_poll`, as a command.

Registered from here (the CLI's rooms may not import the server's), and light: the service loads when it runs.
"""

from __future__ import annotations

import argparse
import logging
import os
from typing import Any

__all__ = ["register"]

DIR_ENV = (
    "SLURMLAB_SHARED_POLL_DIR"  # as slurmlab.server.shared_poll names it (not imported: --help stays fast)
)
DEFAULT_DIR = "/run/slurmlab/poll"


def register(subparsers: Any) -> None:
    parser = subparsers.add_parser(
        "cluster-cache",
        help="one poll of the cluster per host, shared by every Jupyter server of the host (run as root)",
        description="Lists the cluster once per interval and writes what every user may see (honouring "
        "Slurm's PrivateData) and each user's own jobs into a directory only it can write; slurmlab's server "
        "extension reads them instead of polling Slurm itself. Run it as root or as Slurm's SlurmUser.",
    )
    sub = parser.add_subparsers(dest="cache_command", metavar="ACTION", required=True)
    serve = sub.add_parser("serve", help="poll and write until stopped (a systemd service's command)")
    serve.add_argument(
        "--dir", default=os.environ.get(DIR_ENV, DEFAULT_DIR), help=f"where to write (default {DEFAULT_DIR})"
    )
    serve.add_argument("--interval", type=float, default=60.0, help="seconds between two listings (60)")
    serve.add_argument("--once", action="store_true", help="write once and exit")
    serve.set_defaults(func=_serve)


def _serve(args: argparse.Namespace) -> int:
    from slurmlab.server.shared_poll import SharedPollService

    logging.basicConfig(level=logging.INFO, format="%(asctime)s %(message)s")
    service = SharedPollService(args.dir, interval=args.interval)
    if args.once:
        service.prepare()
        service.once()
        return 0
    service.serve()
    return 0
