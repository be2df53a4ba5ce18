"""What change would let a pending job start sooner, asked of Slurm: each variant of the job's own request
(:func:`slurmlab.core.diagnosis.alternatives.variants`) through ``sbatch --test-only … --wrap=true``, which
submits nothing and answers when and where it would start.

``--test-only`` applies no QOS or association limit (nor, by default, the partition's MaxTime): a change it
says would start at once may, once submitted, wait for the very limit that holds the job. So every variant is
first checked against those limits with slurmlab's own arithmetic (:mod:`slurmlab.core.diagnosis.limit_rules`);
one they would hold is kept with the limit named and never offered, and costs no ``--test-only`` call. Where a
limit holds the job itself, the changes that may lift it (as many GPUs as fit under the cap, another QOS or
account the user's association allows) are tried too.

Each ``sbatch --test-only`` takes a job number (Slurm 22.05 allocates one to answer, so the next real job's
id jumps by one per question): no other client command tells when a request not yet submitted would start, so
the questions are cut instead: none before Slurm's scheduler has looked at the job (no reason, no expected
start: nothing to compare with yet), none for a change a limit would hold, at most
:data:`~slurmlab.core.diagnosis.alternatives.MAX_VARIANTS`, and none after a change that starts at once (no
later one can start sooner; the smallest changes are asked first).

API::

    ask_test_only(options, runner=None, timeout=10.0) -> StartEstimate      one request
    LimitContext(job, runner, records=None)       what the limits need, each asked once per why()/doctor call
    limit_finding(job, limit_ask, limits) -> Finding      the limit Slurm names, usage, cap, what lifts it
    pending_alternatives(job, runner=None, *, nodes=None, partitions=None, limits=None) -> (sooner, rest)
    pending_checks(job, runner, *, nodes, partitions, now, ...) -> PendingChecks
        the limit, the blockers and the alternatives of a pending job: what alloc.why() and the doctor both say

Each call has its own timeout; a refusal keeps Slurm's words, an answer that cannot be read is recorded as
such (one bad answer never takes the others down).
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from datetime import datetime, timedelta, timezone

from slurmlab.core.diagnosis.alternatives import (
    MAX_VARIANTS,
    Alternative,
    StartEstimate,
    Variant,
    parse_test_only,
    rank,
    variants,
)
from slurmlab.core.diagnosis.findings import Finding, Verdict, guarded
from slurmlab.core.diagnosis.job_checks import (
    blockers,
    judge_alternatives,
    judge_blockers,
    judge_unlooked,
    looked_at,
    usable_nodes,
    waits_for,
)
from slurmlab.core.diagnosis.limit_changes import ask_of, lifting_variants, lifts, pinned
from slurmlab.core.diagnosis.limit_rules import (
    QUEUE_ARGV,
    Ask,
    Hold,
    JobUse,
    LimitTables,
    holds,
    parse_queue,
    start_bound,
)
from slurmlab.core.diagnosis.pending_limits import LimitAsk, RunningUse, judge_limit, limit_ask, usage_of
from slurmlab.core.slurm.models import Job, Node, Partition
from slurmlab.core.slurm.reasons import limit_parts
from slurmlab.errors import ControllerDownError, MungeError, ParseError, SlurmError, SlurmlabError
from slurmlab.slurm.accounting_queries import limit_tables, qos_limits
from slurmlab.slurm.failures import classify_failure
from slurmlab.slurm.job_queries import list_jobs
from slurmlab.slurm.node_queries import list_nodes, list_partitions
from slurmlab.slurm.runner import Runner, get_runner

__all__ = [
    "TEST_ONLY_TIMEOUT",
    "KnownLimits",
    "LimitContext",
    "PendingChecks",
    "ask_test_only",
    "limit_finding",
    "pending_alternatives",
    "pending_checks",
]

TEST_ONLY_TIMEOUT = 10.0
_NO_VALUE = ("", "(null)", "N/A")
_AT_ONCE = timedelta(seconds=60)  # a start this close to now is "at once": nothing starts surely sooner


def ask_test_only(
    options: Sequence[str], runner: Runner | None = None, timeout: float = TEST_ONLY_TIMEOUT
) -> StartEstimate:
    """``sbatch --test-only OPTIONS --wrap=true``: when Slurm would start that request, or its refusal.

    Raises ControllerDownError / MungeError when Slurm cannot be asked at all (the same for every variant),
    ParseError when the answer says neither a start nor a refusal."""
    runner = runner or get_runner()
    argv = ["sbatch", "--test-only", "-o", "/dev/null", *options, "--wrap=true"]
    result = runner.run(argv, check=False, timeout=min(runner.timeout, timeout))
    said = result.stdout + "\n" + result.stderr
    if result.returncode != 0:
        failure = classify_failure(argv, result.returncode, result.stderr or result.stdout)
        if isinstance(failure, (ControllerDownError, MungeError)):
            raise failure
    return parse_test_only(said, result.returncode)


@dataclass(frozen=True)
class KnownLimits:
    """What slurmlab knows of the limits for one job: ``state`` "on" (``tables`` read), "off" (no accounting:
    only the partitions' limits hold) or "unknown" (``why_unknown`` says why); the queue; who the job is."""

    state: str
    tables: LimitTables | None
    jobs: tuple[JobUse, ...]
    user: str
    account: str
    qos: str
    partitions: tuple[Partition, ...] = ()
    why_unknown: str = ""

    def ask(self, job: Job, variant: Variant | None = None) -> Ask:
        return ask_of(job, variant, user=self.user, account=self.account, qos=self.qos)

    def holds(self, job: Job, variant: Variant | None = None) -> list[Hold]:
        """The limits that hold the job itself (``variant`` None), or would hold that change once submitted."""
        return holds(
            self.ask(job, variant), self.tables, self.jobs, self.partitions, submitted=variant is None
        )


class LimitContext:
    """What the limits need for one job, each asked at most once per ``why()`` or doctor call: the accounting
    database's limits (at most three ``sacctmgr`` calls to slurmdbd; one where accounting is off, and then
    nothing else), the queue (one ``squeue``) and the records of the running jobs (the blockers' listing,
    passed in where the caller has it)."""

    def __init__(
        self,
        job: Job,
        runner: Runner,
        records: Sequence[Job] | None = None,
        partitions: Sequence[Partition] | None = None,
    ) -> None:
        self.job, self.runner = job, runner
        self._records = list(records) if records else None
        self._partitions = partitions
        self._known: KnownLimits | None = None
        self.compared: str = ""  # what the alternatives' starts were compared with, once they were

    def records(self) -> list[Job]:
        """Every active job's record: the caller's (the blockers' listing), else asked once here."""
        if self._records is None:
            self._records = list(list_jobs(self.runner, all_users=True))
        return self._records

    def free_at(self, nodes: Sequence[Node], partitions: Sequence[Partition]) -> datetime | None:
        """For a job that waits for resources and has no expected start yet: the first end (time limit) of
        the running jobs that hold GPUs it needs on the nodes it may use; None when unknown."""
        if self.job.expected_start is not None or not (self.job.reason or "").startswith("Resources"):
            return None
        try:
            held = blockers(self.job, self.records(), usable_nodes(self.job, nodes, partitions))
        except SlurmlabError:
            return None
        ends = [o.end_time for o, _ in held]
        return min(e for e in ends if e is not None) if ends and all(e is not None for e in ends) else None

    @property
    def asked(self) -> KnownLimits | None:
        """The limits as read, once :meth:`known` has been asked (None before: nothing is asked here)."""
        return self._known

    def known(self) -> KnownLimits:
        """Never raises for accounting or queue trouble: that makes the limits "unknown", saying why."""
        if self._known is None:
            self._known = self._ask()
        return self._known

    def _ask(self) -> KnownLimits:
        job, runner = self.job, self.runner
        parts = tuple(self._partitions if self._partitions is not None else list_partitions(runner))
        user, account, qos = job.user or "", "", ""
        queue: list[JobUse] = []
        try:
            every_qos = qos_limits(runner)  # first: where accounting is off, nothing else needs asking
            if every_qos is None:
                return KnownLimits("off", None, (), user, "", "", parts)
            queue = parse_queue(
                runner.run(list(QUEUE_ARGV), timeout=min(runner.timeout, 10.0)).stdout, self.records()
            )
            me = next((j for j in queue if j.job_id == str(job.job_id)), None)
            if me is not None:  # owner, account and QOS as Slurm records them (the record's UserId is text)
                user, account, qos = me.user, _value(me.account), _value(me.qos)
            if not user:
                raise ParseError(
                    "squeue (the queue the limits count)",
                    f"job {job.job_id}",
                    hint="its owner could not be read: run `squeue -j JOBID -o %u` to see",
                )
            tables = limit_tables(runner, user, qos=every_qos)
        except (ControllerDownError, MungeError):
            raise
        except SlurmlabError as exc:
            said = exc.message + (f"; {exc.hint}" if exc.hint else "")
            return KnownLimits("unknown", None, tuple(queue), user, account, qos, parts, why_unknown=said)
        return KnownLimits(
            "on" if tables is not None else "off", tables, tuple(queue), user, account, qos, parts
        )


def _value(cell: str) -> str:
    return "" if cell in _NO_VALUE else cell


def limit_finding(job: Job, ask: LimitAsk, limits: LimitContext) -> Finding:
    """The ``job.limit`` finding: the limit Slurm names, the usage that counts and the cap, the other limits
    that hold it too, and which change lifts it (checked by the same arithmetic as every alternative)."""
    subject = f"job {job.display_id}"
    known = limits.known()
    name = known.qos if ask.table == "qos" else f"{known.account}/{known.user}"
    if known.state != "on" or known.tables is None:
        return judge_limit(
            ask,
            None,
            None,
            None,
            subject=subject,
            name=name,
            why_no_numbers=known.why_unknown or "Slurm accounting is off here",
        )
    tables = known.tables
    if ask.table == "qos":
        row = tables.qos_row(known.qos)
        rows = [row] if row is not None else []
    else:
        user_row = tables.user_row(known.user, known.account, known.ask(job).partitions)
        rows = ([user_row] if user_row is not None else []) + tables.account_chain(known.account)
    running = [RunningUse(j.job_id, j.user, j.account, j.qos, j.tres) for j in known.jobs if j.running]
    used = usage_of(ask, running, user=known.user, account=known.account, qos=known.qos)
    wants = known.ask(job).tres.get(ask.key) if ask.key is not None else None
    found = known.holds(job)
    named = f" {ask.field}"
    also = [h.text() for h in found if not h.limit.endswith(named)]
    others = [
        pinned(v, account=known.account, qos=known.qos)
        for v in lifting_variants(job, known.ask(job), tables, known.jobs, known.partitions)
        if v.kind in ("qos", "account")
    ]
    lifted = lifts(found, [(v, [h.text() for h in known.holds(job, v)]) for v in others])
    return judge_limit(ask, rows, used, wants, subject=subject, name=name, lifts=lifted, also=also)


def _is_limit(reason: str | None) -> bool:
    return limit_parts(reason) is not None


def _blind(job: Job, known: KnownLimits, own: Sequence[Hold]) -> str:
    """Why no change can be checked against the limit Slurm says holds the job ("" when each can): the limits
    could not be read, or Slurm names one slurmlab's arithmetic does not reproduce (a TRES-minutes budget, or
    one its numbers say no longer holds): a change could then wait for it as the job does."""
    if not _is_limit(job.reason):
        return ""
    if known.state == "unknown":
        return f"the limits could not be read, and `--test-only` does not apply them ({known.why_unknown})"
    ask = limit_ask(job.reason)
    table = ("QOS ",) if ask is not None and ask.table == "qos" else ("association ", "account ")
    if ask is None or not any(h.limit.startswith(table) and h.limit.endswith(f" {ask.field}") for h in own):
        return (
            f"Slurm holds the job for {job.reason}, a limit slurmlab cannot check from the numbers it read, "
            "so a change might wait for it too"
        )
    return ""


def _candidates(
    job: Job, known: KnownLimits, nodes: Sequence[Node], partitions: Sequence[Partition]
) -> list[Variant]:
    found = variants(job, nodes, partitions)
    if known.state == "on":
        if known.holds(job):  # a limit holds the job itself: try what may lift it, first
            found = lifting_variants(job, known.ask(job), known.tables, known.jobs, partitions) + found
        found = [pinned(v, account=known.account, qos=known.qos) for v in found]
    unique: dict[tuple[str, ...], Variant] = {}
    for v in found:
        unique.setdefault(v.options, v)
    return list(unique.values())


def pending_alternatives(
    job: Job,
    runner: Runner | None = None,
    *,
    nodes: Sequence[Node] | None = None,
    partitions: Sequence[Partition] | None = None,
    limits: LimitContext | None = None,
) -> tuple[list[Alternative], list[Alternative]]:
    """(the changes that start sooner than the job's expected start, best first; the others: later, refused,
    or held by a limit).

    ``nodes``/``partitions``: the cluster's, when the caller has them already; ``limits``: the call's
    :class:`LimitContext` (one is made here otherwise). Where the limits cannot be read and one of them holds
    the job, nothing is offered: ``--test-only`` would not see it either. "Sooner" is before the job's own
    start as far as it is known (:func:`~slurmlab.core.diagnosis.limit_rules.start_bound`): Slurm's expected
    start, the moment its limit may lift, or — neither known — at once."""
    runner = runner or get_runner()
    nodes = list(nodes) if nodes is not None else list(list_nodes(runner))
    partitions = list(partitions) if partitions is not None else list(list_partitions(runner))
    context = limits or LimitContext(job, runner, partitions=partitions)
    known = context.known()
    own = known.holds(job)
    bound, context.compared = start_bound(
        job.expected_start,
        own,
        datetime.now(timezone.utc),
        free_at=None if own else context.free_at(nodes, partitions),
    )
    blind = _blind(job, known, own)
    found = []
    asked = 0
    now = datetime.now(timezone.utc)
    done = False  # each --test-only takes a job number: none is asked once no answer can be sooner
    for v in _candidates(job, known, nodes, partitions):
        held = (blind,) if blind else tuple(f"it would wait for {h.text()}" for h in known.holds(job, v))
        if held:
            found.append(Alternative(v, StartEstimate(), held))
            continue
        if asked >= MAX_VARIANTS or done:
            continue
        asked += 1
        try:
            answer = ask_test_only(v.options, runner)
        except ParseError as exc:
            answer = StartEstimate(refused=exc.message, unreadable=True)
        except (ControllerDownError, MungeError):
            raise
        except SlurmError as exc:
            answer = StartEstimate(refused=exc.message)
        found.append(Alternative(v, answer))
        done = _at_once(answer.starts, now)
    return rank(found, bound)


def _at_once(start: datetime | None, now: datetime) -> bool:
    """A start no other change can beat: within a minute of now (one well before now is no fresh answer)."""
    return start is not None and now - _AT_ONCE <= start <= now + _AT_ONCE


@dataclass(frozen=True)
class PendingChecks:
    """What slurmlab says of a pending job beyond its reason (:func:`pending_checks`): the findings (the limit
    Slurm names first, then what holds its GPUs, then the changes), the changes that start sooner and the
    others, why the limits could not be checked ("" when they could) and what "sooner" was measured against."""

    findings: tuple[Finding, ...] = ()
    sooner: tuple[Alternative, ...] = ()
    rest: tuple[Alternative, ...] = ()
    unchecked: str = ""
    compared: str = ""


def pending_checks(
    job: Job,
    runner: Runner,
    *,
    nodes: Sequence[Node],
    partitions: Sequence[Partition],
    now: datetime,
    alternatives: bool = True,
    failed: Verdict = Verdict.WARN,
    fix: str = "ask again in a moment",
) -> PendingChecks:
    """The checks ``alloc.why()`` and the doctor run on a pending job that is not held, each guarded (a failing
    one is a ``failed`` finding with ``fix``, never an exception): the limit Slurm names (usage, cap, what lifts
    it), the running jobs that hold its GPUs, and — ``alternatives`` — the changes ``--test-only`` says start
    sooner. A job that waits for its begin time or a dependency gets none: no change of resources cures that
    (``judge_pending`` names the cause). The queue and the accounting limits are asked once for all three."""
    if waits_for(job, now):
        return PendingChecks()
    subject = f"job {job.display_id}"
    limits = LimitContext(job, runner, partitions=partitions)
    out: list[Finding] = []
    ask = limit_ask(job.reason)
    if ask is not None:  # the limit Slurm names is the cause: said first
        out += guarded(
            "job.limit",
            "which limit holds it",
            subject,
            lambda: [limit_finding(job, ask, limits)],
            verdict=Verdict.WARN,
            fix=fix,
        )
    usable = usable_nodes(job, nodes, partitions)
    out += guarded(
        "job.blockers",
        "what holds its GPUs",
        subject,
        lambda: [judge_blockers(job, blockers(job, limits.records(), usable), now)],
        verdict=failed,
        fix=fix,
    )
    sooner: list[Alternative] = []
    rest: list[Alternative] = []

    def changes() -> list[Finding]:
        s, r = pending_alternatives(job, runner, nodes=nodes, partitions=partitions, limits=limits)
        sooner.extend(s)
        rest.extend(r)
        return [judge_alternatives(job, s, r, unchecked=limits.known().why_unknown, compared=limits.compared)]

    if alternatives and not looked_at(job):
        out.append(judge_unlooked(job))
    elif alternatives:
        out += guarded(
            "job.alternatives", "what would start it sooner", subject, changes, verdict=failed, fix=fix
        )
    return PendingChecks(tuple(out), tuple(sooner), tuple(rest), _unchecked(limits), limits.compared)


def _unchecked(limits: LimitContext) -> str:
    """Why the limits could not be read, once they were asked ("" when they could, or were never needed)."""
    known = limits.asked
    return known.why_unknown if known is not None else ""
