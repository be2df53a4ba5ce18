"""Would a request wait for a QOS, association or partition limit? Slurm's limit rules as arithmetic (pure).

``sbatch --test-only`` answers from the nodes alone: it applies no QOS or association limit (per user, per
account, per job, wall time) and, unless ``EnforcePartLimits`` is set, not the partition's MaxTime either. A
change it says "would start at once" may therefore wait, once submitted, for the very limit that holds the job
now. :func:`holds` checks a request against every such limit the way Slurm counts it:

- the job's QOS (``sacctmgr show qos``): GrpTRES/GrpJobs/GrpSubmit over every job of the QOS, MaxTRESPU/
  MaxJobsPU/MaxSubmitPU over the user's jobs in it, MaxTRESPA/MaxJobsPA/MaxSubmitPA over the account's,
  MaxTRES and MaxTRESPerNode per job, MinTRES, MaxWall;
- the user's association and every account above it (``sacctmgr show assoc``): GrpTRES/GrpJobs/GrpSubmit of
  each over its own jobs (an account's: its sub-accounts' too); MaxTRES, MaxTRESPerNode, MaxJobs, MaxSubmit and
  MaxWall from the nearest level that sets them, unless the QOS sets the same limit (Slurm's order: the QOS
  first, then the association up the tree);
- the partition's MaxTime (unless the QOS has the ``PartitionTimeLimit`` flag).

The usage is what the running jobs hold (their TRES as Slurm allocated them) and, for the submit limits, how
many jobs are queued; who owns a job, its account and QOS are Slurm's (``squeue``), never a job's own text.
A job whose holdings cannot be read makes a limit it counts towards unknown, and an unknown limit holds:
nothing is offered that might wait.
"""

from __future__ import annotations

import math
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from datetime import datetime, timedelta

from slurmlab.core.slurm.models import Job, Partition
from slurmlab.core.slurm.timefmt import parse_duration
from slurmlab.core.slurm.tres import Tres
from slurmlab.errors import ParseError

__all__ = [
    "ASSOC_LIMIT_FIELDS",
    "QOS_LIMIT_FIELDS",
    "QUEUE_ARGV",
    "Ask",
    "Hold",
    "JobUse",
    "LimitTables",
    "amounts",
    "holding",
    "holds",
    "most_gpus",
    "parse_queue",
    "start_bound",
    "unit",
]

QOS_LIMIT_FIELDS = (
    "Name",
    "Flags",
    "GrpTRES",
    "GrpJobs",
    "GrpSubmit",
    "MaxTRES",
    "MaxTRESPerNode",
    "MinTRES",
    "MaxTRESPU",
    "MaxJobsPU",
    "MaxSubmitPU",
    "MaxTRESPA",
    "MaxJobsPA",
    "MaxSubmitPA",
    "MaxWall",
)
ASSOC_LIMIT_FIELDS = (
    "Cluster",
    "Account",
    "User",
    "Partition",
    "ParentName",
    "QOS",
    "DefaultQOS",
    "GrpTRES",
    "GrpJobs",
    "GrpSubmit",
    "MaxTRES",
    "MaxTRESPerNode",
    "MaxJobs",
    "MaxSubmit",
    "MaxWall",
)
# an association's per-job (Max*) limit and the QOS limit that overrides it when the QOS sets one
_ASSOC_MAX_OVERRIDDEN_BY = {
    "MaxTRES": "MaxTRES",
    "MaxTRESPerNode": "MaxTRESPerNode",
    "MaxJobs": "MaxJobsPU",
    "MaxSubmit": "MaxSubmitPU",
    "MaxWall": "MaxWall",
}
# the queue as the limits count it: job id (an array task's own), state, owner, account, QOS, all from Slurm
QUEUE_ARGV = ("squeue", "-h", "-r", "-t", "PD,R,CG,S", "-o", "%A|%t|%u|%a|%q")
_RUNNING = frozenset({"R", "CG", "RUNNING", "COMPLETING"})
_QUEUED = _RUNNING | {"PD", "S", "PENDING", "SUSPENDED"}


