"""The task side of ``verify``: what one task of the verify step sees, printed as one framed report.

``python -m slurmlab.experiments.verify_task`` runs in every task of the step, so it imports only
what the report needs (no NumPy, no analysis): on a busy node eight tasks start in a third of the
time. :mod:`.verify` is the allocation side and re-exports these names.
"""

from __future__ import annotations

import argparse
import os
import sys
from collections.abc import Sequence
from pathlib import Path
from typing import Any

from slurmlab.core.slurm import hostlist
from slurmlab.experiments import task_reports

__all__ = ["gpu_cores_from_gres_conf", "main", "task_report"]

_GRES_CONF_PLACES = ("/etc/slurm/gres.conf", "/run/slurm/conf/gres.conf", "/etc/slurm-llnl/gres.conf")


def gpu_cores_from_gres_conf(text: str, node: str) -> dict[int, str | None]:
    """Global GPU index -> its ``Cores=`` (None when the line has none) for ``node``.

    Indices are numbered as slurmd numbers them: grouped by ``Type=``, the types in the order the
    node's ``Name=gpu`` lines first name them, and lines of one type in file order, a ``File=``
    range (``/dev/nvidia[0-3]``) counting one GPU per file (the h200-mig sandbox's 3g.71gb slice
    is IDX 13 after 4 whole GPUs and nine 1g.18gb lines, on 22.05 and 24.11). Raises ValueError
    quoting a line whose NodeName or File range cannot be expanded.
    """
    by_type: dict[str, list[str | None]] = {}
    for raw in text.splitlines():
        line = raw.split("#", 1)[0].strip()
        if not line:
            continue
        fields: dict[str, str] = {}
        for token in line.split():
            key, sep, value = token.partition("=")
            if sep:
                fields[key.lower()] = value
        if fields.get("name", "").lower() != "gpu":
            continue
        try:
            if "nodename" in fields and node not in hostlist.expand(fields["nodename"]):
                continue
            files = hostlist.expand(fields["file"]) if "file" in fields else []
        except Exception as exc:  # the grammar's own error, quoted with the line
            raise ValueError(f"gres.conf line not understood: {raw.strip()!r} ({exc})") from exc
        count = len(files) or int(fields.get("count", "1") or 1)
        by_type.setdefault(fields.get("type", "").lower(), []).extend([fields.get("cores")] * count)
    cores = [c for group in by_type.values() for c in group]
    return dict(enumerate(cores))


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
    """What this task sees (the worker's environment report) plus its node's gres.conf Cores."""
    from slurmlab.experiments.worker import environment_report

    report = environment_report(backend)
    node = os.environ.get("SLURMD_NODENAME") or (report.get("identity") or {}).get("hostname") or ""
    report["node"] = node
    path, text = _read_gres_conf()
    gres: dict[str, Any] = {"path": path}
    if text is not None:
        try:
            gres["cores"] = {str(k): v for k, v in gpu_cores_from_gres_conf(text, node).items()}
        except ValueError as exc:
            gres["error"] = str(exc)
    report["gres_conf"] = gres
    return report


def main(argv: Sequence[str] | None = None) -> int:
    p = argparse.ArgumentParser(
        prog="python -m slurmlab.experiments.verify_task",
        description="print what this task of a step sees, as one framed JSON line",
    )
    p.add_argument("--backend", choices=("auto", "cpu", "cupy"), default="auto")
    args = p.parse_args(argv)
    try:
        report = task_report(args.backend)
    except Exception as exc:  # the orchestrator needs a line it can quote, not a traceback
        error = {"error": f"{type(exc).__name__}: {exc}", "label": os.environ.get("SLURM_PROCID")}
        print(task_reports.frame(error), flush=True)
        return 1
    print(task_reports.frame(report), flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
