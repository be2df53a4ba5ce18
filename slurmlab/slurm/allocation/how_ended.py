"""The evidence of how an allocation ended: its sacct records, or, where accounting is off or has no record yet,
the controller's ``scontrol show job`` while it still remembers the job (MinJobAge), with a note that sacct would
say more. The judgement is :mod:`slurmlab.core.diagnosis.ended`.

:func:`outcome` blocks (sacct, perhaps scontrol, each with a timeout; a few seconds more while slurmdbd has not
yet heard of the end): the panel calls it from a worker thread, never from the kernel's.

API::

    outcome(alloc_or_job_id, runner=None, *, argv=(), settle=5.0) -> Ended
"""

from __future__ import annotations

import time
from collections.abc import Sequence
from typing import TYPE_CHECKING

from slurmlab.core.diagnosis.ended import Ended, explain_end, records_from_job
from slurmlab.core.slurm.sacct import SacctRecord
from slurmlab.core.slurm.states import ENDED
from slurmlab.errors import AccountingOffError, AllocationError
from slurmlab.slurm.accounting_queries import job_records
from slurmlab.slurm.identity import current_uid, user_name
from slurmlab.slurm.job_queries import job_detail
from slurmlab.slurm.runner import Runner, get_runner

if TYPE_CHECKING:
    from slurmlab.slurm.allocation.lifecycle import Allocation

__all__ = ["outcome"]

_SETTLE_STEP = 0.5
_SACCT_WOULD = "sacct would add each step's exit code, who cancelled it, the peak memory and the efficiency"


def _settled(runner: Runner, job_id: str, settle: float) -> list[SacctRecord]:
    """The job's records once accounting has its end (slurmctld tells slurmdbd a moment after the job ends)."""
    deadline = time.monotonic() + settle
    while True:
        records = job_records(runner, job_id)
        own = next((r for r in records if r.is_job), None)
        if (own is not None and own.state in ENDED) or time.monotonic() >= deadline:
            return records
        time.sleep(_SETTLE_STEP)


def outcome(
    alloc: Allocation | str | int,
    runner: Runner | None = None,
    *,
    argv: Sequence[str] = (),
    settle: float = 5.0,
) -> Ended:
    """How the allocation (or job id) ended and what to change; ``argv`` (an Allocation's own request by default)
    is the request the advice changes."""
    if isinstance(alloc, (str, int)):
        job_id, request = str(alloc), tuple(argv)
        runner = runner or get_runner()
    else:
        if alloc.job_id is None:
            raise AllocationError(
                "this allocation never got a job id, so it has no end to explain",
                hint="look at alloc.error for what Slurm said",
            )
        job_id, request = alloc.job_id, tuple(argv) or alloc.request_argv
        runner = runner or alloc.runner
    me = current_uid()
    note = ""
    try:
        records = _settled(runner, job_id, settle)
    except AccountingOffError as exc:
        records, note = [], f"{exc.message}: {_SACCT_WOULD} ({exc.hint})"
    if records:
        uids = {r.cancelled_by for r in records if r.cancelled_by is not None and r.cancelled_by != me}
        return explain_end(records, me=me, names={u: user_name(u) for u in uids}, argv=request)
    job = job_detail(job_id, runner)
    return explain_end(
        records_from_job(job),
        me=me,
        argv=request,
        source="scontrol",
        note=note or f"Slurm accounting has no record of job {job_id} yet: {_SACCT_WOULD}",
    )
