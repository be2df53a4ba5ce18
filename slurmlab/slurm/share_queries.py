"""Fair-share from Slurm accounting: ``sshare`` through the one Runner, with a timeout.

A cluster without accounting storage has no associations to share: sshare then fails (or, on some versions,
prints nothing), and :class:`~slurmlab.errors.AccountingOffError` says how to turn accounting on.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Protocol

from slurmlab.core.diagnosis.fairshare import ShareExplained, explain_shares, share_story
from slurmlab.core.slurm.sshare import SSHARE_FIELDS, ShareRecord, parse_sshare
from slurmlab.errors import AccountingOffError, ParseError
from slurmlab.slurm import identity
from slurmlab.slurm.accounting_queries import ACCOUNTING_OFF_HINT, run_accounting
from slurmlab.slurm.runner import Runner

__all__ = [
    "NO_ACCOUNTING_WORDS",
    "SSHARE_TIMEOUT",
    "ShareStory",
    "my_shares",
    "share_records",
    "sshare_argv",
    "story_of_my_accounts",
]

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


NO_ACCOUNTING_WORDS = (
    "this cluster keeps no accounting: fair-share does not order jobs here (nothing records who used what), "
    "and no per-user GPU cap (QOS) holds a job; pending jobs wait for resources, a reservation, or in the order "
    "they came"
)


class _Printer(Protocol):  # what IPython's pretty printer offers _repr_pretty_ here
    def text(self, obj: str) -> None: ...


@dataclass(frozen=True)
class ShareStory:
    """Fair-share told in words (``%sshare --class``): ``accounting`` False when this cluster keeps none, and
    then ``lines`` say what is missing and how to turn it on, rather than raise."""

    user: str
    accounting: bool
    lines: tuple[str, ...]

    def text(self) -> str:
        return "\n".join(self.lines)

    def __str__(self) -> str:
        return self.text()

    def _repr_pretty_(
        self, printer: _Printer, cycle: bool
    ) -> None:  # IPython's display of the story: its words
        printer.text(self.text())


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


def story_of_my_accounts(
    runner: Runner | None = None, *, problems: list[ParseError] | None = None
) -> ShareStory:
    """My fair-share and who used what in each account I can charge, in words, from one ``sshare --all``.

    Accounting off (or slurmdbd not answering) is a state of the cluster, not a mistake: the story says so and
    how to see fair-share, instead of raising. Lines sshare printed that do not parse go to ``problems``."""
    name = identity.current_user()
    try:
        records = share_records(runner, all_users=True, problems=problems)
    except AccountingOffError as exc:
        first = (
            NO_ACCOUNTING_WORDS
            if "does not answer" not in exc.message
            else "Slurm's accounting does not answer now: fair-share cannot be shown"
        )
        lines = (first, f"(sshare: {exc.message})", f"to see fair-share: {exc.hint or ACCOUNTING_OFF_HINT}")
        return ShareStory(name, False, lines)
    told = share_story(records, name) or [
        f"sshare shows no association for user {name!r}: accounting knows no account you can charge"
    ]
    return ShareStory(name, True, tuple(told))
