"""What a doctor check found: a verdict, the evidence it rests on, and the fix.

Every check of ``slurmlab doctor`` (the Slurm checks and the GPU-node checks alike) returns
:class:`Finding` objects; a :class:`Report` holds them in the order they ran and renders them as
a terminal table, as HTML for a notebook and as JSON for scripts. The verdicts are ordered, so
the worst one decides the exit code of the command.
"""

from __future__ import annotations

import html
import json
from collections.abc import Callable
from dataclasses import dataclass, field
from enum import Enum
from typing import Protocol

from slurmlab.core.html_cells import td, th
from slurmlab.errors import SlurmlabError

__all__ = ["Finding", "Report", "Verdict", "guarded"]


class _Printer(Protocol):
    def text(self, obj: str) -> None: ...


class Verdict(str, Enum):
    """How a check came out. SKIP: it could not apply here (the reason is in the evidence)."""

    OK = "OK"
    SKIP = "SKIP"
    WARN = "WARN"
    FAIL = "FAIL"

    @property
    def rank(self) -> int:
        return _RANK[self]


_RANK = {Verdict.OK: 0, Verdict.SKIP: 1, Verdict.WARN: 2, Verdict.FAIL: 3}


@dataclass(frozen=True)
class Finding:
    """One check's result. ``check`` is a stable id (``controller``, ``job.pending``, ``gpu.pcie`` ...)."""

    check: str
    title: str
    verdict: Verdict
    evidence: str
    fix: str = ""
    subject: str = ""  # the job id or node name it concerns; empty for the cluster
    details: tuple[str, ...] = field(
        default=()
    )  # further lines of evidence (blocking jobs, alternatives ...)

    def to_dict(self) -> dict[str, object]:
        return {
            "check": self.check,
            "title": self.title,
            "verdict": self.verdict.value,
            "subject": self.subject,
            "evidence": self.evidence,
            "fix": self.fix,
            "details": list(self.details),
        }


@dataclass(frozen=True)
class Report:
    findings: tuple[Finding, ...]

    @property
    def worst(self) -> Verdict:
        return max((f.verdict for f in self.findings), key=lambda v: v.rank, default=Verdict.OK)

    def exit_code(self) -> int:
        """0 when nothing failed, 1 when a check failed (a WARN alone is 0: it is advice)."""
        return 1 if self.worst is Verdict.FAIL else 0

    def to_dict(self) -> dict[str, object]:
        return {"worst": self.worst.value, "findings": [f.to_dict() for f in self.findings]}

    def to_json(self) -> str:
        return json.dumps(self.to_dict(), indent=2)

    def text(self) -> str:
        """A terminal table: verdict, check, subject, evidence; the fix and details indented under each row."""
        lines = []
        for f in self.findings:
            subject = f" [{f.subject}]" if f.subject else ""
            lines.append(f"{f.verdict.value:<4}  {f.title}{subject}: {f.evidence}")
            lines.extend(f"        {d}" for d in f.details)
            if f.fix:
                lines.append(f"        -> {f.fix}")
        return "\n".join(lines)

    def __str__(self) -> str:
        return self.text()

    def _repr_pretty_(self, printer: _Printer, cycle: bool) -> None:
        # IPython's text/plain (a terminal console, a saved notebook's fallback): the table, not the dataclass
        printer.text(self.text())

    def _repr_html_(self) -> str:
        rows = []
        for f in self.findings:
            extra = "".join(f"<div>{html.escape(d)}</div>" for d in f.details)
            fix = f"<div class='slurmlab-DoctorFix'>&rarr; {html.escape(f.fix)}</div>" if f.fix else ""
            rows.append(
                f"<tr class='slurmlab-Doctor-{f.verdict.value}'>{td(f'<b>{f.verdict.value}</b>')}"
                f"{td(html.escape(f.title))}{td(html.escape(f.subject))}"
                f"{td(html.escape(f.evidence) + extra + fix)}</tr>"
            )
        # left-aligned cells (slurmlab.core.html_cells): JupyterLab right-aligns table text by default
        head = "".join(th(h) for h in ("verdict", "check", "subject", "evidence and fix"))
        return (
            f"<table class='slurmlab-Doctor'><thead><tr>{head}</tr></thead><tbody>"
            + "".join(rows)
            + "</tbody></table>"
        )


def guarded(
    check: str,
    title: str,
    subject: str,
    make: Callable[[], list[Finding]],
    *,
    verdict: Verdict = Verdict.FAIL,
    fix: str = "ask again in a moment",
) -> list[Finding]:
    """``make()``, or one finding of ``verdict`` saying what could not be checked when Slurm failed or answered
    garbage on the way: one failing part never hides the others, and no traceback reaches the user."""
    try:
        return make()
    except SlurmlabError as exc:
        return [Finding(check, title, verdict, f"could not check: {exc.message}", exc.hint or fix, subject)]