@dataclass(frozen=True)
class JobUse:
    """One job of the queue as the limits count it: owner, account, QOS and state from ``squeue``; ``tres``
    what it holds while it runs (None: its record could not be read); ``ends`` its expected end."""

    job_id: str
    state: str
    user: str
    account: str
    qos: str
    tres: Mapping[str, float] | None = None
    ends: datetime | None = None

    @property
    def running(self) -> bool:
        return self.state in _RUNNING


@dataclass(frozen=True)
class Ask:
    """One request as the limits see it: who asks (user, account, QOS), where (partitions), how much per job
    (``tres``: cpu, mem in MiB, node, gres/gpu, gres/gpu:TYPE ...), on how many nodes, for how long."""

    user: str
    account: str
    qos: str
    partitions: tuple[str, ...]
    tres: Mapping[str, float]
    nodes: int = 1
    minutes: int | None = None


@dataclass(frozen=True)
class Hold:
    """One limit that would hold a request: ``limit`` names it (``QOS normal MaxTRESPU``), ``key`` the TRES
    (None for a count of jobs, "time" for a wall-time limit), the usage that counts, what the request adds and
    the cap. ``mine``: the asking user's own running jobs among those that count (ending one lifts it)."""

    limit: str
    scope: str
    key: str | None
    used: float
    asked: float
    cap: float
    mine: tuple[JobUse, ...] = field(default=(), compare=False)
    unknown: str = ""  # why the usage could not be counted (the limit then holds: nothing is offered blind)
    # False for a per-job cap (size, time): waiting never lifts it; else the first moment it may lift, the
    # earliest end among the running jobs that count (None when one of them has no end)
    by_time: bool = True
    lifts_at: datetime | None = None

    @property
    def room(self) -> float:
        """How much a request may still ask before this limit holds it."""
        return self.cap - self.used

    def text(self) -> str:
        if self.unknown:
            return f"{self.limit} ({self.scope}): usage unknown ({self.unknown})"
        if self.key == "time":
            return f"{self.limit}: asks {self.asked:g} min, {self.cap:g} min allowed"
        if self.scope == "per job" or self.scope == "per node":
            return f"{self.limit} ({self.scope}): asks {unit(self.key, self.asked)}, {unit(self.key, self.cap)} allowed"
        if self.scope == "at least":
            return (
                f"{self.limit}: asks {unit(self.key, self.asked)}, at least {unit(self.key, self.cap)} needed"
            )
        return (
            f"{self.limit} ({self.scope}): {unit(self.key, self.used)} in use + {unit(self.key, self.asked)} "
            f"asked > {unit(self.key, self.cap)} allowed"
        )


def unit(key: str | None, value: float) -> str:
    n = f"{value:g}"
    if key is None:
        return f"{n} job(s)"
    if key.startswith("gres/gpu"):
        return f"{n} {key.partition(':')[2] + ' ' if ':' in key else ''}GPU(s)"
    return {"cpu": f"{n} CPU(s)", "mem": f"{n} MiB", "node": f"{n} node(s)"}.get(key, f"{n} {key}")


def amounts(tres: Tres | None) -> dict[str, float]:
    """A TRES as numbers by key: cpu, mem (MiB), node, billing, gres/NAME and gres/NAME:TYPE, and the others
    that are plain numbers (license/…). The untyped gres/gpu counts every GPU (typed entries repeat it)."""
    if tres is None:
        return {}
    out: dict[str, float] = {}
    for key, value in (
        ("cpu", tres.cpus),
        ("mem", tres.mem_mb),
        ("node", tres.nodes),
        ("billing", tres.billing),
    ):
        if value is not None:
            out[key] = float(value)
    for g in tres.gres:
        out[f"gres/{g.name}" + (f":{g.type}" if g.type else "")] = float(g.amount)
    for name in {g.name for g in tres.gres}:  # only typed entries: their sum is the untyped count
        out.setdefault(f"gres/{name}", float(sum(g.amount for g in tres.gres if g.name == name)))
    for key, text in tres.other:
        if text.isascii() and text.isdigit():
            out[key] = float(text)
    return out


