"""``sshare`` (fair-share) output as records.

Read from ``sshare --parsable2 --noheader --format=<",".join(SSHARE_FIELDS)>``. sshare prints the association
tree: the ``root`` line, then each account (no user; its name indented one space per level, in the parsable
form too) and under it the users' lines (account and user). Seen on 22.05, 24.11 and 26.05 (recordings in
``tests/data/slurm/<version>/a0*_sshare_*``):

- the cluster's ``root`` line has no RawShares and no FairShare; account lines have no FairShare;
- ``LevelFS`` is ``inf`` for an association that used nothing; RawShares may be ``parent`` (the user shares
  its account's);
- ``GrpTRESRaw`` holds the decayed usage per TRES in TRES-minutes (``cpu=12,mem=2048,…,gres/gpu=3``).
"""

from __future__ import annotations

import math
import re
from dataclasses import dataclass, field

from slurmlab.errors import ParseError

__all__ = ["SSHARE_FIELDS", "ShareRecord", "parse_sshare"]

# the --format names, in the order parse_sshare reads them; all exist from Slurm 22.05 on
SSHARE_FIELDS = (
    "Account",
    "User",
    "RawShares",
    "NormShares",
    "RawUsage",
    "NormUsage",
    "EffectvUsage",
    "FairShare",
    "LevelFS",
    "GrpTRESRaw",
)

# plain decimals only: float() would also take "nan", "1e999", "1_0" and other scripts' digits
_NUMBER = re.compile(r"[0-9]{1,20}(?:\.[0-9]{1,12})?")
_NAME = re.compile(r"[^\s|]{1,256}")
_TRES_KEY = re.compile(r"[a-z][a-z0-9_]*(?:/[A-Za-z0-9_.:-]+)?")


@dataclass(frozen=True)
class ShareRecord:
    """One association's line of ``sshare``: an account (``user`` None) or a user in an account.

    ``raw_shares`` None with ``parent_shares`` True: the user shares the account's ("parent").
    ``fair_share`` is Slurm's fair-share factor, 0..1 (None on account lines); ``level_fs`` its ratio of
    shares to usage at this level (``math.inf`` for no usage). ``usage_tres``: decayed usage in TRES-minutes.
    """

    account: str
    user: str | None
    depth: int
    raw_shares: int | None
    norm_shares: float | None
    raw_usage: int | None
    norm_usage: float | None
    effective_usage: float | None
    fair_share: float | None
    level_fs: float | None
    usage_tres: tuple[tuple[str, float], ...] = field(default=())
    parent_shares: bool = False

    @property
    def gpu_minutes(self) -> float | None:
        """GPU-minutes charged (decayed), from ``gres/gpu`` in GrpTRESRaw; None where it is not accounted."""
        return dict(self.usage_tres).get("gres/gpu")

    @property
    def is_user(self) -> bool:
        return self.user is not None


def parse_sshare(text: str, *, problems: list[ParseError] | None = None) -> list[ShareRecord]:
    """The records of ``sshare --parsable2 --noheader --format=<SSHARE_FIELDS>`` output, in its order.

    A line that does not parse raises :class:`ParseError`, or with ``problems`` a list, is left out and
    reported there (the other lines are still returned).
    """
    if not isinstance(text, str):
        raise ParseError("sshare output", repr(text), hint="expected text")
    out: list[ShareRecord] = []
    for line in text.splitlines():
        if not line.strip():
            continue
        try:
            out.append(_record(line))
        except ParseError as err:
            if problems is None:
                raise
            problems.append(err)
    return out


def _record(line: str) -> ShareRecord:
    cells = line.split("|")
    if len(cells) != len(SSHARE_FIELDS):
        raise ParseError(
            "sshare line",
            line,
            hint=f"expected {len(SSHARE_FIELDS)} '|'-separated fields ({','.join(SSHARE_FIELDS)}), "
            f"found {len(cells)}",
        )
    account_cell, user_cell, raw_shares, norm_shares, raw_usage, norm_usage, eff, fair, level, tres = cells
    account = account_cell.lstrip(" ")
    if _NAME.fullmatch(account) is None:
        raise ParseError("sshare account", line, hint="an account name is one word")
    user = user_cell or None
    if user is not None and _NAME.fullmatch(user) is None:
        raise ParseError("sshare user", line, hint="a user name is one word")
    record_id = f"{account}/{user}" if user else account
    try:
        parent = raw_shares == "parent"
        return ShareRecord(
            account=account,
            user=user,
            depth=len(account_cell) - len(account),
            raw_shares=None if parent else _whole(raw_shares, "RawShares"),
            norm_shares=_fraction(norm_shares, "NormShares"),
            raw_usage=_whole(raw_usage, "RawUsage"),
            norm_usage=_fraction(norm_usage, "NormUsage"),
            effective_usage=_fraction(eff, "EffectvUsage"),
            fair_share=_fraction(fair, "FairShare"),
            level_fs=_level(level),
            usage_tres=_tres_minutes(tres),
            parent_shares=parent,
        )
    except ParseError as err:
        raise err.for_record(record_id) from None


def _whole(text: str, what: str) -> int | None:
    if text == "":
        return None
    if not (text.isascii() and text.isdigit() and len(text) <= 20):
        raise ParseError(f"sshare {what}", text, hint="expected a whole number")
    return int(text)


def _number(text: str, what: str) -> float | None:
    if text == "":
        return None
    if _NUMBER.fullmatch(text) is None:
        raise ParseError(f"sshare {what}", text, hint="expected a plain decimal number")
    return float(text)


def _fraction(text: str, what: str) -> float | None:
    """A share or usage ratio: 0..1 (an effective usage a little over 1 is rounding, kept as printed)."""
    value = _number(text, what)
    if value is not None and value > 1.5:
        raise ParseError(f"sshare {what}", text, hint="expected a fraction between 0 and 1")
    return value


def _level(text: str) -> float | None:
    # LevelFS = shares / usage at this level: no usage gives "inf"
    return math.inf if text.lower() == "inf" else _number(text, "LevelFS")


def _tres_minutes(text: str) -> tuple[tuple[str, float], ...]:
    """``cpu=12,mem=2048,gres/gpu=3`` -> ((name, TRES-minutes), ...); empty for an empty cell.

    Not :class:`slurmlab.core.slurm.tres.Tres`: these are usage totals per TRES (memory in MiB-minutes, and
    fs/disk, energy, pages …), not an allocation to read counts, sizes and GRES types from."""
    if text in ("", "(null)"):
        return ()
    out: list[tuple[str, float]] = []
    for piece in text.split(","):
        key, eq, value = piece.partition("=")
        if not eq or _TRES_KEY.fullmatch(key) is None:
            raise ParseError("sshare GrpTRESRaw", text, hint=f"the entry {piece!r} is not NAME=NUMBER")
        number = _number(value, f"GrpTRESRaw {key}")
        out.append((key, 0.0 if number is None else number))
    return tuple(out)
