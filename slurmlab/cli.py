"""The ``slurmlab`` command line.

Each subcommand lives in its own module under :mod:`slurmlab.commands` and is imported
only when used, so ``slurmlab --help`` stays fast. A module there defines
``register(subparsers)`` which adds its parser(s) and sets ``func`` to a handler that
takes the parsed namespace and returns an exit code.
"""

from __future__ import annotations

import argparse
import importlib
import sys
from collections.abc import Sequence

from slurmlab import __version__
from slurmlab.errors import SlurmlabError

# subcommand name -> module that registers it
COMMANDS: dict[str, str] = {
    "sandbox": "slurmlab.commands.sandbox",
    "parse": "slurmlab.commands.parse",
    "topo": "slurmlab.commands.topo",
    "mig": "slurmlab.commands.topo",
    "timeslice": "slurmlab.commands.experiments",
    "isolation": "slurmlab.commands.experiments",
    "notebooks": "slurmlab.commands.notebooks",
    "doctor": "slurmlab.commands.doctor",
    "hub": "slurmlab.commands.hub",
    "kernel": "slurmlab.commands.kernel",
    "workshop": "slurmlab.commands.workshop",
    # the one poll per host a server extension reads (registered by its own module: commands may not import server)
    "cluster-cache": "slurmlab.server.shared_poll_command",
}


def build_parser(only: str | None = None) -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(
        prog="slurmlab",
        description="Jupyter-native toolkit for Slurm GPU clusters (and a real local Slurm sandbox).",
    )
    parser.add_argument("--version", action="version", version=f"slurmlab {__version__}")
    sub = parser.add_subparsers(dest="command", metavar="COMMAND")
    seen: set[str] = set()
    for name, module in COMMANDS.items():
        if only is not None and name != only:
            continue
        if module in seen:
            continue
        try:
            mod = importlib.import_module(module)
        except ModuleNotFoundError as exc:
            if exc.name == module:
                continue  # that room is not built yet
            raise
        mod.register(sub)
        seen.add(module)
    return parser


def main(argv: Sequence[str] | None = None) -> int:
    args_in = list(sys.argv[1:] if argv is None else argv)
    first = next((a for a in args_in if not a.startswith("-")), None)
    parser = build_parser(first if first in COMMANDS else None)
    args = parser.parse_args(args_in)
    func = getattr(args, "func", None)
    if func is None:
        build_parser().print_help()
        return 2
    try:
        return int(func(args) or 0)
    except SlurmlabError as exc:
        print(f"slurmlab: error: {exc}", file=sys.stderr)
        return 2
    except KeyboardInterrupt:
        print("slurmlab: interrupted", file=sys.stderr)
        return 130
    except BrokenPipeError:
        # the reader went away (`slurmlab parse … | head`): not an error worth a traceback
        import os

        os.dup2(os.open(os.devnull, os.O_WRONLY), sys.stdout.fileno())
        return 0


if __name__ == "__main__":  # pragma: no cover
    sys.exit(main())