def holding(job: Job | None) -> dict[str, float] | None:
    """What a running job holds, by TRES key (its allocated TRES; its GPUs from the GRES detail where the
    TRES leaves them out: a cluster that does not account gres/gpu). None: nothing could be read."""
    if job is None or (job.tres_alloc is None and not job.gpu_allocs):
        return None
    out = amounts(job.tres_alloc)
    gpus = [g for a in job.gpu_allocs for g in a.items if g.name == "gpu"]
    if "gres/gpu" not in out and gpus:
        out["gres/gpu"] = float(sum(g.amount for g in gpus))
        for t in {g.type for g in gpus if g.type}:
            out[f"gres/gpu:{t}"] = float(sum(g.amount for g in gpus if g.type == t))
    return out


def parse_queue(text: str, records: Sequence[Job]) -> list[JobUse]:
    """The lines of :data:`QUEUE_ARGV` with what each running job holds (from its record; None where there is
    none). A line of another shape is a ParseError: a job left uncounted could hide a limit."""
    by_id = {str(j.job_id): j for j in records}
    out = []
    for line in text.splitlines():
        if not line.strip():
            continue
        cells = [c.strip() for c in line.split("|")]
        if len(cells) != 5 or not (cells[0].isascii() and cells[0].isdigit()):
            raise ParseError(
                "squeue (the queue the limits count)",
                line[:200],
                hint="expected JOBID|STATE|USER|ACCOUNT|QOS",
            )
        jid, state, user, account, qos = cells
        record = by_id.get(jid)
        out.append(
            JobUse(
                jid,
                state,
                user,
                account,
                qos,
                holding(record),
                record.end_time if record is not None else None,
            )
        )
    return out


def _caps(raw: str) -> dict[str, float] | None:
    """A TRES limit cell as numbers; {} for none; None for a cell that cannot be read (the limit is unknown)."""
    if not raw.strip():
        return {}
    try:
        return amounts(Tres.parse(raw))
    except ParseError:
        return None


def _count(raw: str) -> float | None:
    # str.strip() takes away separators float() refuses (\x1c-\x1f), and isdigit() admits digits float() refuses
    # ('²'): only the stripped ASCII digits are a count
    value = raw.strip()
    return float(value) if value.isascii() and value.isdigit() else None


@dataclass(frozen=True)
class LimitTables:
    """The accounting database's limits: every QOS row and the associations (the user's rows and the account
    rows above them, user empty), each a mapping of the ``*_LIMIT_FIELDS`` (``sacctmgr -nP``)."""

    qos: Sequence[Mapping[str, str]] = ()
    assocs: Sequence[Mapping[str, str]] = ()

    def qos_row(self, name: str) -> Mapping[str, str] | None:
        return next((r for r in self.qos if r.get("Name") == name), None)

    def user_row(self, user: str, account: str, partitions: Sequence[str] = ()) -> Mapping[str, str] | None:
        rows = [r for r in self.assocs if r.get("User") == user and r.get("Account") == account]
        return next(
            (r for r in rows if r.get("Partition") and r.get("Partition") in partitions), None
        ) or next((r for r in rows if not r.get("Partition")), None)

    def account_chain(self, account: str) -> list[Mapping[str, str]]:
        """The account's row and every row above it, nearest first (a loop in the tree stops the walk)."""
        by_name = {r.get("Account", ""): r for r in self.assocs if not r.get("User")}
        out: list[Mapping[str, str]] = []
        name = account
        while name in by_name and by_name[name] not in out:
            out.append(by_name[name])
            name = by_name[name].get("ParentName", "")
        return out

    def subtree(self, account: str) -> set[str]:
        """The account and every account below it."""
        children: dict[str, list[str]] = {}
        for r in self.assocs:
            if not r.get("User"):
                children.setdefault(r.get("ParentName", ""), []).append(r.get("Account", ""))
        found, todo = {account}, [account]
        while todo:
            for child in children.get(todo.pop(), ()):
                if child not in found:
                    found.add(child)
                    todo.append(child)
        return found

    def allowed_qos(self, user: str, account: str, partitions: Sequence[str] = ()) -> list[str]:
        row = self.user_row(user, account, partitions)
        return [q for q in (row.get("QOS", "") if row else "").split(",") if q]

    def accounts_of(self, user: str) -> list[str]:
        return list(dict.fromkeys(r.get("Account", "") for r in self.assocs if r.get("User") == user))


