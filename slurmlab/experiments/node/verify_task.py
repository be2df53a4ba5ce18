"""The task side of ``verify``: what one task of the verify step sees, printed as one framed report.

``python -m slurmlab.experiments.node.verify_task`` runs in every task of the step, so it imports only
what the report needs (no NumPy, no analysis): on a busy node eight tasks start in a third of the
time. It reads the node's gres.conf but does not interpret it: the ``Name=gpu`` lines travel in the
report and :mod:`slurmlab.experiments.gres_conf` numbers them on the allocation side, with Slurm's
hostlist grammar, which this side does not carry.
"""

from __future__ import annotations

import argparse
import os
import sys
from collections.abc import Sequence
from pathlib import Path
from typing import Any

from slurmlab.core.framing import frame

__all__ = ["gres_conf_gpu_lines", "main", "task_report"]

_GRES_CONF_PLACES = ("/etc/slurm/gres.conf", "/run/slurm/conf/gres.conf", "/etc/slurm-llnl/gres.conf")


def gres_conf_gpu_lines(text: str) -> list[str]:
    """The ``Name=gpu`` lines of a gres.conf, comments removed (the rest says nothing about GPUs' cores)."""
    lines = []
    for raw in text.splitlines():
        line = raw.split("#", 1)[0].strip()
        names = [t.partition("=")[2] for t in line.split() if t.partition("=")[0].lower() == "name"]
        if names and names[-1].lower() == "gpu":
            lines.append(line)
    return lines


def _read_gres_conf() -> tuple[str | None, str | None]:
    places = []
    conf = os.environ.get("SLURM_CONF")
    if conf:
        places.append(str(Path(conf).parent / "gres.conf"))
    places.extend(_GRES_CONF_PLACES)
    for place in places:
        try:
            return place, Path(place).read_text()
        except OSError:
            continue
    return None, None


def task_report(backend: str = "auto") -> dict[str, Any]:
    """What this task sees (the worker's environment report) plus its node's gres.conf GPU lines."""
    from slurmlab.experiments.node.worker import environment_report

    report = environment_report(backend)
    report["node"] = os.environ.get("SLURMD_NODENAME") or (report.get("identity") or {}).get("hostname") or ""
    path, text = _read_gres_conf()
    gres: dict[str, Any] = {"path": path}
    if text is not None:
        gres["gpu_lines"] = gres_conf_gpu_lines(text)
    report["gres_conf"] = gres
    return report


def main(argv: Sequence[str] | None = None) -> int:
    p = argparse.ArgumentParser(
        prog="python -m slurmlab.experiments.node.verify_task",
        description="print what this task of a step sees, as one framed JSON line",
    )
    p.add_argument("--backend", choices=("auto", "cpu", "cupy"), default="auto")
    args = p.parse_args(argv)
    try:
        report = task_report(args.backend)
    except Exception as exc:  # the orchestrator needs a line it can quote, not a traceback
        error = {"error": f"{type(exc).__name__}: {exc}", "label": os.environ.get("SLURM_PROCID")}
        print(frame(error), flush=True)
        return 1
    print(frame(report), flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
