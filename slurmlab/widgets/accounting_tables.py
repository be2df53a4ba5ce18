"""The tables of ``%sacct`` and ``%sshare``: an HTML table in a notebook, aligned text elsewhere, and JSON.

Plain data and strings (no ipywidgets). Each table carries, under its rows, the lines that explain it (the
efficiency of one job, what fair-share numbers mean), so the explanation travels with the numbers.
"""

from __future__ import annotations

import html
import json
from collections.abc import Sequence

from slurmlab.core.diagnosis.efficiency import Efficiency, efficiencies
from slurmlab.core.diagnosis.fairshare import FAIRSHARE_LEGEND, ShareExplained, state_in_words
from slurmlab.core.jsontypes import JSONObject, JSONValue
from slurmlab.core.slurm.exit_status import LAST_SIGNAL, NOT_A_SIGNAL
from slurmlab.core.slurm.sacct import SacctRecord
from slurmlab.core.slurm.timefmt import format_duration
from slurmlab.widgets.rows import Table

__all__ = [
    "JOB_COLUMNS",
    "SHARE_COLUMNS",
    "STEP_COLUMNS",
    "AccountingTable",
    "job_table",
    "share_table",
    "state_text",
    "steps_table",
]

JOB_COLUMNS = ("job", "name", "state", "elapsed", "gpus", "efficiency")
STEP_COLUMNS = ("step", "name", "state", "exit", "elapsed", "cpus", "max_rss")
SHARE_COLUMNS = ("account", "fair_share", "shares", "usage", "gpu_minutes", "standing")
_NAME_WIDTH = 30


class AccountingTable(Table):
    """A table with the lines that explain it under its rows, and its data as JSON (``to_json``)."""

    def __init__(
        self,
        rows: Sequence[dict[str, str]],
        columns: Sequence[str],
        *,
        title: str = "",
        empty: str = "(nothing)",
        notes: Sequence[str] = (),
        data: JSONObject | None = None,
    ) -> None:
        super().__init__(rows, columns, title=title, empty=empty)
        self.notes = list(notes)
        self.data: JSONObject = data if data is not None else {}

    def text(self) -> str:
        return super().text() + "".join(f"\n{n}" for n in self.notes)

    def html(self) -> str:
        notes = "".join(f"<div class='slurmlab-note'>{html.escape(n)}</div>" for n in self.notes)
        return f"<div class='slurmlab-accounting'>{super().html()}{notes}</div>"

    def to_json(self) -> JSONObject:
        """The data behind the table (records, efficiency, explanations), for a program to read."""
        return {
            "title": self.title,
            "rows": [dict(r) for r in self.rows],
            "notes": list(self.notes),
            **self.data,
        }

    def json(self) -> str:
        return json.dumps(self.to_json(), indent=1, default=str)


def _name(text: str) -> str:
    # a job name is the user's free text: one line, bounded, so a hostile name cannot break the table's layout
    flat = " ".join(text.split())
    return flat if len(flat) <= _NAME_WIDTH else flat[: _NAME_WIDTH - 1] + "…"


def state_text(record: SacctRecord, who: str | None = None) -> str:
    """``TIMEOUT: stopped at its time limit``; ``who`` names the canceller of a CANCELLED job."""
    words = state_in_words(record.state, who)
    return record.state if words == record.state.lower().replace("_", " ") else f"{record.state}: {words}"


def _elapsed(record: SacctRecord) -> str:
    ran = format_duration(record.elapsed, unlimited="-")
    if record.is_job and record.time_limit is not None:
        return f"{ran} of {format_duration(record.time_limit)}"
    return ran


def _efficiency_text(eff: Efficiency | None) -> str:
    if eff is None:
        return ""
    line = eff.line()
    return line.split(": ", 1)[1] if line.startswith("Efficiency of job ") else line


def job_table(
    records: Sequence[SacctRecord], *, title: str, names: dict[int, str] | None = None, note: str = ""
) -> AccountingTable:
    """One row per job (its own record), with its efficiency; ``names``: uid -> name of cancellers."""
    effs = efficiencies(records)
    names = names or {}
    rows: list[dict[str, str]] = []
    jobs: list[JSONValue] = []
    for r in (r for r in records if r.is_job):
        eff = effs.get(r.job_id) if r.start is not None else None  # a job that never ran used nothing
        who = names.get(r.cancelled_by) if r.cancelled_by is not None else None
        rows.append(
            {
                "job": r.job_id,
                "name": _name(r.name),
                "state": state_text(r, who),
                "elapsed": _elapsed(r),
                "gpus": str(r.gpus) if r.gpus else "-",
                "efficiency": _efficiency_text(eff),
            }
        )
        jobs.append(
            {
                **r.to_dict(),
                "state_words": state_in_words(r.state, who),
                "efficiency": eff.to_dict() if eff is not None else None,
            }
        )
    return AccountingTable(
        rows, JOB_COLUMNS, title=title, empty="(no jobs)", notes=[note] if note else [], data={"jobs": jobs}
    )


def steps_table(
    records: Sequence[SacctRecord], job_id: str, *, names: dict[int, str] | None = None
) -> AccountingTable:
    """One job: its own line, then each step (``batch``, ``extern``, ``0`` ...), with the efficiency line."""
    names = names or {}
    rows = []
    for r in records:
        who = names.get(r.cancelled_by) if r.cancelled_by is not None else None
        exit_text = (
            "-"
            if r.exit is None
            else f"{r.exit.code}" + (f", {r.exit.signal_words}" if r.exit.signal else "")
        )
        rows.append(
            {
                "step": r.step or "(job)",
                "name": _name(r.name),
                "state": state_text(r, who),
                "exit": exit_text,
                "elapsed": _elapsed(r),
                "cpus": "-" if r.cpus is None else str(r.cpus),
                "max_rss": "-" if r.max_rss_mb is None else f"{r.max_rss_mb} MiB",
            }
        )
    job = next((r for r in records if r.is_job), None)
    eff = efficiencies(records).get(job_id) if records and job is not None and job.start is not None else None
    notes = [eff.line()] if eff is not None else []
    if any(r.exit is not None and r.exit.signal > LAST_SIGNAL for r in records):
        notes.append(NOT_A_SIGNAL)
    data: JSONObject = {
        "job_id": job_id,
        "records": [r.to_dict() for r in records],
        "efficiency": eff.to_dict() if eff is not None else None,
    }
    head = f"job {job_id}" + (f" ({_name(job.name)}, {job.user}, account {job.account})" if job else "")
    return AccountingTable(
        rows, STEP_COLUMNS, title=head, empty="(accounting has no record of it yet)", notes=notes, data=data
    )


def _fraction(value: float | None) -> str:
    return "-" if value is None else f"{value:.3f}"


def share_table(shares: Sequence[ShareExplained], *, title: str) -> AccountingTable:
    """My fair-share per account: the numbers, then what they mean in words, then what each number is."""
    rows = [
        {
            "account": s.account,
            "fair_share": _fraction(s.fair_share),
            "shares": _fraction(s.shares),
            "usage": _fraction(s.usage),
            "gpu_minutes": "-" if s.gpu_minutes is None else f"{s.gpu_minutes:g}",
            "standing": s.standing,
        }
        for s in shares
    ]
    notes = [f"{s.account}: {s.sentence}" for s in shares] + list(FAIRSHARE_LEGEND)
    return AccountingTable(
        rows,
        SHARE_COLUMNS,
        title=title,
        empty="(no associations)",
        notes=notes,
        data={"shares": [s.to_dict() for s in shares]},
    )