def _usage(jobs: Iterable[JobUse], keys: Iterable[str]) -> tuple[dict[str, float], str]:
    """What the jobs hold of each key, and why it is unknown ("" when every record could be read)."""
    keys = list(keys)
    total = dict.fromkeys(keys, 0.0)
    unread = [j.job_id for j in jobs if j.tres is None]
    for j in jobs:
        for k in keys:
            total[k] += (j.tres or {}).get(k, 0.0)
    return total, (f"the record of job {unread[0]} could not be read" if unread else "")


def _tres_holds(
    limit: str,
    scope: str,
    caps: Mapping[str, float],
    ask: Ask,
    counted: Sequence[JobUse],
    mine: Sequence[JobUse],
) -> list[Hold]:
    running = [j for j in counted if j.running]
    used, unknown = _usage(running, caps)
    out = []
    for key, cap in caps.items():
        asked = ask.tres.get(key, 0.0)
        if asked and (unknown or used[key] + asked > cap):
            out.append(
                Hold(
                    limit,
                    scope,
                    key,
                    used[key],
                    asked,
                    cap,
                    tuple(j for j in mine if j.running and (j.tres or {}).get(key)),
                    unknown,
                    lifts_at=_first_end(running),
                )
            )
    return out


def _first_end(jobs: Sequence[JobUse]) -> datetime | None:
    """The earliest end among ``jobs``; None when one has none (or none runs: nothing to wait for)."""
    ends = [j.ends for j in jobs]
    return min(e for e in ends if e is not None) if ends and all(e is not None for e in ends) else None


def _count_holds(
    limit: str,
    scope: str,
    cap: float | None,
    counted: Sequence[JobUse],
    mine: Sequence[JobUse],
    *,
    submit: bool,
) -> list[Hold]:
    if cap is None:
        return []
    jobs = [j for j in counted if (j.state in _QUEUED if submit else j.running)]
    if len(jobs) + 1 <= cap:
        return []
    return [
        Hold(
            limit,
            scope + (", queued and running" if submit else ""),
            None,
            float(len(jobs)),
            1.0,
            cap,
            tuple(j for j in mine if j.running),
            lifts_at=_first_end(jobs),
        )
    ]


def _per_job(limit: str, caps: Mapping[str, float], ask: Ask, per_node: bool) -> list[Hold]:
    out = []
    for key, cap in caps.items():
        asked = ask.tres.get(key, 0.0) / (max(1, ask.nodes) if per_node and key != "node" else 1)
        if asked > cap:
            out.append(
                Hold(limit, "per node" if per_node else "per job", key, 0.0, asked, cap, by_time=False)
            )
    return out


def _wall(limit: str, raw: str, ask: Ask) -> list[Hold]:
    try:
        cap = parse_duration(raw) if raw.strip() else None
    except ParseError:
        return [
            Hold(
                limit,
                "per job",
                "time",
                0.0,
                float(ask.minutes or 0),
                0.0,
                unknown=f"MaxWall {raw[:40]!r}",
                by_time=False,
            )
        ]
    if cap is None or ask.minutes is None or ask.minutes * 60 <= cap:
        return []
    return [Hold(limit, "per job", "time", 0.0, float(ask.minutes), cap / 60, by_time=False)]


def _unreadable(limit: str, cell: str) -> Hold:
    return Hold(
        limit, "cap", None, 0.0, 0.0, 0.0, unknown=f"its value {cell[:40]!r} could not be read", by_time=False
    )


