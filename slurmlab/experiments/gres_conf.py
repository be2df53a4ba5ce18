"""The ``Cores=`` that a node's gres.conf ties to each GPU, numbered as slurmd numbers the GPUs.

The verify task sends its node's ``Name=gpu`` lines (:mod:`.node.verify_task`); they are interpreted
here, on the allocation side, with Slurm's hostlist grammar from core.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from slurmlab.core.slurm import hostlist

__all__ = ["gpu_cores_from_gres_conf", "with_gres_cores"]


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


def with_gres_cores(report: Mapping[str, Any]) -> dict[str, Any]:
    """A task report whose ``gres_conf`` also holds ``cores`` (index -> Cores) for the task's node.

    A gres.conf line that cannot be read leaves ``error`` instead, quoting it.
    """
    gres = dict(report.get("gres_conf") or {})
    lines = gres.get("gpu_lines")
    if lines is not None and "cores" not in gres:
        try:
            cores = gpu_cores_from_gres_conf("\n".join(lines), str(report.get("node") or ""))
            gres["cores"] = {str(k): v for k, v in cores.items()}
        except ValueError as exc:
            gres["error"] = str(exc)
    return {**report, "gres_conf": gres}
