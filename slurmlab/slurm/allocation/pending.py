"""Why a pending allocation waits, gathered from Slurm: the reason in plain words, the QOS/association limit
with the usage and the cap and which change lifts it, the running jobs that hold what it needs and when they end,
Slurm's expected start, and the changes that would start it sooner — ``sbatch --test-only`` says when, and no
QOS, association or partition limit would hold them (``--test-only`` applies none) — and the switch to one.

The judgement is the doctor's (:mod:`slurmlab.core.diagnosis.job_checks`, :mod:`.pending_alternatives`); this
module only gathers for one allocation. :func:`why` blocks (several Slurm commands, each with a timeout): the
panel calls it from a worker thread, never from the kernel's.

API::

    why(alloc_or_job_id, runner=None, *, alternatives=True) -> PendingWhy
"""

from __future__ import annotations

from dataclasses import dataclass, field
from datetime import datetime, timezone
from typing import Protocol

from slurmlab.core.diagnosis.alternatives import NO_ALTERNATIVES, Alternative
from slurmlab.core.diagnosis.findings import Finding, Report, Verdict, guarded
from slurmlab.core.diagnosis.job_checks import (
    blockers,
    judge_alternatives,
    judge_blockers,
    judge_ended,
    judge_held,
    judge_pending,
    usable_nodes,
)
from slurmlab.core.diagnosis.pending_limits import limit_ask
from slurmlab.core.slurm.models import Job
from slurmlab.core.slurm.states import HOLDING
from slurmlab.errors import AllocationError
from slurmlab.slurm.job_queries import job_detail, list_jobs
from slurmlab.slurm.node_queries import list_nodes, list_partitions
from slurmlab.slurm.pending_alternatives import LimitContext, limit_finding, pending_alternatives
from slurmlab.slurm.runner import Runner, get_runner

__all__ = ["HasJob", "PendingWhy", "job_id_of", "why"]


class HasJob(Protocol):
    """What :func:`why` asks of an allocation (an :class:`~slurmlab.slurm.allocation.Allocation`): its job id and
    the runner that reaches its cluster."""

    @property
    def job_id(self) -> str | None: ...

    @property
    def runner(self) -> Runner: ...


@dataclass(frozen=True)
class PendingWhy:
    """Why one job waits. ``findings`` in the doctor's form (``job.held``, ``job.pending``, ``job.limit``,
    ``job.blockers``, ``job.alternatives``, or ``job.state`` once it no longer waits); ``sooner`` are the
    changes that start sooner, best first — each one a :meth:`resubmit <slurmlab.slurm.allocation.Allocation.
    resubmit>` away."""

    job_id: str
    state: str
    findings: tuple[Finding, ...]
    sooner: tuple[Alternative, ...] = ()
    rest: tuple[Alternative, ...] = ()
    job: Job | None = field(default=None, compare=False)
    checked_at: datetime = field(default_factory=lambda: datetime.now(timezone.utc), compare=False)

    @property
    def pending(self) -> bool:
        return self.state == "PENDING"

    def finding(self, check: str) -> Finding | None:
        return next((f for f in self.findings if f.check == check), None)

    def text(self) -> str:
        head = f"job {self.job_id} is {self.state} (checked {self.checked_at.strftime('%H:%M:%S')} UTC)"
        return head + "\n" + Report(self.findings).text()

    def __str__(self) -> str:
        return self.text()

    def _repr_html_(self) -> str:
        return f"<div class='slurmlab-why'>{Report(self.findings)._repr_html_()}</div>"


def job_id_of(target: HasJob | Job | str | int) -> str:
    if isinstance(target, (str, int)):
        return str(target)
    if isinstance(target, Job):
        return str(target.job_id)
    if target.job_id is None:
        raise AllocationError("the allocation has no job id yet", hint="wait until Slurm has queued it")
    return target.job_id


def _pending(
    job: Job, runner: Runner, now: datetime, alternatives: bool
) -> tuple[list[Finding], list[Alternative], list[Alternative]]:
    subject = f"job {job.display_id}"
    if job.held:
        return [judge_held(job)], [], []
    out = [judge_pending(job, now)]
    nodes = list(list_nodes(runner))
    partitions = list(list_partitions(runner))
    jobs: list[Job] = []

    def held_by() -> list[Finding]:
        jobs.extend(list_jobs(runner, all_users=True))
        return [judge_blockers(job, blockers(job, jobs, usable_nodes(job, nodes, partitions)), now)]

    out += guarded("job.blockers", "what holds its GPUs", subject, held_by, verdict=Verdict.WARN)
    # asked once for both the limit and the alternatives: the queue and the accounting database's limits
    limits = LimitContext(job, runner, jobs, partitions)
    ask = limit_ask(job.reason)
    if ask is not None:
        out += guarded(
            "job.limit",
            "which limit holds it",
            subject,
            lambda: [limit_finding(job, ask, limits)],
            verdict=Verdict.WARN,
        )
    sooner: list[Alternative] = []
    rest: list[Alternative] = []
    if alternatives and not (job.reason or "").startswith(NO_ALTERNATIVES):

        def changes() -> list[Finding]:
            s, r = pending_alternatives(job, runner, nodes=nodes, partitions=partitions, limits=limits)
            sooner.extend(s)
            rest.extend(r)
            return [
                judge_alternatives(job, s, r, unchecked=limits.known().why_unknown, compared=limits.compared)
            ]

        out += guarded(
            "job.alternatives", "what would start it sooner", subject, changes, verdict=Verdict.WARN
        )
    return out, sooner, rest


def why(
    target: HasJob | Job | str | int, runner: Runner | None = None, *, alternatives: bool = True
) -> PendingWhy:
    """Why the job waits, asked of Slurm now (blocks for a few seconds: one ``sbatch --test-only`` per change
    tried). ``alternatives=False`` skips the changes. A job that no longer waits says its state."""
    runner = runner or (target.runner if not isinstance(target, (str, int, Job)) else None) or get_runner()
    now = datetime.now(timezone.utc)
    job = job_detail(job_id_of(target), runner)
    if job.state == "PENDING":
        found, sooner, rest = _pending(job, runner, now, alternatives)
        return PendingWhy(str(job.job_id), job.state, tuple(found), tuple(sooner), tuple(rest), job, now)
    if job.state in HOLDING:
        said = Finding(
            "job.state",
            "job state",
            Verdict.OK,
            f"it no longer waits: {job.state}",
            subject=f"job {job.display_id}",
        )
    else:
        said = judge_ended(job)
    return PendingWhy(str(job.job_id), job.state, (said,), job=job, checked_at=now)
