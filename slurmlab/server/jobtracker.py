"""The jobs of a cluster, kept up to date from one cheap listing per poll.

Parsing ``scontrol show job -d`` of every job Slurm remembers, ended ones too, was most of a poll's CPU
(2.25 MB at 2,000 jobs; seconds at 10,000). Instead each poll asks for the brief text form of the queue
(``squeue -h -t all -o BRIEF_FORMAT``: one short line per job, written by Slurm alone) and:

* a line that reads as it did last time (ignoring the two fields that tick every second, time left and time
  used) keeps the view built last time: no parsing at all;
* a line that changed is parsed; the job's state, reason, times and nodes come from it, laid over the detail
  already known;
* only a job that is new, or whose nodes changed (it started, ended its allocation, grew), needs its detail
  (``scontrol show job -d``): one by one when a few do, one listing when many do (the first poll).

The first poll of a large queue (more than :data:`BRIEF_FIRST_OVER` jobs) asks no detail at all: its views
come from the brief lines alone (no name, no GPUs yet: 1 s instead of 4 at 10,000 jobs), it says it is not
complete, and the poll that follows at once fetches the details.

Jobs that left the queue (or ended) are forgotten. A line or a record that cannot be read is a problem,
listed, asked about again at the next poll, never dropped silently.
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass, replace
from operator import itemgetter
from typing import Any

from slurmlab.core.slurm.models import Job
from slurmlab.core.slurm.squeue_brief import BRIEF_FIELDS, BRIEF_FORMAT, JobBrief, parse_squeue_brief
from slurmlab.core.slurm.states import ACTIVE, HOLDING
from slurmlab.errors import JobNotFoundError, ParseError
from slurmlab.server.cache import ResponseCache
from slurmlab.server.contract import JobView, ProblemView
from slurmlab.server.views import job_view, problem_view
from slurmlab.slurm import queries
from slurmlab.slurm.query import Query, run_query

__all__ = [
    "BRIEF_FIRST_OVER",
    "BRIEF_QUEUE_ARGV",
    "DETAIL_ONE_BY_ONE",
    "JobTracker",
    "TrackedJobs",
    "my_queue_argv",
]

# Up to this many jobs needing detail are asked one by one; more (the first poll, a burst of starts) in one
# listing: one `scontrol show job -d ID` costs about a hundredth of the whole listing at 1,000 jobs.
DETAIL_ONE_BY_ONE = 8
BRIEF_FIRST_OVER = 500
_TICKING = frozenset({BRIEF_FIELDS.index("time_left"), BRIEF_FIELDS.index("time_used")})
# the fields compared between polls, picked in one C call: a 10,000-job queue passes here at every poll
_KEPT = itemgetter(*(i for i in range(len(BRIEF_FIELDS)) if i not in _TICKING))
_ID = BRIEF_FIELDS.index("job_id")
_STATE = BRIEF_FIELDS.index("state")
_USER = BRIEF_FIELDS.index("user")
BRIEF_QUEUE_ARGV: tuple[str, ...] = ("squeue", "-h", "-t", "all", "-o", BRIEF_FORMAT)


def my_queue_argv(uid: int) -> tuple[str, ...]:
    """The viewer's own jobs (``squeue -u UID``, as ``--me`` but for the one identity slurmlab asks,
    :func:`slurmlab.slurm.identity.current_uid`): only jobs of that uid are listed, so every line is the
    viewer's by construction. (On 22.05 it costs the controller what the whole listing does, a JOB_INFO and a
    PARTITION_INFO, squeue filtering on its side: sdiag, benchmarks/bench_rpc.py.)"""
    return ("squeue", "-h", "-t", "all", "-u", str(int(uid)), "-o", BRIEF_FORMAT)


@dataclass
class _Known:
    key: str  # the brief line without its ticking fields
    job: Job  # the detail, with the brief's fields laid over it
    view: JobView
    body: bytes  # the view's JSON, encoded once while it stays the same
    detailed: bool = True  # False: built from the brief line alone (a large first poll), detail still to come


@dataclass
class TrackedJobs:
    """One poll's active jobs, in squeue's order: views, models, each view's JSON, unreadable records."""

    views: list[JobView]
    jobs: list[Job]
    bodies: list[bytes]
    problems: list[ProblemView]
    complete: bool = True  # False: some views come from the brief alone; poll again soon for their detail


def _line_key(line: str) -> tuple[int, str, str] | None:
    """(job id, state, key) of a brief line; None when it does not have the brief's shape."""
    fields = line.split("|")
    if len(fields) != len(BRIEF_FIELDS):
        return None
    jid = fields[_ID].strip()
    if not (jid.isascii() and jid.isdigit() and len(jid) <= 19):
        return None
    key = "|".join(_KEPT(fields))
    return int(jid), fields[_STATE].strip(), key


def _overlay(job: Job, brief: JobBrief) -> Job:
    """The detail ``job`` with what the brief line says now."""
    return replace(
        job,
        state=brief.state,
        reason=brief.reason,
        partition=brief.partition or job.partition,
        nodelist=brief.nodelist,
        nodes=brief.nodes or job.nodes,
        start_time=brief.start_time,
        end_time=brief.end_time,
        time_limit=brief.time_limit if brief.time_limit is not None else job.time_limit,
    )


