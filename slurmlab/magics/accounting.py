"""``%sacct`` and ``%sshare``: my recent jobs and my fair-share, from Slurm accounting, in plain words.

``%load_ext slurmlab`` declares these magics lazily: this module, with the accounting queries, the parsers and
the tables, loads on the first ``%sacct`` or ``%sshare``.
"""

from __future__ import annotations

import re
from datetime import datetime
from typing import Any

from IPython.core.error import UsageError
from IPython.core.magic import Magics, line_magic, magics_class

from slurmlab.core.diagnosis.ended import explain_end
from slurmlab.core.diagnosis.fairshare import ShareExplained, owned_by
from slurmlab.core.slurm.sacct import SacctRecord
from slurmlab.core.slurm.states import ENDED
from slurmlab.errors import ParseError
from slurmlab.magics.args import argument, expand_line, job_id_option, magic_arguments, raw_line, split_line
from slurmlab.magics.session import EXPANSION_HELP, user_errors
from slurmlab.slurm import identity
from slurmlab.slurm.accounting_queries import job_records, recent_records
from slurmlab.slurm.share_queries import ShareStory, my_shares, story_of_my_accounts
from slurmlab.widgets.accounting_tables import AccountingTable, job_table, share_table, steps_table

__all__ = ["AccountingMagics", "parse_since", "recent_jobs", "job_detail", "my_fairshare"]

DEFAULT_SINCE_HOURS = 24.0
DEFAULT_COUNT = 20
MAX_SINCE_HOURS = 24 * 366  # what accounting_queries.recent_records accepts
_SPAN = re.compile(r"([0-9]{1,6}(?:\.[0-9]{1,3})?)\s*(m|min|h|d|w)?")
_HOURS = {"m": 1 / 60, "min": 1 / 60, "h": 1.0, "": 1.0, "d": 24.0, "w": 168.0}


def parse_since(text: str, now: datetime | None = None) -> float:
    """``--since``: ``90m``, ``12h``, ``3d``, ``1w``, a number of hours, or a date (``2026-11-30`` or
    ``2026-11-30T08:00``) -> hours before now; UsageError saying the forms otherwise."""
    raw = text.strip().lower()
    m = _SPAN.fullmatch(raw)
    if m is not None:
        hours = float(m.group(1)) * _HOURS[m.group(2) or ""]
    else:
        try:
            when = datetime.fromisoformat(text.strip())
        except ValueError:
            raise UsageError(
                f"--since {text[:40]!r}: give a span (90m, 12h, 3d, 1w) or a date "
                "(2026-11-30, 2026-11-30T08:00)"
            ) from None
        now = now or datetime.now(when.tzinfo)
        hours = (now - when).total_seconds() / 3600
        if hours <= 0:
            raise UsageError(f"--since {text[:40]!r} is in the future: give a time before now")
    if not 0 < hours <= MAX_SINCE_HOURS:
        raise UsageError(f"--since {text[:40]!r}: give a span from 1 minute to a year")
    return hours


def _names(records: list[SacctRecord]) -> dict[int, str]:
    """uid -> login name of whoever cancelled a job (sacct prints ``CANCELLED by <uid>``)."""
    return {
        uid: identity.user_name(uid)
        for uid in {r.cancelled_by for r in records if r.cancelled_by is not None}
    }


def recent_jobs(
    *, since_hours: float = DEFAULT_SINCE_HOURS, count: int = DEFAULT_COUNT, all_states: bool = False
) -> AccountingTable:
    """My jobs of the last ``since_hours`` (the ``count`` most recent), with the efficiency of each; without
    ``all_states``, the jobs that never started (still pending, cancelled while pending) are left out."""
    records = recent_records(None, since_hours=since_hours, limit=count if all_states else max(count * 4, 50))
    # sacct -u selects by name; keep what the effective uid owns (a job's uid is Slurm's, not a name field)
    records = owned_by(records, identity.current_uid())
    hidden = 0
    if not all_states:
        started = {r.job_id for r in records if r.is_job and r.start is not None}
        hidden = len({r.job_id for r in records if r.is_job} - started)
        records = [r for r in records if r.job_id in started]
    jobs = list(dict.fromkeys(r.job_id for r in records))[-count:]
    keep = set(jobs)
    records = [r for r in records if r.job_id in keep]
    span = f"{since_hours:g} h" if since_hours < 48 else f"{since_hours / 24:g} days"
    note = f"{hidden} job(s) that never started are not shown: %sacct --all-states" if hidden else ""
    return job_table(
        records,
        title=f"jobs of {identity.current_user()} in the last {span}",
        names=_names(records),
        note=note,
    )


