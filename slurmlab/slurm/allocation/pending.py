"""Why a pending allocation waits, gathered from Slurm: the real cause first (the reason in plain words, or its
``--begin`` time still ahead; then the QOS/association limit Slurm names, with the usage, the cap and which change
lifts it), the running jobs that hold what it needs and when they end, Slurm's expected start (said once), and
the changes that would start it strictly sooner — ``sbatch --test-only`` says when, and no QOS, association or
partition limit would hold them (``--test-only`` applies none) — and the switch to one.

The judgement is the doctor's (:mod:`slurmlab.core.diagnosis.job_checks`; the limit, blockers and changes are
:func:`slurmlab.slurm.pending_alternatives.pending_checks`, which the doctor calls too); this module only gathers
for one allocation. :func:`why` blocks (several Slurm commands, each with a timeout): the panel calls it from a
worker thread, never from the kernel's, and holds its answer to the estimate it shows
(:meth:`PendingWhy.against`).

API::

    why(alloc_or_job_id, runner=None, *, alternatives=True) -> PendingWhy
    PendingWhy.against(expected) -> PendingWhy     "sooner" held to Slurm's estimate as it stands now
"""

from __future__ import annotations

from dataclasses import dataclass, field, replace
from datetime import datetime, timezone
from typing import Protocol

from slurmlab.core.diagnosis.alternatives import Alternative, rank
from slurmlab.core.diagnosis.findings import Finding, Report, Verdict
from slurmlab.core.diagnosis.job_checks import judge_alternatives, judge_ended, judge_held, judge_pending
from slurmlab.core.slurm.models import Job
from slurmlab.core.slurm.states import HOLDING
from slurmlab.errors import AllocationError
from slurmlab.slurm.job_queries import job_detail
from slurmlab.slurm.node_queries import list_nodes, list_partitions
from slurmlab.slurm.pending_alternatives import PendingChecks, pending_checks
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
    unchecked: str = field(default="", compare=False)  # why the limits could not be read ("" when they were)
    compared: str = field(default="", compare=False)  # what "sooner" was measured against

    @property
    def pending(self) -> bool:
        return self.state == "PENDING"

    @property
    def expected_start(self) -> datetime | None:
        """Slurm's expected start of the job when it was asked (None: it had none yet)."""
        return self.job.expected_start if self.job is not None else None

    def against(self, expected: datetime | None) -> PendingWhy:
        """The same answer with "sooner" held to ``expected``, Slurm's estimate as it stands now (the panel's
        poll may have one the ask did not): a change that no longer starts strictly before it moves to
        ``rest``, and the alternatives finding says so. None (no estimate now): unchanged."""
        if expected is None or self.job is None or expected == self.expected_start:
            return self
        sooner, later = rank(self.sooner, expected)
        if not later:
            return self
        rest = (*later, *self.rest)
        compared = "before the job's own expected start"
        said = judge_alternatives(self.job, sooner, rest, unchecked=self.unchecked, compared=compared)
        findings = tuple(said if f.check == "job.alternatives" else f for f in self.findings)
        return replace(self, findings=findings, sooner=tuple(sooner), rest=rest, compared=compared)

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
) -> tuple[list[Finding], PendingChecks]:
    if job.held:
        return [judge_held(job)], PendingChecks()
    checks = pending_checks(
        job,
        runner,
        nodes=list(list_nodes(runner)),
        partitions=list(list_partitions(runner)),
        now=now,
        alternatives=alternatives,
    )
    return [judge_pending(job, now), *checks.findings], checks


def why(
    target: HasJob | Job | str | int, runner: Runner | None = None, *, alternatives: bool = True
) -> PendingWhy:
    """Why the job waits, asked of Slurm now (blocks for a few seconds: one ``sbatch --test-only`` per change
    tried). ``alternatives=False`` skips the changes. A job that no longer waits says its state."""
    runner = runner or (target.runner if not isinstance(target, (str, int, Job)) else None) or get_runner()
    now = datetime.now(timezone.utc)
    job = job_detail(job_id_of(target), runner)
    if job.state == "PENDING":
        found, checks = _pending(job, runner, now, alternatives)
        return PendingWhy(
            str(job.job_id),
            job.state,
            tuple(found),
            checks.sooner,
            checks.rest,
            job,
            now,
            unchecked=checks.unchecked,
            compared=checks.compared,
        )
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