def _qos_holds(row: Mapping[str, str], ask: Ask, jobs: Sequence[JobUse]) -> list[Hold]:
    name = f"QOS {row.get('Name', '')}"
    in_qos = [j for j in jobs if j.qos == ask.qos]
    mine = [j for j in in_qos if j.user == ask.user]
    theirs = [j for j in in_qos if j.account == ask.account]
    out: list[Hold] = []
    for fld, scope, counted in (
        ("GrpTRES", "whole QOS", in_qos),
        ("MaxTRESPU", "per user", mine),
        ("MaxTRESPA", "per account", theirs),
    ):
        caps = _caps(row.get(fld, ""))
        out += (
            _tres_holds(f"{name} {fld}", scope, caps, ask, counted, mine)
            if caps is not None
            else [_unreadable(f"{name} {fld}", row.get(fld, ""))]
        )
    for fld, scope, counted, submit in (
        ("GrpJobs", "whole QOS", in_qos, False),
        ("GrpSubmit", "whole QOS", in_qos, True),
        ("MaxJobsPU", "per user", mine, False),
        ("MaxSubmitPU", "per user", mine, True),
        ("MaxJobsPA", "per account", theirs, False),
        ("MaxSubmitPA", "per account", theirs, True),
    ):
        out += _count_holds(f"{name} {fld}", scope, _count(row.get(fld, "")), counted, mine, submit=submit)
    for fld, per_node in (("MaxTRES", False), ("MaxTRESPerNode", True)):
        caps = _caps(row.get(fld, ""))
        out += (
            _per_job(f"{name} {fld}", caps, ask, per_node)
            if caps is not None
            else [_unreadable(f"{name} {fld}", row.get(fld, ""))]
        )
    least = _caps(row.get("MinTRES", "")) or {}
    out += [
        Hold(f"{name} MinTRES", "at least", k, 0.0, ask.tres.get(k, 0.0), cap, by_time=False)
        for k, cap in least.items()
        if ask.tres.get(k, 0.0) < cap
    ]
    return out + _wall(f"{name} MaxWall", row.get("MaxWall", ""), ask)


def _assoc_holds(
    tables: LimitTables, ask: Ask, jobs: Sequence[JobUse], qos: Mapping[str, str] | None
) -> list[Hold]:
    user_row = tables.user_row(ask.user, ask.account, ask.partitions)
    chain = ([user_row] if user_row is not None else []) + tables.account_chain(ask.account)
    mine = [j for j in jobs if j.user == ask.user and j.account == ask.account]
    out: list[Hold] = []
    for row in chain:
        own = bool(row.get("User"))
        name = (
            f"association {row.get('Account', '')}/{row.get('User', '')}"
            if own
            else f"account {row.get('Account', '')}"
        )
        counted = mine if own else [j for j in jobs if j.account in tables.subtree(row.get("Account", ""))]
        scope = "your association" if own else "whole account"
        caps = _caps(row.get("GrpTRES", ""))
        out += (
            _tres_holds(f"{name} GrpTRES", scope, caps, ask, counted, mine)
            if caps is not None
            else [_unreadable(f"{name} GrpTRES", row.get("GrpTRES", ""))]
        )
        out += _count_holds(
            f"{name} GrpJobs", scope, _count(row.get("GrpJobs", "")), counted, mine, submit=False
        )
        out += _count_holds(
            f"{name} GrpSubmit", scope, _count(row.get("GrpSubmit", "")), counted, mine, submit=True
        )
    for fld, qos_field in _ASSOC_MAX_OVERRIDDEN_BY.items():
        nearest = next((r for r in chain if r.get(fld, "").strip()), None)
        if nearest is None or (qos is not None and qos.get(qos_field, "").strip()):
            continue
        name = f"association {nearest.get('Account', '')}{'/' + nearest['User'] if nearest.get('User') else ''} {fld}"
        if fld == "MaxWall":
            out += _wall(name, nearest[fld], ask)
        elif fld in ("MaxJobs", "MaxSubmit"):
            out += _count_holds(name, "per user", _count(nearest[fld]), mine, mine, submit=fld == "MaxSubmit")
        else:
            caps = _caps(nearest[fld])
            out += (
                _per_job(name, caps, ask, fld == "MaxTRESPerNode")
                if caps is not None
                else [_unreadable(name, nearest[fld])]
            )
    return out


