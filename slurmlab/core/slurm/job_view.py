"""One typed view of a job for whoever shows it, built from the full record, the cheap poll, or both.

The poller hands over two records of one job: the brief state of every round (``squeue -o BRIEF_FORMAT``,
:class:`~slurmlab.core.slurm.squeue_brief.JobBrief`) and, when something changed, the full detail
(``scontrol show job -d``, :class:`~slurmlab.core.slurm.models.Job`). Panels, tables and magics read this
view instead of either, so a field missing from one source is a typed None or empty value, never a guess.

API::

    JobView.from_job(job)  JobView.from_brief(brief)
    job_view(job, brief) -> JobView | None     # both merged: the detail's values, the brief's where it has none
    view.time_left(now)  view.elapsed(now)  view.expected_start  view.held  view.gpus_by_node()
"""

from __future__ import annotations

from dataclasses import dataclass
from datetime import datetime

from slurmlab.core.slurm.models import GresAlloc, Job
from slurmlab.core.slurm.squeue_brief import JobBrief
from slurmlab.core.slurm.states import HOLDING, expected_start, is_held

__all__ = ["JobView", "job_view"]


@dataclass(frozen=True)
class JobView:
    """One job as shown. Durations in seconds (None = unlimited or not known); ``gpu_allocs`` (GPU indices
    per node) come only with the detail, and ``detailed`` says whether it was there."""

    job_id: int
    display_id: str
    state: str
    reason: str | None = None
    name: str = ""
    user: str | None = None
    partition: str | None = None
    nodelist: str = ""
    nodes: tuple[str, ...] = ()
    start_time: datetime | None = None
    end_time: datetime | None = None
    time_limit: int | None = None
    gpu_allocs: tuple[GresAlloc, ...] = ()
    gpus_asked: tuple[str, ...] = ()  # the GPUs the job asked for, as Slurm writes them (gpu:h100:2)
    num_tasks: int | None = None
    comment: str | None = None
    detailed: bool = False
    submit_time: datetime | None = None  # from the detail only (the brief poll does not ask for it)

    @classmethod
    def from_job(cls, job: Job) -> JobView:
        return cls(
            job_id=job.job_id,
            display_id=job.display_id,
            state=job.state,
            reason=job.reason,
            name=job.name,
            user=job.user,
            partition=job.partition,
            nodelist=job.nodelist,
            nodes=job.nodes,
            start_time=job.start_time,
            end_time=job.end_time,
            time_limit=job.time_limit,
            gpu_allocs=job.gpu_allocs,
            gpus_asked=_asked(job),
            num_tasks=job.num_tasks,
            comment=job.comment,
            detailed=True,
            submit_time=job.submit_time,
        )

    @classmethod
    def from_brief(cls, brief: JobBrief) -> JobView:
        return cls(
            job_id=brief.job_id,
            display_id=brief.display_id,
            state=brief.state,
            reason=brief.reason,
            name=brief.name,
            user=brief.user,
            partition=brief.partition,
            nodelist=brief.nodelist,
            nodes=brief.nodes,
            start_time=brief.start_time,
            end_time=brief.end_time,
            time_limit=brief.time_limit,
            gpus_asked=tuple(g.render() for g in brief.tres_per_node if g.name == "gpu"),
        )

    @property
    def held(self) -> bool:
        return is_held(self.state, self.reason)

    @property
    def expected_start(self) -> datetime | None:
        """When Slurm expects a pending job to start (None once it holds nodes, or when it has no estimate)."""
        return expected_start(self.state, self.start_time)

    def gpus_by_node(self) -> dict[str, tuple[int, ...]]:
        return {a.node: a.gpu_indices for a in self.gpu_allocs if a.gpu_indices}

    def time_left(self, now: datetime) -> float | None:
        """Seconds until the time limit ends a job that holds nodes; None when it has no limit or holds no
        nodes (a pending job's clock has not started). The same rule as :meth:`Job.time_left`."""
        if self.state not in HOLDING or self.time_limit is None:
            return None
        if self.end_time is not None:
            return max(0.0, (self.end_time - now).total_seconds())
        if self.start_time is None:
            return None
        used = (now - self.start_time).total_seconds()
        return max(0.0, self.time_limit - used)

    def elapsed(self, now: datetime) -> float | None:
        """Seconds since a job that holds nodes started; None before it starts."""
        if self.state not in HOLDING or self.start_time is None:
            return None
        return max(0.0, (now - self.start_time).total_seconds())


def _asked(job: Job) -> tuple[str, ...]:
    """The GPUs a job asked for: per node and per job, else the GPU count of its TRES."""
    asked = [g.render() for g in job.tres_per_node if g.name == "gpu"]
    asked += [g.render() for g in job.tres_per_job if g.name == "gpu"]
    tres = job.tres_req or job.tres_alloc
    if not asked and tres is not None and tres.gpus:
        asked = [f"gpu:{tres.gpus}"]
    return tuple(asked)


def job_view(job: Job | None, brief: JobBrief | None) -> JobView | None:
    """One view of both records of a job (None when there is neither).

    State and reason come from the brief when there is one (the poll is what an allocation follows); every
    other field from the detail, or from the brief where the detail has no value."""
    if job is None:
        return JobView.from_brief(brief) if brief is not None else None
    full = JobView.from_job(job)
    if brief is None:
        return full
    return JobView(
        job_id=full.job_id,
        display_id=full.display_id,
        state=brief.state,
        reason=brief.reason,
        name=full.name or brief.name,
        user=full.user if full.user is not None else brief.user,
        partition=full.partition if full.partition is not None else brief.partition,
        nodelist=full.nodelist or brief.nodelist,
        nodes=full.nodes or brief.nodes,
        start_time=full.start_time if full.start_time is not None else brief.start_time,
        end_time=full.end_time if full.end_time is not None else brief.end_time,
        time_limit=full.time_limit if full.time_limit is not None else brief.time_limit,
        gpu_allocs=full.gpu_allocs,
        gpus_asked=full.gpus_asked,
        num_tasks=full.num_tasks,
        comment=full.comment,
        detailed=True,
        submit_time=full.submit_time,
    )
