"""What a provisioned kernel's allocation is doing, for whoever asks (its log, a sidebar): one small value. Pure."""

from __future__ import annotations

from dataclasses import dataclass, field
from datetime import datetime

__all__ = ["PHASES", "KernelJobStatus"]

# checking: the request is read and checked; pending: Slurm queued the job; starting: granted, the kernel starts
# as a step; running: the kernel answers; ended: the allocation ended under the kernel (walltime, scancel …);
# released: the kernel was shut down and slurmlab cancelled the job; refused: the request or Slurm said no
PHASES = ("new", "checking", "pending", "starting", "running", "ended", "released", "refused")


@dataclass(frozen=True)
class KernelJobStatus:
    """The provisioner's public status (``provisioner.status``). ``message`` is the plain sentence shown to the
    user; ``reason`` Slurm's own pending reason or end state, ``why`` its plain words."""

    phase: str = "new"
    job_id: str | None = None
    message: str = ""
    reason: str | None = None
    why: str = ""
    expected_start: datetime | None = None
    nodes: tuple[str, ...] = ()
    gpus: dict[str, tuple[int, ...]] = field(default_factory=dict)
    step: str | None = None  # J.S of the kernel's step
    request: str = ""  # the request in words

    def to_dict(self) -> dict[str, object]:
        """JSON-ready (the expected start in ISO 8601)."""
        return {
            "phase": self.phase,
            "job_id": self.job_id,
            "message": self.message,
            "reason": self.reason,
            "why": self.why,
            "expected_start": self.expected_start.isoformat() if self.expected_start else None,
            "nodes": list(self.nodes),
            "gpus": {node: list(idx) for node, idx in self.gpus.items()},
            "step": self.step,
            "request": self.request,
        }


def pending_message(job_id: str, why: str, expected_start: datetime | None) -> str:
    """``job 12 is pending: <why>; Slurm expects it to start at 10:42 UTC``."""
    text = f"job {job_id} is pending" + (f": {why}" if why else "")
    if expected_start is not None:
        text += f"; Slurm expects it to start at {expected_start:%Y-%m-%d %H:%M %Z}".rstrip()
    return text
