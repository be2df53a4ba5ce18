"""How well a job used what it held, from its sacct records: the one line ``seff`` and jobstats print.

API::

    efficiency(records) -> Efficiency      # one job: its own record and its steps
    efficiencies(records) -> dict[str, Efficiency]   # job id -> Efficiency, for a listing of many jobs
    Efficiency.line() -> str               # "2 GPUs held 0.50 GPU-hours (used: ...) · CPU 12% of ... · peak memory ..."

GPU-hours held are the job's GPUs times its elapsed time. GPU-hours used need Slurm's GPU utilisation TRES
(``gres/gpuutil`` in a step's TRESUsageInAve: Slurm 23.02+ with NVML on real GPUs); without it they are None and
the line says the cluster does not account it, rather than guess. CPU efficiency is TotalCPU over the CPU time
held (CPUs x elapsed); peak memory is the largest MaxRSS of any step against the memory requested.
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from dataclasses import dataclass

from slurmlab.core.jsontypes import JSONObject
from slurmlab.core.slurm.sacct import SacctRecord
from slurmlab.core.slurm.timefmt import format_duration

__all__ = ["Efficiency", "efficiencies", "efficiency"]


@dataclass(frozen=True)
class Efficiency:
    """One job's use of what it held. Fractions are 0..1 (CPU efficiency may pass 1 with extra threads)."""

    job_id: str
    elapsed: int
    cpus: int
    gpus: int
    gpu_hours_held: float
    gpu_hours_used: float | None  # None: this Slurm (or cluster) does not account GPU utilisation
    cpu_seconds: float | None
    cpu_efficiency: float | None
    peak_rss_mb: int | None
    requested_mem_mb: int | None

    @property
    def memory_fraction(self) -> float | None:
        if self.peak_rss_mb is None or not self.requested_mem_mb:
            return None
        return self.peak_rss_mb / self.requested_mem_mb

    def _gpu_part(self) -> str | None:
        if not self.gpus:
            return None
        held = f"{self.gpus} GPU{'s' if self.gpus != 1 else ''} held {self.gpu_hours_held:.2f} GPU-hours"
        if self.gpu_hours_used is None:
            return held + " (used: not accounted by this cluster's Slurm)"
        share = f", {self.gpu_hours_used / self.gpu_hours_held:.0%}" if self.gpu_hours_held else ""
        return held + f" (used {self.gpu_hours_used:.2f}{share})"

    def _cpu_part(self) -> str:
        core_time = format_duration(self.cpus * self.elapsed)
        if self.cpu_efficiency is None:
            return f"CPU: not measured ({self.cpus} CPUs x {format_duration(self.elapsed)})"
        return f"CPU {self.cpu_efficiency:.0%} of {core_time} core-time ({self.cpus} CPU{'s' if self.cpus != 1 else ''})"

    def _memory_part(self) -> str:
        if self.peak_rss_mb is None:
            return "peak memory: not measured"
        text = f"peak memory {self.peak_rss_mb} MiB"
        fraction = self.memory_fraction
        if fraction is not None:
            text += f" of {self.requested_mem_mb} MiB requested ({fraction:.0%})"
        return text

    def line(self) -> str:
        """The seff-like summary on one line."""
        parts = [p for p in (self._gpu_part(), self._cpu_part(), self._memory_part()) if p]
        return f"Efficiency of job {self.job_id}: " + " · ".join(parts)

    def to_dict(self) -> JSONObject:
        return {
            "job_id": self.job_id,
            "elapsed": self.elapsed,
            "cpus": self.cpus,
            "gpus": self.gpus,
            "gpu_hours_held": self.gpu_hours_held,
            "gpu_hours_used": self.gpu_hours_used,
            "cpu_seconds": self.cpu_seconds,
            "cpu_efficiency": self.cpu_efficiency,
            "peak_rss_mb": self.peak_rss_mb,
            "requested_mem_mb": self.requested_mem_mb,
            "line": self.line(),
        }


def _gpu_seconds_used(steps: Sequence[SacctRecord]) -> float | None:
    """GPU-seconds used by the steps, from gres/gpuutil (a percentage summed over the step's GPUs)."""
    used = [(s.gpu_util_percent, s.elapsed or 0) for s in steps]
    if all(u is None for u, _ in used):
        return None
    return sum((u or 0.0) / 100 * t for u, t in used)


def efficiency(records: Iterable[SacctRecord]) -> Efficiency:
    """The efficiency of one job from its records (the job's own line and its steps, as sacct lists them).

    Records of other jobs are ignored; ValueError when no record is given."""
    rows = list(records)
    if not rows:
        raise ValueError("efficiency() needs the sacct records of a job")
    jid = rows[0].job_id
    rows = [r for r in rows if r.job_id == jid]
    job = next((r for r in rows if r.is_job), rows[0])
    steps = [r for r in rows if not r.is_job]
    elapsed = job.elapsed or 0
    cpus = job.cpus or 0
    gpus = job.gpus
    cpu_seconds = (
        job.total_cpu
        if job.total_cpu is not None
        else (sum(s.total_cpu or 0.0 for s in steps) if any(s.total_cpu is not None for s in steps) else None)
    )
    held_cpu = cpus * elapsed
    rss = [s.max_rss_mb for s in steps if s.max_rss_mb is not None]
    used = _gpu_seconds_used(steps)
    return Efficiency(
        job_id=jid,
        elapsed=elapsed,
        cpus=cpus,
        gpus=gpus,
        gpu_hours_held=gpus * elapsed / 3600,
        gpu_hours_used=None if used is None else used / 3600,
        cpu_seconds=cpu_seconds,
        cpu_efficiency=(cpu_seconds / held_cpu) if cpu_seconds is not None and held_cpu else None,
        peak_rss_mb=max(rss) if rss else None,
        requested_mem_mb=job.requested_mem_mb,
    )


def efficiencies(records: Iterable[SacctRecord]) -> dict[str, Efficiency]:
    """job id -> :func:`efficiency`, in the order the jobs first appear."""
    groups: dict[str, list[SacctRecord]] = {}
    for r in records:
        groups.setdefault(r.job_id, []).append(r)
    return {jid: efficiency(rows) for jid, rows in groups.items()}
