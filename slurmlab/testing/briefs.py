"""Brief poll lines for tests of what reads them (the poller, the allocation, the panel): one builder, so that a
field JobBrief gains is added in one place."""

from __future__ import annotations

import dataclasses
from typing import Any

from slurmlab.core.slurm.squeue_brief import JobBrief

__all__ = ["job_brief"]


def job_brief(
    job_id: int,
    state: str,
    reason: str | None = None,
    *,
    time_left: int | None = 0,
    nodes: tuple[str, ...] = (),
    **fields: Any,
) -> JobBrief:
    """The brief poll line of ``job_id`` in ``state`` on ``nodes`` (none: not placed yet), as squeue's brief line
    gives it to the poller; any other JobBrief field by name (``end_time=…``, ``partition="gpu"``)."""
    brief = JobBrief(
        display_id=str(job_id),
        job_id=job_id,
        array_job_id=None,
        array_task=None,
        state=state,
        reason=reason,
        start_time=None,
        end_time=None,
        time_limit=None,
        time_left=time_left,
        time_used=None,
        num_nodes=len(nodes) or None,
        nodelist=",".join(nodes),
        nodes=nodes,
        partition=None,
        user=None,
        tres_per_node=(),
    )
    return dataclasses.replace(brief, **fields) if fields else brief
