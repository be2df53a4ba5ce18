"""What the isolation checks found: the :class:`Grant` they judged against, each :class:`CheckResult`,
and the reports that hold them (:class:`IsolationReport`, and :class:`VerifyReport` with its verdict).

The checks themselves are in :mod:`.isolation` (pure, over worker reports) and :mod:`.verify` (run
in an allocation).
"""

from __future__ import annotations

import html
import json
from collections.abc import Mapping
from dataclasses import asdict, dataclass, field
from typing import Any

from slurmlab.core import palette

__all__ = [
    "EXCLUSIVE",
    "FAIL",
    "INFO",
    "ISOLATED",
    "MIG",
    "NOT_ISOLATED",
    "NO_GPUS",
    "PASS",
    "SHARED",
    "SKIP",
    "CheckResult",
    "Grant",
    "IsolationReport",
    "VerifyReport",
]

PASS, FAIL, SKIP, INFO = "PASS", "FAIL", "SKIP", "INFO"
EXCLUSIVE, SHARED, MIG = "exclusive", "shared", "mig"
# the verdict over the tasks' GPUs; "not isolated": distinct GPUs, but a check FAILed
ISOLATED, NO_GPUS, NOT_ISOLATED = "isolated", "no GPUs", "not isolated"


@dataclass(frozen=True)
class Grant:
    """What Slurm granted each task (from the request, or from the step's SLURM_* variables)."""

    gpus_per_task: int | None = None
    sharing: str = EXCLUSIVE  # exclusive GPUs, shared (shard/mps/same GPU) or mig
    mig_profile: str | None = None  # e.g. "1g.18gb"
    gpu_bind: str | None = None  # e.g. "closest"
    gpu_freq: str | None = None  # e.g. "1500" or "high"

    @classmethod
    def from_env(cls, env: Mapping[str, str]) -> Grant:
        """Read a step's environment: SLURM_STEP_GPUS/SLURM_JOB_GPUS, shards, bind, frequency."""
        gpus = env.get("SLURM_STEP_GPUS") or env.get("SLURM_JOB_GPUS")
        count = len([g for g in gpus.split(",") if g.strip()]) if gpus else None
        per_task = env.get("SLURM_GPUS_PER_TASK")
        if per_task and per_task.split(":")[-1].isdigit():
            count = int(per_task.split(":")[-1])
        sharing = EXCLUSIVE
        if env.get("SLURM_SHARDS_ON_NODE") or env.get("CUDA_MPS_ACTIVE_THREAD_PERCENTAGE"):
            sharing = SHARED
        cvd = env.get("CUDA_VISIBLE_DEVICES", "")
        if cvd.startswith("MIG-"):
            sharing = MIG
        bind = env.get("SLURM_GPU_BIND") or None
        return cls(count, sharing, None, bind, env.get("SLURM_GPU_FREQ") or None)


@dataclass(frozen=True)
class CheckResult:
    id: str
    title: str
    status: str
    evidence: Any = None
    reason: str = ""


@dataclass
class IsolationReport:
    checks: list[CheckResult]
    grant: Grant
    meta: dict[str, Any] = field(default_factory=dict)

    def by_id(self, check_id: str) -> CheckResult:
        return next(c for c in self.checks if c.id == check_id)

    @property
    def failed(self) -> list[CheckResult]:
        return [c for c in self.checks if c.status == FAIL]

    def as_dict(self) -> dict[str, Any]:
        return {"grant": asdict(self.grant), "checks": [asdict(c) for c in self.checks], "meta": self.meta}

    def to_json(self, indent: int | None = 2) -> str:
        return json.dumps(self.as_dict(), indent=indent, default=str)

    def summary(self) -> str:
        lines = [f"isolation checks ({len(self.failed)} failed):"]
        for c in self.checks:
            why = f" — {c.reason}" if c.reason else ""
            lines.append(f"  {c.id} {c.status:<4} {c.title}{why}")
            if c.evidence not in (None, "", [], {}):
                lines.append(f"       evidence: {json.dumps(c.evidence, default=str)[:300]}")
        return "\n".join(lines)

    def __str__(self) -> str:
        return self.summary()

    def _repr_html_(self) -> str:
        colour = {PASS: palette.OK, FAIL: palette.FAILED, SKIP: palette.MUTED, INFO: palette.INFO}
        rows = "".join(
            f"<tr><td>{c.id}</td><td style='color:{colour[c.status]}'><b>{c.status}</b></td>"
            f"<td>{html.escape(c.title)}</td><td>{html.escape(c.reason)}</td>"
            f"<td><code>{html.escape(json.dumps(c.evidence, default=str)[:300])}</code></td></tr>"
            for c in self.checks
        )
        return (
            "<table><tr><th>check</th><th>status</th><th>what</th><th>why</th><th>evidence</th></tr>"
            f"{rows}</table>"
        )


@dataclass
class VerifyReport(IsolationReport):
    """The checks, plus ``verdict`` (isolated / not isolated / shared / no GPUs, derived from the checks), where
    identities came from, and ``notes``: what the place the step ran cannot show (a sandbox's limits)."""

    verdict: str = NO_GPUS
    identity_source: str = "hardware"
    notes: list[str] = field(default_factory=list)

    def summary(self) -> str:
        head = (
            f"verdict: {self.verdict} (GPU identity from "
            f"{'the GPUs themselves' if self.identity_source == 'hardware' else 'Slurm: no GPU hardware seen'})"
        )
        if self.verdict == NOT_ISOLATED:
            head += f"; failed: {', '.join(c.id for c in self.failed)}"
        return "\n".join([head, *(f"note: {n}" for n in self.notes), super().summary()])

    def _repr_html_(self) -> str:
        failed = f"; failed: {', '.join(c.id for c in self.failed)}" if self.verdict == NOT_ISOLATED else ""
        notes = "".join(f"<p class='slurmlab-sandbox-note'>{html.escape(n)}</p>" for n in self.notes)
        return (
            f"<p class='slurmlab-verdict'><b>verdict: {html.escape(self.verdict)}</b>"
            f" (identity: {self.identity_source}){html.escape(failed)}</p>" + notes + super()._repr_html_()
        )