def job_detail(job_id: str) -> AccountingTable:
    """One job and its steps: how it ended and what to change next time (once it has), and its efficiency."""
    records = job_records(None, job_id)
    names = _names(records)
    table = steps_table(records, job_id, names=names)
    job = next((r for r in records if r.is_job), None)
    if job is not None and job.state in ENDED:
        # how it ended and what to change next time (the panel's "ended" words), above the efficiency line
        ended = explain_end(records, me=identity.current_uid(), names=names)
        table.notes[:0] = [ended.headline, *(f"-> {a}" for a in ended.advice)]
    return table


def my_fairshare() -> AccountingTable:
    """My fair-share in each account I can charge, with what it means in words."""
    problems: list[ParseError] = []
    shares: list[ShareExplained] = my_shares(problems=problems)
    table = share_table(shares, title=f"fair-share of {identity.current_user()}")
    if problems:
        table.notes.insert(
            0, f"warning: {len(problems)} sshare line(s) could not be read: {problems[0].message}"
        )
    return table


def _story() -> ShareStory:
    problems: list[ParseError] = []
    story = story_of_my_accounts(problems=problems)
    if problems:
        warning = f"warning: {len(problems)} sshare line(s) could not be read: {problems[0].message}"
        story = ShareStory(story.user, story.accounting, (*story.lines, warning))
    return story


@magics_class
class AccountingMagics(Magics):
    @magic_arguments()
    @argument("job", nargs="?", help="one job: its steps, exit codes and efficiency")
    @argument("--since", "-S", metavar="SPAN", help="how far back: 90m, 12h, 3d, 1w or a date (default 24h)")
    @argument("-n", type=int, metavar="N", help=f"at most N jobs, the most recent (default {DEFAULT_COUNT})")
    @argument("--all-states", action="store_true", help="also the jobs that never started")
    @raw_line
    @line_magic
    def sacct(self, line: str, local_ns: dict[str, Any] | None = None) -> AccountingTable:
        """My recent jobs from Slurm accounting: state in plain words, elapsed vs limit, GPUs, efficiency.

        ``%sacct`` my jobs of the last 24 hours · ``%sacct --since 3d -n 50`` · ``%sacct --all-states`` also
        those that never started · ``%sacct JOBID`` one job with its steps, how it ended, what to change next
        time and its efficiency line.
        """
        line = expand_line(self, line, local_ns)
        ns, rest, command = split_line(self, "sacct", line)
        if rest or command:
            raise UsageError(
                f"%sacct does not take {' '.join(rest + command)!r}: use JOBID, --since, -n, --all-states"
            )
        if ns.job is not None:
            if ns.since or ns.n is not None or ns.all_states:
                raise UsageError("%sacct JOBID shows that one job: drop --since, -n and --all-states")
            job = job_id_option(ns.job, "%sacct JOBID")
            with user_errors(f"cannot read job {job} from Slurm accounting"):
                return job_detail(job)
        if ns.n is not None and not 1 <= ns.n <= 1000:
            raise UsageError(f"-n {ns.n}: give 1 to 1000 jobs")
        hours = parse_since(ns.since) if ns.since else DEFAULT_SINCE_HOURS
        with user_errors("cannot read your recent jobs from Slurm accounting"):
            return recent_jobs(since_hours=hours, count=ns.n or DEFAULT_COUNT, all_states=ns.all_states)

    @magic_arguments()
    @argument(
        "--class",
        dest="story",
        action="store_true",
        help="the story in words: your FairShare and who in your accounts (a class) used how much GPU time",
    )
    @raw_line
    @line_magic
    def sshare(self, line: str, local_ns: dict[str, Any] | None = None) -> AccountingTable | ShareStory:
        """My fair-share per account: the factor, my usage vs my shares, GPU-minutes, and what they mean.

        Fair-share decides the order of pending jobs of equal other priority: whoever used less than their
        share lately starts first; past usage fades with the decay half-life. ``%sshare --class`` tells it in
        words with who in each of my accounts used how much GPU time; where the cluster keeps no accounting
        it says so (and how to turn it on) rather than fail.
        """
        line = expand_line(self, line, local_ns)
        ns, rest, command = split_line(self, "sshare", line)
        if rest or command:
            raise UsageError(f"%sshare takes no arguments (only --class), not {' '.join(rest + command)!r}")
        with user_errors("cannot read your fair-share"):
            return _story() if ns.story else my_fairshare()


for _m in (AccountingMagics.sacct, AccountingMagics.sshare):
    _m.__doc__ = (_m.__doc__ or "") + "\n" + EXPANSION_HELP
