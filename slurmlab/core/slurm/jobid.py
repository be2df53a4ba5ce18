"""Slurm job ids as users type them and as slurmlab passes them on.

Every place a job id enters slurmlab (a magic's ``--jobid``, ``%salloc --attach``, a server
route, ``Allocation.attach``) checks it here before it reaches an argv: an unchecked id such
as ``-v`` becomes an option of ``scontrol``/``squeue`` and ``0`` matches no job, which some
Slurm commands answer with another job's record.

API::

    check_job_id(value) -> str      # "123", "123_4"; raises RequestError with the fix
    is_job_id(value) -> bool
"""

from __future__ import annotations

import re

from slurmlab.errors import RequestError

__all__ = ["check_job_id", "is_job_id"]

# fullmatch, never match: "$" accepts a trailing newline. Slurm's job ids are 1 .. 0x03ff0000
# (MaxJobId's ceiling), so ten digits bound them; array tasks are written JOBID_TASK.
_JOB_ID = re.compile(r"([1-9][0-9]{0,9})(?:_([0-9]{1,10}))?")


def is_job_id(value: object) -> bool:
    return (
        isinstance(value, (str, int))
        and not isinstance(value, bool)
        and (_JOB_ID.fullmatch(str(value)) is not None)
    )


def check_job_id(value: object) -> str:
    """The id as text, or RequestError saying what a job id looks like."""
    if isinstance(value, int) and not isinstance(value, bool):
        value = str(value)
    if not isinstance(value, str) or _JOB_ID.fullmatch(value) is None:
        shown = repr(value) if not isinstance(value, str) else repr(value[:40])
        raise RequestError(
            f"{shown} is not a Slurm job id",
            hint="a job id is a positive number such as 1234 (an array task: 1234_5); `%squeue` lists yours",
        )
    return value
