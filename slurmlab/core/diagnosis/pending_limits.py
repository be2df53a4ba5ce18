"""Which QOS or association limit holds a pending job, with the owner's usage and the cap, as pure logic.

Slurm names the limit in the reason (``QOSMaxGRESPerUser``, ``AssocGrpCpuLimit`` …); the cap is in the
accounting database (``sacctmgr show qos`` / ``show assoc``, one ``|``-separated line per row, in the fields of
:mod:`.limit_rules`, which checks every limit of a request where this module names the one Slurm gave) and the usage is
what the running jobs of the user (or account, or QOS) hold now (their ``tres-alloc``). Where accounting is off
or ``sacctmgr`` cannot be asked, :func:`judge_limit` still names the limit from Slurm's words, without numbers.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass

from slurmlab.core.diagnosis.findings import Finding, Verdict
from slurmlab.core.slurm.reasons import limit_parts, plain_reason
from slurmlab.core.slurm.tres import Tres
from slurmlab.errors import ParseError

__all__ = ["LimitAsk", "RunningUse", "judge_limit", "limit_ask", "parse_rows", "usage_of"]

# the resource word of a reason -> the TRES key
_TRES_KEY = {
    "GRES": "gres/gpu",
    "Cpu": "cpu",
    "CPU": "cpu",
    "Mem": "mem",
    "Memory": "mem",
    "Node": "node",
    "Billing": "billing",
}


@dataclass(frozen=True)
class LimitAsk:
    """What to look up for one limit reason: ``table`` qos/assoc, the ``field`` of its cap, the TRES ``key``
    (None for a count of jobs), and whose jobs count towards it (``scope``: user/account/qos/job)."""

    reason: str
    table: str
    field: str
    key: str | None
    scope: str


@dataclass(frozen=True)
class RunningUse:
    """One job of the cluster that holds resources now: its owner, account, QOS and what it holds."""

    job_id: str
    user: str
    account: str
    qos: str
    tres: Tres | Mapping[str, float] | None  # a Tres, or its amounts by key (limit_rules.amounts)
    gpus: float | None = (
        None  # counted from its GRES detail, for a TRES that leaves gres/gpu out (no accounting)
    )


def limit_ask(reason: str | None) -> LimitAsk | None:
    """The lookup for a QOS/association limit reason; None for a reason that is no such limit (or one that
    has no cap to read, such as a TRES × minutes budget)."""
    parts = limit_parts(reason)
    if parts is None or parts["time"] or parts["kind"] == "Min":
        return None
    who, kind, res, per = parts["who"], parts["kind"], parts["res"], parts["per"]
    table = "assoc" if who == "Assoc" else "qos"
    scope = {"PerUser": "user", "PerAccount": "account", "PerJob": "job", "PerNode": "job"}.get(
        per, "account" if table == "assoc" else "qos"
    )
    if res in ("Jobs", "SubmitJob", "SubmitJobs"):
        if table == "assoc" and kind == "Max":  # an association's MaxJobs/MaxSubmit: the user's jobs in it
            scope = "user"
        submit = res != "Jobs"
        if table == "assoc":
            field = "GrpJobs" if kind == "Grp" else "MaxSubmit" if submit else "MaxJobs"
        else:
            field = "GrpJobs" if kind == "Grp" else "MaxSubmitPU" if submit else "MaxJobsPU"
        return LimitAsk(str(reason), table, field, None, scope)
    key = _TRES_KEY.get(res)
    if key is None:
        return None
    if kind == "Grp":
        field = "GrpTRES"
    elif per == "PerNode":
        field = "MaxTRESPerNode"
    elif per == "PerUser" and table == "qos":
        field = "MaxTRESPU"
    elif per == "PerAccount" and table == "qos":
        field = "MaxTRESPA"
    else:
        field = "MaxTRES"
    return LimitAsk(str(reason), table, field, key, scope)


def parse_rows(text: str, fields: Sequence[str]) -> list[dict[str, str]]:
    """``sacctmgr -nP`` output as rows of the asked fields; ParseError quoting a line of another width."""
    rows = []
    for line in text.splitlines():
        if not line.strip():
            continue
        cells = line.split("|")
        if len(cells) != len(fields):
            raise ParseError("sacctmgr output", line, hint=f"expected {len(fields)} fields separated by '|'")
        rows.append(dict(zip(fields, (c.strip() for c in cells), strict=True)))
    return rows


def _amount(tres: Tres | Mapping[str, float] | None, key: str) -> float | None:
    if tres is None:
        return None
    if not isinstance(tres, Tres):
        return tres.get(key)
    if key == "gres/gpu":
        gpus = tres.gpus if tres.gpus is not None else sum(g.amount for g in tres.gres if g.name == "gpu")
        return float(gpus) if gpus else None
    value = {"cpu": tres.cpus, "mem": tres.mem_mb, "node": tres.nodes, "billing": tres.billing}.get(key)
    return None if value is None else float(value)


def _cap(row: Mapping[str, str], ask: LimitAsk) -> float | None:
    raw = row.get(ask.field, "")
    if not raw:
        return None
    if ask.key is None:
        return float(raw) if raw.isdigit() else None
    try:
        return _amount(Tres.parse(raw), ask.key)
    except ParseError:
        return None


def usage_of(ask: LimitAsk, running: Sequence[RunningUse], *, user: str, account: str, qos: str) -> float:
    """What the running jobs that count towards the limit hold now (jobs, or the TRES of ``ask.key``)."""

    def counts(j: RunningUse) -> bool:
        if ask.scope == "user":
            return j.user == user and (j.account == account if ask.table == "assoc" else j.qos == qos)
        if ask.scope == "account":
            return j.account == account and (ask.table == "assoc" or j.qos == qos)
        return j.qos == qos if ask.scope == "qos" else False

    mine = [j for j in running if counts(j)]
    if ask.key is None:
        return float(len(mine))
    return float(sum(_amount(j.tres, ask.key) or (j.gpus if ask.key == "gres/gpu" else 0) or 0 for j in mine))


def _unit(key: str | None, value: float) -> str:
    n = f"{value:g}"
    return {
        None: f"{n} job(s)",
        "gres/gpu": f"{n} GPU(s)",
        "cpu": f"{n} CPU(s)",
        "mem": f"{n} MiB",
        "node": f"{n} node(s)",
    }.get(key, f"{n} {key}")


def judge_limit(
    ask: LimitAsk,
    rows: Sequence[Mapping[str, str]] | None,
    used: float | None,
    wants: float | None,
    *,
    subject: str,
    name: str,
    why_no_numbers: str = "",
    lifts: Sequence[str] = (),
    also: Sequence[str] = (),
) -> Finding:
    """The ``job.limit`` finding: the limit named, the usage and the cap where they are known, and which
    change lifts it (``lifts``, in words: :func:`slurmlab.core.diagnosis.limit_changes.lifts`); ``also``: the
    other limits that would hold it too."""
    named = " ".join(
        w for w in ("QOS" if ask.table == "qos" else "association", name, "limit", ask.field) if w
    )
    caps = [c for c in (_cap(r, ask) for r in rows or ()) if c is not None]
    lifted = "; or ".join(lifts)
    if not caps:
        said = why_no_numbers or "the accounting database shows no such cap"
        return Finding(
            "job.limit",
            "which limit holds it",
            Verdict.WARN,
            f"{plain_reason(ask.reason)} — {named}; usage and cap unknown ({said})",
            (
                f"lifts it: {lifted}"
                if lifted
                else "`sacctmgr show qos` and `sacctmgr show assoc user=$USER` show the limits"
            ),
            subject,
            tuple(f"also held by {a}" for a in also),
        )
    cap = min(caps)
    details: tuple[str, ...] = (
        f"the {ask.scope}'s running jobs hold {_unit(ask.key, used or 0)} of {_unit(ask.key, cap)}",
    )
    if wants is not None:
        details += (f"this job asks for {_unit(ask.key, wants)}",)
    details += tuple(f"also held by {a}" for a in also)
    if wants is not None and wants > cap:
        fix = (
            f"it can never start: it alone asks for more than the cap ({_unit(ask.key, wants)} > "
            f"{_unit(ask.key, cap)}): cancel it and ask for less"
            + (f"; lifts it: {lifted}" if lifted else "")
        )
    elif lifted:
        fix = f"lifts it: {lifted}"
    else:
        fix = "it starts once enough of those jobs end; cancel one of yours, or ask for less"
    return Finding(
        "job.limit",
        "which limit holds it",
        Verdict.WARN,
        f"{named}: {_unit(ask.key, used or 0)} in use of {_unit(ask.key, cap)} allowed",
        fix,
        subject,
        details,
    )