def _partition_holds(ask: Ask, partitions: Sequence[Partition], qos: Mapping[str, str] | None) -> list[Hold]:
    if ask.minutes is None or (qos is not None and "PartitionTimeLimit" in qos.get("Flags", "")):
        return []
    mine = [p for p in partitions if p.name in ask.partitions]
    # a job queued in several partitions starts in any one whose limit it fits
    over = [p for p in mine if p.max_time is not None and ask.minutes * 60 > p.max_time]
    if not mine or len(over) < len(mine):
        return []
    p = over[0]
    return [
        Hold(
            f"partition {p.name} MaxTime",
            "per job",
            "time",
            0.0,
            float(ask.minutes),
            math.floor((p.max_time or 0) / 60),
            by_time=False,
        )
    ]


def holds(
    ask: Ask,
    tables: LimitTables | None,
    jobs: Sequence[JobUse],
    partitions: Sequence[Partition] = (),
    *,
    submitted: bool = False,
) -> list[Hold]:
    """Every limit that would hold ``ask`` now, given the queue ``jobs`` (the asking job itself left out of the
    running ones, kept among the queued: a switch submits the new request before it cancels the old).
    ``submitted``: ``ask`` is a job already queued (the submit limits no longer concern it).
    ``tables`` None: accounting is off, only the partition's limits apply."""
    qos = tables.qos_row(ask.qos) if tables is not None else None
    out: list[Hold] = []
    if tables is not None:
        if qos is not None:
            out += _qos_holds(qos, ask, jobs)
        out += _assoc_holds(tables, ask, jobs, qos)
    out += _partition_holds(ask, partitions, qos)
    return [h for h in out if not (submitted and h.scope.endswith("queued and running"))]


def most_gpus(
    tables: LimitTables,
    user: str,
    account: str,
    qos: str,
    partitions: Sequence[str] = (),
    most: int = 1 << 16,
) -> tuple[int | None, list[Hold]]:
    """The most GPUs ``user`` may hold at once in one job, with no other job of theirs running, under the QOS
    and association limits (None: none of them caps GPUs below ``most``), and the limits one GPU more meets.
    Slurm counts a job's GPUs against every such cap at once, so the answer is the tightest of them; the holds
    only grow with the GPUs asked, which makes the search a bisection."""

    def capped(gpus: int) -> list[Hold]:
        ask = Ask(user, account, qos, tuple(partitions), {"gres/gpu": float(gpus)})
        return [h for h in holds(ask, tables, ()) if h.key is not None and h.key.startswith("gres/gpu")]

    if not capped(most):
        return None, []
    fits, over = 0, most
    while over - fits > 1:
        mid = (fits + over) // 2
        fits, over = (fits, mid) if capped(mid) else (mid, over)
    return fits, capped(fits + 1)


def start_bound(
    expected: datetime | None,
    own: Sequence[Hold],
    now: datetime,
    *,
    free_at: datetime | None = None,
    at_once: float = 60.0,
) -> tuple[datetime | None, str]:
    """The moment a change must start before to start sooner than the job as it is, and how that was found.

    A limit waiting never lifts (a per-job cap): None, any start is sooner. Limits that lift as jobs end: not
    before the last of them may lift (each one's first end), nor before Slurm's expected start. Slurm's
    expected start alone otherwise; or, for a job that waits for resources, ``free_at``: the first end of the
    running jobs that hold what it needs (it cannot start before one of them ends). Ends are the jobs' time
    limits, as Slurm's own expected start reads them. Nothing known: only a change that starts at once (within
    ``at_once`` seconds of ``now``) is surely sooner than a job that waits now."""
    if any(not h.by_time for h in own):
        return None, "as it is the job never starts, whatever ends"
    known = [t for t in (expected, *(h.lifts_at for h in own)) if t is not None]
    if known and (not own or all(h.lifts_at is not None for h in own)):
        bound = max(known)
        said = "before the job's own expected start" if bound == expected else "before its limit can lift"
        return bound, said
    if not own and free_at is not None:
        return free_at, "before the first job that holds what it needs can end (its time limit)"
    return now + timedelta(seconds=at_once), (
        "Slurm has no expected start for the job: only a change that starts at once is surely sooner"
    )
