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
from slurmlab.core.html_cells import evidence_html, td, th

__all__ = [
    "CHECK_SUBJECTS",
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
        # left-aligned cells, the evidence as key: value lines (slurmlab.core.html_cells)
        rows = "".join(
            f"<tr>{td(c.id)}{td(f'<b>{c.status}</b>', f'color:{colour[c.status]}')}"
            f"{td(html.escape(c.title))}{td(html.escape(c.reason))}{td(evidence_html(c.evidence))}</tr>"
            for c in self.checks
        )
        head = "".join(th(h) for h in ("check", "status", "what", "why", "evidence"))
        return f"<table><tr>{head}</tr>{rows}</table>"


# what each check is about, in a word or two: the verdict names what it verified and what it could not
CHECK_SUBJECTS = {
    "I1": "GPU count",
    "I2": "CUDA_VISIBLE_DEVICES",
    "I3": "GPU identity",
    "I4": "device cgroup",
    "I5": "memory",
    "I6": "compute under a neighbour's load",
    "I7": "CPUs near the GPU",
    "I8": "clocks",
    "I9": "compute mode",
    "I10": "co-location",
}


@dataclass
class VerifyReport(IsolationReport):
    """The checks, plus ``verdict`` (isolated / not isolated / shared / no GPUs, derived from the checks), where
    identities came from, and ``notes``: what the place the step ran cannot show (a sandbox's limits).

    ``verdict`` is the word; :attr:`verdict_text` and :meth:`scope` say how far it goes: "isolated" only when every
    check was judged, "isolated as far as checked" when some SKIPped, with what PASSed, what was not checked (and
    why) and what was only seen (INFO), so that a verdict never claims more than its checks showed."""

    verdict: str = NO_GPUS
    identity_source: str = "hardware"
    notes: list[str] = field(default_factory=list)

    @property
    def verified(self) -> list[CheckResult]:
        """The checks that PASSed."""
        return [c for c in self.checks if c.status == PASS]

    @property
    def not_checked(self) -> list[CheckResult]:
        """The checks that SKIPped: what the verdict says nothing about."""
        return [c for c in self.checks if c.status == SKIP]

    @property
    def verdict_text(self) -> str:
        """The verdict as a reader should take it: limited to what was checked, with the failed checks named."""
        if self.verdict == ISOLATED and self.not_checked:
            return f"{ISOLATED} as far as checked"
        if self.verdict == NOT_ISOLATED:
            return f"{NOT_ISOLATED}; failed: {', '.join(_named(c) for c in self.failed)}"
        return self.verdict

    def scope(self) -> list[str]:
        """What the verdict rests on and what it cannot say, one line each (none for an empty part)."""
        on = "" if self.identity_source == "hardware" else " (on Slurm's records: no GPU hardware answered)"
        lines = []
        if self.verified:
            lines.append(f"verified{on}: {', '.join(_named(c) for c in self.verified)}")
        if self.not_checked:
            lines.append(f"not checked: {_by_reason(self.not_checked)}")
        seen = [c for c in self.checks if c.status == INFO]
        if seen:
            lines.append(f"seen, not judged: {_by_reason(seen)}")
        return lines

    def summary(self) -> str:
        head = (
            f"verdict: {self.verdict_text} (GPU identity from "
            f"{'the GPUs themselves' if self.identity_source == 'hardware' else 'Slurm: no GPU hardware seen'})"
        )
        return "\n".join(
            [
                head,
                *(f"  {line}" for line in self.scope()),
                *(f"note: {n}" for n in self.notes),
                super().summary(),
            ]
        )

    def _repr_html_(self) -> str:
        notes = "".join(f"<p class='slurmlab-sandbox-note'>{html.escape(n)}</p>" for n in self.notes)
        scope = "".join(f"<p class='slurmlab-verdict-scope'>{html.escape(line)}</p>" for line in self.scope())
        return (
            f"<p class='slurmlab-verdict'><b>verdict: {html.escape(self.verdict_text)}</b>"
            f" (identity: {self.identity_source})</p>" + scope + notes + super()._repr_html_()
        )


def _by_reason(checks: list[CheckResult]) -> str:
    """``I4 device cgroup, I5 memory (no GPU visible …); I6 … (…)``: the checks grouped by their reason."""
    groups: dict[str, list[str]] = {}
    for c in checks:
        groups.setdefault(c.reason or "no reason given", []).append(_named(c))
    return "; ".join(f"{', '.join(names)} ({reason})" for reason, names in groups.items())


def _named(check: CheckResult) -> str:
    subject = CHECK_SUBJECTS.get(check.id)
    return f"{check.id} {subject}" if subject else check.id
