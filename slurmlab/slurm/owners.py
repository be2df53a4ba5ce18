"""Who owns a job, never read from a record that holds free text.

A job name or comment is whatever its submitter typed (``y UserId=root(0)``), so ownership comes from
``squeue``'s ``%U`` field alone, compared with this process's effective uid.
"""

from __future__ import annotations

from slurmlab.core.slurm.jobid import check_job_id
from slurmlab.errors import JobNotFoundError, NotYourJobError, ParseError
from slurmlab.slurm import identity
from slurmlab.slurm.identity import user_name
from slurmlab.slurm.query import Query, arun_query, run_query
from slurmlab.slurm.runner import Runner, RunResult

__all__ = [
    "acheck_mine",
    "ajob_owner_uid",
    "ajob_owners",
    "check_mine",
    "job_owner_uid",
    "job_owners",
    "parse_owners",
]


def parse_owners(result: RunResult) -> dict[int, int]:
    """``squeue -o '%A|%U'`` lines: job id -> uid; anything but two numbers is refused."""
    owners: dict[int, int] = {}
    for line in result.stdout.splitlines():
        if not line.strip():
            continue
        jid, sep, uid = line.strip().partition("|")
        if not sep or not (jid.isascii() and jid.isdigit() and uid.isascii() and uid.isdigit()):
            raise ParseError("squeue job owner line", line, hint="expected JOBID|UID")
        owners[int(jid)] = int(uid)
    return owners


_OWNERS: Query[dict[int, int]] = Query(("squeue", "-h", "-t", "all", "-o", "%A|%U"), parse_owners)


def job_owners(runner: Runner | None = None) -> dict[int, int]:
    """Every job Slurm lists, by its numeric id, with its owner's uid."""
    return run_query(_OWNERS, runner)


async def ajob_owners(runner: Runner | None = None) -> dict[int, int]:
    return await arun_query(_OWNERS, runner)


def _owner_query(jid: str) -> Query[int]:
    def parse(result: RunResult) -> int:
        uids = set(parse_owners(result).values())
        if not uids:
            raise JobNotFoundError(f"job {jid} is not known to the controller", argv=result.argv)
        if len(uids) > 1:  # every task of an array has one owner; refuse rather than guess
            raise ParseError("squeue job owner", result.stdout, hint=f"job {jid} shows several owners")
        return uids.pop()

    return Query(("squeue", "-h", "-t", "all", "-j", jid, "-o", "%A|%U"), parse)


def job_owner_uid(job_id: str | int, runner: Runner | None = None) -> int:
    """The uid that owns ``job_id``."""
    return run_query(_owner_query(check_job_id(job_id)), runner)


async def ajob_owner_uid(job_id: str | int, runner: Runner | None = None) -> int:
    return await arun_query(_owner_query(check_job_id(job_id)), runner)


def _refuse_unless_mine(jid: str, owner: int) -> None:
    me = identity.current_uid()  # looked up now: the one identity, whoever replaced it
    if owner != me:
        who = user_name(owner)
        raise NotYourJobError(
            f"job {jid} belongs to {who}, not to {user_name(me)}: slurmlab acts only on your own jobs",
            hint=f"ask {who} (or your admins) to cancel it",
        )


def check_mine(job_id: str | int, runner: Runner | None = None) -> None:
    """NotYourJobError unless this process's uid owns ``job_id``."""
    jid = check_job_id(job_id)
    _refuse_unless_mine(jid, job_owner_uid(jid, runner))


async def acheck_mine(job_id: str | int, runner: Runner | None = None) -> None:
    jid = check_job_id(job_id)
    _refuse_unless_mine(jid, await ajob_owner_uid(jid, runner))