def _from_brief(brief: JobBrief) -> Job:
    """A job as far as its brief line tells (no name, no GPUs: those come with the detail)."""
    task = brief.array_task
    return Job(
        job_id=brief.job_id,
        name=brief.name,
        state=brief.state,
        reason=brief.reason,
        user=brief.user,
        partition=brief.partition,
        nodelist=brief.nodelist,
        nodes=brief.nodes,
        array_job_id=brief.array_job_id,
        array_task_id=int(task) if task and task.isascii() and task.isdigit() and len(task) <= 9 else None,
        array_tasks=task if task and brief.array_job_id and not task.isdigit() else None,
        start_time=brief.start_time,
        end_time=brief.end_time,
        time_limit=brief.time_limit,
        tres_per_node=brief.tres_per_node,
        num_nodes=brief.num_nodes,
    )


def _needs_detail(job: Job, brief: JobBrief) -> bool:
    """Whether the brief change moved the job's GPUs (only the detail names them)."""
    return (job.state in HOLDING) != (brief.state in HOLDING) or job.nodelist != brief.nodelist


class JobTracker:
    """One cluster's jobs across polls (kept where the polls run: the worker process).

    ``own``: it follows only the viewer's jobs (``squeue -u UID``), so every job it lists is the viewer's, whatever
    ``owners`` says. ``viewer``: the viewer's login; a job of the whole listing whose brief line names it (squeue's
    ``%u``, Slurm's name of the job's uid: the brief holds no field a submitter writes) is marked mine, so that
    the whole poll needs no second listing of owners. "Mine" is what the views show; acting on a job checks its
    uid again (``check_mine``)."""

    def __init__(self, *, own: bool = False, viewer: str | None = None) -> None:
        self.viewer = viewer
        self._known: dict[int, _Known] = {}
        self._polled = False
        self.own = own
        self._query: Query[str] = Query(BRIEF_QUEUE_ARGV, lambda r: r.stdout)

    def poll(self, runner: Any, owners: dict[int, int], me: int, names: dict[int, str]) -> TrackedJobs:
        """The active jobs now, and the records that could not be read."""
        problems: list[ProblemView] = []
        order: list[int] = []
        changed: dict[int, tuple[str, str]] = {}  # id -> (key, line)
        query = Query(my_queue_argv(me), self._query.parse) if self.own else self._query
        if self.own or self.viewer is not None:
            owners = {}
        for line in run_query(query, runner).splitlines():
            if not line.strip():
                continue
            found = _line_key(line)
            if found is None:
                problems.extend(self._unreadable([line]))
                continue
            jid, state, key = found
            if self.own or (self.viewer is not None and line.split("|")[_USER].strip() == self.viewer):
                owners[jid] = me
            if state not in ACTIVE:
                continue
            order.append(jid)
            known = self._known.get(jid)
            if known is None or known.key != key:
                changed[jid] = (key, line)
        self._known = {jid: self._known[jid] for jid in order if jid in self._known}
        if changed:
            problems.extend(self._update(runner, changed, owners, me, names))
        self._polled = True
        kept = [self._known[jid] for jid in order if jid in self._known]
        return TrackedJobs(
            [k.view for k in kept],
            [k.job for k in kept],
            [k.body for k in kept],
            problems,
            all(k.detailed for k in kept),
        )

    @staticmethod
    def _unreadable(lines: Iterable[str]) -> list[ProblemView]:
        bad: list[ParseError] = []
        parse_squeue_brief("\n".join(lines), problems=bad)
        return [problem_view(p, "job") for p in bad] or [
            problem_view(ParseError("squeue brief line", line), "job") for line in lines
        ]

    def _update(
        self,
        runner: Any,
        changed: dict[int, tuple[str, str]],
        owners: dict[int, int],
        me: int,
        names: dict[int, str],
    ) -> list[ProblemView]:
        bad: list[ParseError] = []
        briefs = {
            b.job_id: b
            for b in parse_squeue_brief("\n".join(line for _, line in changed.values()), problems=bad)
        }
        problems = [problem_view(p, "job") for p in bad]
        wanted = [
            jid
            for jid, brief in briefs.items()
            if jid not in self._known
            or not self._known[jid].detailed
            or _needs_detail(self._known[jid].job, brief)
        ]
        brief_first = not self._polled and len(wanted) > BRIEF_FIRST_OVER
        details, detail_problems = ({}, []) if brief_first else self._details(runner, wanted)
        problems += detail_problems
        for jid, brief in briefs.items():
            base, detailed = details.get(jid), True
            if base is None and jid not in wanted:
                base = self._known[jid].job
            elif base is None and brief_first:
                base, detailed = _from_brief(brief), False
            if base is None:  # ended between the two calls, or its record could not be read
                self._known.pop(jid, None)
                continue
            job = _overlay(base, brief)
            view = job_view(job, owners, me, names)
            # submitted after the owners were listed (no owner yet), or no detail yet: built again next poll
            key = changed[jid][0] if jid in owners and detailed else ""
            self._known[jid] = _Known(key, job, view, ResponseCache.encode(view), detailed)
        return problems

    def _details(self, runner: Any, wanted: list[int]) -> tuple[dict[int, Job], list[ProblemView]]:
        if not wanted:
            return {}, []
        if self._polled and len(wanted) <= DETAIL_ONE_BY_ONE:
            found: dict[int, Job] = {}
            problems: list[ProblemView] = []
            for jid in wanted:
                try:
                    found[jid] = queries.job_detail(jid, runner)
                except JobNotFoundError:
                    continue
                except ParseError as exc:
                    problems.append(problem_view(exc, "job"))
            return found, problems
        listing = queries.list_jobs(runner, all_users=not self.own, active_only=False)
        want = set(wanted)
        return (
            {j.job_id: j for j in listing if j.job_id in want},
            [problem_view(p, "job") for p in getattr(listing, "problems", ())],
        )
