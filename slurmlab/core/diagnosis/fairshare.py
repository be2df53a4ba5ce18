"""Fair-share and recent jobs in plain words: what ``sshare``'s numbers mean for when my jobs start, and what
each of my recent jobs' end state means.

Slurm's fair-share (``priority/multifactor``, Fair Tree since 19.05) compares, at each level of the account
tree, the part of the shares an association holds (NormShares) with the part of the recent usage it had
(EffectvUsage; usage decays with ``PriorityDecayHalfLife``, 7 days by default). Who used less than their share
gets a higher factor (0..1), which weighs into every pending job's priority. Pure: records in, words out.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass

from slurmlab.core.jsontypes import JSONObject
from slurmlab.core.slurm.sacct import SacctRecord
from slurmlab.core.slurm.sshare import ShareRecord

__all__ = [
    "FAIRSHARE_LEGEND",
    "ShareExplained",
    "explain_shares",
    "gpu_time",
    "owned_by",
    "parents",
    "share_story",
    "standing",
    "state_in_words",
    "usage_part",
]

# usage/shares ratios inside this band count as "about your share": sshare prints 6 decimals of numbers that
# decay continuously, so a strict comparison would flip on noise
_UNDER, _OVER = 0.8, 1.25

FAIRSHARE_LEGEND = (
    "fair-share factor: 0 to 1, higher starts sooner; Slurm adds it (times PriorityWeightFairshare) to the "
    "priority of each of your pending jobs",
    "shares: your part of the account's shares (NormShares)",
    "usage: your part of the account's recent usage (EffectvUsage); past usage fades with the decay half-life "
    "(PriorityDecayHalfLife, 7 days unless the admins changed it)",
    "GPU-minutes: GPU time charged to you, decayed the same way",
)


@dataclass(frozen=True)
class ShareExplained:
    """One of my associations (an account I can charge), explained."""

    account: str
    user: str
    fair_share: float | None
    shares: float | None  # my part of the account's shares
    usage: float | None  # my part of the account's recent usage
    gpu_minutes: float | None
    standing: str  # unused | under | about | over | unknown
    account_standing: str  # the account's own standing among its siblings
    sentence: str

    def to_dict(self) -> JSONObject:
        return {
            "account": self.account,
            "user": self.user,
            "fair_share": self.fair_share,
            "shares": self.shares,
            "usage": self.usage,
            "gpu_minutes": self.gpu_minutes,
            "standing": self.standing,
            "account_standing": self.account_standing,
            "sentence": self.sentence,
        }


def usage_part(record: ShareRecord, parent: ShareRecord | None) -> float | None:
    """The association's part of its parent's recent usage: RawUsage over the parent's when both are known
    (sshare's EffectvUsage is that ratio, but some versions print 0 until the next priority pass), else
    EffectvUsage."""
    if parent is not None and record.raw_usage is not None and parent.raw_usage:
        return min(1.0, record.raw_usage / parent.raw_usage)
    return record.effective_usage


def standing(usage: float | None, shares: float | None, raw_usage: int | None = None) -> str:
    """How a part of the usage compares with a part of the shares: unused, under, about, over or unknown."""
    if raw_usage == 0 or usage == 0.0:
        return "unused"
    if usage is None or shares is None:
        return "unknown"
    if shares == 0.0:
        return "over"  # no shares at all: any usage is more than its share
    ratio = usage / shares
    if ratio < _UNDER:
        return "under"
    return "over" if ratio > _OVER else "about"


def parents(records: Sequence[ShareRecord]) -> list[ShareRecord | None]:
    """Each record's parent in sshare's tree: a user's is its account's line, an account's the nearest line
    above it one level up (the tree comes depth-first, accounts indented one space per level)."""
    out: list[ShareRecord | None] = []
    stack: list[ShareRecord] = []  # the account lines on the path to the current one, by depth
    for r in records:
        if r.user is not None:
            out.append(next((a for a in reversed(stack) if a.account == r.account), None))
            continue
        while stack and stack[-1].depth >= r.depth:
            stack.pop()
        out.append(stack[-1] if stack else None)
        stack.append(r)
    return out


def _percent(value: float | None) -> str:
    return "?" if value is None else f"{value:.0%}" if value >= 0.01 or value == 0 else "<1%"


def _sentence(account: str, usage: float | None, shares: float | None, where: str, account_where: str) -> str:
    numbers = f"{_percent(usage)} of its usage for {_percent(shares)} of its shares"
    words = {
        "unused": f"you have not used account {account} lately: your jobs there start before those of users "
        "who have (other things being equal)",
        "under": f"you have used less than your share of account {account} lately ({numbers}): your jobs "
        "start before those of users who used more",
        "about": f"you have used about your share of account {account} lately ({numbers}): your jobs are "
        "in the middle of the fair-share order",
        "over": f"you have used more than your share of account {account} lately ({numbers}): your jobs "
        "start after those of users who used less; this fades as your past usage decays",
        "unknown": f"sshare gives no usage or shares for you in account {account}, so where you stand is "
        "unknown",
    }[where]
    if account_where == "over":
        words += (
            f"; the account {account} itself has used more than its share of the cluster, so all its "
            "users' jobs wait behind those of accounts that used less"
        )
    elif account_where in ("under", "unused"):
        words += f"; the account {account} itself has used less than its share, which helps its users"
    return words


def explain_shares(records: Sequence[ShareRecord], user: str) -> list[ShareExplained]:
    """One explanation for each account ``user`` has an association in, in sshare's order."""
    up = parents(records)
    above = dict(zip(map(id, records), up, strict=True))
    out = []
    for r, parent in zip(records, up, strict=True):
        if r.user != user:
            continue
        usage = usage_part(r, parent)
        where = standing(usage, r.norm_shares, r.raw_usage)
        account_where = "unknown"
        if parent is not None and above.get(id(parent)) is not None:  # the cluster's root has no standing
            account_where = standing(
                usage_part(parent, above[id(parent)]), parent.norm_shares, parent.raw_usage
            )
        fair = r.fair_share if r.fair_share is None or math.isfinite(r.fair_share) else None
        out.append(
            ShareExplained(
                account=r.account,
                user=user,
                fair_share=fair,
                shares=r.norm_shares,
                usage=usage,
                gpu_minutes=r.gpu_minutes,
                standing=where,
                account_standing=account_where,
                sentence=_sentence(r.account, usage, r.norm_shares, where, account_where),
            )
        )
    return out


def gpu_time(minutes: float | None) -> str:
    """Decayed GPU-minutes in words: ``"12 GPU-minutes"``, ``"3.2 GPU-hours"``, or "not accounted"."""
    if minutes is None:
        return "GPU time not accounted"
    if minutes < 60:
        return f"{minutes:.0f} GPU-minutes" if minutes >= 1 or minutes == 0 else "under 1 GPU-minute"
    return f"{minutes / 60:.1f} GPU-hours"


# past this many names a line of who used what reads as noise: the rest is counted
_MEMBERS_SHOWN = 8


def _members_line(records: Sequence[ShareRecord], account: ShareRecord | None, name: str, user: str) -> str:
    members = [r for r in records if r.user is not None and r.account == name]
    members.sort(key=lambda r: -(r.gpu_minutes or 0.0))
    said = [
        f"{'you' if r.user == user else r.user} {gpu_time(r.gpu_minutes)}" for r in members[:_MEMBERS_SHOWN]
    ]
    if len(members) > _MEMBERS_SHOWN:
        said.append(f"{len(members) - _MEMBERS_SHOWN} others less")
    total = gpu_time(account.gpu_minutes if account is not None else None)
    return f"in account {name} lately (decayed): {', '.join(said)}; of the account's {total}"


def share_story(records: Sequence[ShareRecord], user: str) -> list[str]:
    """Fair-share told in words for ``user``, two lines per account they can charge: their FairShare and what it
    means for when their jobs start, then who in that account used how much GPU time, of the account's total
    (``records``: ``sshare --all``; with only the user's own lines, the account's other users are not named)."""
    up = parents(records)
    account_of = {(r.account, r.user): p for r, p in zip(records, up, strict=True)}
    lines: list[str] = []
    for mine in explain_shares(records, user):
        factor = "?" if mine.fair_share is None else f"{mine.fair_share:.2f}"
        lines.append(f"account {mine.account}: your FairShare {factor}: {mine.sentence}")
        lines.append(_members_line(records, account_of.get((mine.account, user)), mine.account, user))
    return lines


# what each end (or current) state of a job means, in the words a newcomer needs; Slurm's word stays beside it
_STATE_WORDS = {
    "PENDING": "waiting to start",
    "RUNNING": "running",
    "REQUEUED": "put back in the queue",
    "SUSPENDED": "suspended (paused, resources kept)",
    "COMPLETED": "finished, exit 0",
    "FAILED": "ended with an error (non-zero exit)",
    "CANCELLED": "cancelled",
    "TIMEOUT": "stopped at its time limit",
    "OUT_OF_MEMORY": "killed: used more memory than it asked for",
    "NODE_FAIL": "a node it ran on failed",
    "PREEMPTED": "stopped to make room for a higher-priority job",
    "BOOT_FAIL": "its node failed to boot",
    "DEADLINE": "missed its --deadline",
}


def state_in_words(state: str, cancelled_by: str | None = None) -> str:
    """A job state in plain words (``CANCELLED by alice`` -> "cancelled by alice"); unknown words as they are."""
    words = _STATE_WORDS.get(state, state.lower().replace("_", " "))
    if state == "CANCELLED" and cancelled_by:
        words += f" by {cancelled_by}"
    return words


def owned_by(records: Sequence[SacctRecord], uid: int) -> list[SacctRecord]:
    """The records of the jobs whose own line carries ``uid``, steps included (sacct prints no UID on a
    step's line). Ownership is Slurm's UID, never the User or JobName text."""
    jobs = {r.job_id for r in records if r.is_job and r.uid == uid}
    return [r for r in records if r.job_id in jobs]
