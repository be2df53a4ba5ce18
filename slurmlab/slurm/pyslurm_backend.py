"""Optional: answer the poller's state query through pyslurm instead of ``squeue``.

pyslurm on PyPI builds only against Slurm 25.11, which no Debian release ships, so this path
is NOT tested here; it is opt-in (``SLURMLAB_BACKEND=pyslurm``) and kept deliberately small:
only the cheap brief-state query uses it, everything else still goes through the runner.
It follows pyslurm's 23.x+ API (``pyslurm.Job.load(id)`` with ``state``, ``state_reason``,
``start_time``/``end_time`` epochs, ``time_limit`` minutes, ``nodes``).
"""

from __future__ import annotations

import importlib
import os
from collections.abc import Sequence
from datetime import datetime, timezone
from types import ModuleType
from typing import SupportsInt

from slurmlab.core.slurm.hostlist import expand
from slurmlab.core.slurm.squeue_brief import JobBrief
from slurmlab.errors import MissingExtraError, SlurmError
from slurmlab.slurm.runner import Runner

__all__ = ["brief_states", "selected"]

ENV = "SLURMLAB_BACKEND"


def selected() -> bool:
    """True when the user asked for pyslurm (``SLURMLAB_BACKEND=pyslurm``)."""
    return os.environ.get(ENV, "").strip().lower() == "pyslurm"


def _pyslurm() -> ModuleType:
    try:
        return importlib.import_module("pyslurm")
    except ImportError as exc:
        raise MissingExtraError(f"{ENV}=pyslurm", "pyslurm", "pyslurm") from exc


def _ts(value: SupportsInt | str | None) -> datetime | None:
    return datetime.fromtimestamp(int(value), tz=timezone.utc) if value else None


def brief_states(ids: Sequence[str | int], runner: Runner | None = None) -> dict[str, JobBrief]:
    # pyslurm has no type stubs and its attributes moved between releases: each is read with a default
    pyslurm = _pyslurm()
    out: dict[str, JobBrief] = {}
    for jid in ids:
        try:
            job = pyslurm.Job.load(int(jid))
        except Exception as exc:  # pyslurm raises its own RPCError for unknown ids
            if "Invalid job id" in str(exc):
                continue
            raise SlurmError(f"pyslurm failed for job {jid}: {exc}") from exc
        nodelist = getattr(job, "nodes", None) or ""
        limit = getattr(job, "time_limit", None)
        out[str(jid)] = JobBrief(
            display_id=str(jid),
            job_id=int(jid),
            array_job_id=getattr(job, "array_id", None) or None,
            array_task=None,
            state=str(getattr(job, "state", "UNKNOWN")),
            reason=getattr(job, "state_reason", None),
            start_time=_ts(getattr(job, "start_time", None)),
            end_time=_ts(getattr(job, "end_time", None)),
            time_limit=int(limit) * 60 if limit else None,
            time_left=None,
            time_used=None,
            num_nodes=getattr(job, "num_nodes", None),
            nodelist=nodelist,
            nodes=tuple(expand(nodelist)) if nodelist else (),
            partition=getattr(job, "partition", None),
            user=getattr(job, "user_name", None),
            tres_per_node=(),
            name=str(getattr(job, "name", "")),
        )
    return out
