"""Fair-share from Slurm accounting: ``sshare`` through the one Runner, with a timeout.

A cluster without accounting storage has no associations to share: sshare then fails (or, on some versions,
prints nothing), and :class:`~slurmlab.errors.AccountingOffError` says how to turn accounting on.
"""

from __future__ import annotations

from slurmlab.core.diagnosis.fairshare import ShareExplained, explain_shares
from slurmlab.core.slurm.sshare import SSHARE_FIELDS, ShareRecord, parse_sshare
from slurmlab.errors import AccountingOffError, ParseError
from slurmlab.slurm import identity
from slurmlab.slurm.accounting_queries import ACCOUNTING_OFF_HINT, run_accounting
from slurmlab.slurm.runner import Runner

__all__ = ["SSHARE_TIMEOUT", "my_shares", "share_records", "sshare_argv"]

SSHARE_TIMEOUT = 30.0
# what sshare prints when there is nothing to share: no slurmdbd, or a priority plugin without fair-share
_OFF = (
    "accounting storage is disabled",
    "not running a supported priority plugin",
    "priority/basic",
    "no associations",
    "problem talking to the database",
    "persistent connection",
)


def sshare_argv(*selection: str) -> list[str]:
    """``sshare`` in the layout :func:`~slurmlab.core.slurm.sshare.parse_sshare` reads."""
    return ["sshare", "--parsable2", "--noheader", "--format=" + ",".join(SSHARE_FIELDS), *selection]


def share_records(
    runner: Runner | None = None, *, all_users: bool = False, problems: list[ParseError] | None = None
) -> list[ShareRecord]:
    """The association tree sshare shows: my associations and their accounts (``all_users``: everyone's)."""
    argv = sshare_argv(*(["--all"] if all_users else []))
    result = run_accounting(
        argv,
        runner,
        SSHARE_TIMEOUT,
        cannot="fair-share cannot be read",
        off_markers=_OFF,
        off_message="Slurm accounting is off on this cluster, so there is no fair-share to "
        "show (sshare said: {last})",
    )
    records = parse_sshare(result.stdout, problems=problems)
    if not records and not problems:
        raise AccountingOffError(
            "sshare shows no associations: Slurm accounting (or fair-share) is off on this cluster",
            argv=argv,
            hint=ACCOUNTING_OFF_HINT,
        )
    return records


def my_shares(
    runner: Runner | None = None, *, user: str | None = None, problems: list[ParseError] | None = None
) -> list[ShareExplained]:
    """My fair-share in each account I can charge, explained (``user``: someone else's, by name).

    "Me" is the effective uid's name, never ``$USER``."""
    name = identity.current_user() if user is None else user
    records = share_records(runner, all_users=user is not None, problems=problems)
    explained = explain_shares(records, name)
    if not explained:
        raise AccountingOffError(
            f"sshare shows no association for user {name!r}: accounting knows no account you can charge",
            argv=sshare_argv(),
            hint="sandbox: it adds every user it admits; cluster: ask the admins to add "
            "you to an account (`sacctmgr add user`)",
        )
    return explained
