"""When a running allocation's time left deserves a warning, as pure logic.

Two thresholds, as the issue asks: a tenth of the time limit left, and five minutes left. Each is reported
once (the panel prints a line into the cell's output the moment it is crossed, and stays amber from then on),
so a caller keeps the last level it announced and asks :func:`crossed` whether a new one was reached.

``--signal=[B:]SIG[@TIME]`` (Slurm's own option) asks Slurm to send SIG to the job's steps (``B:`` only to
the batch shell) TIME seconds before the limit (60 when ``@TIME`` is left out): :func:`explain_signal` says
that in words for the dry-run of ``%salloc``.
"""

from __future__ import annotations

import re
from collections.abc import Sequence
from dataclasses import dataclass

from slurmlab.core.slurm.timefmt import duration_in_words

__all__ = [
    "FIVE_MINUTES",
    "LEVELS",
    "TimeWarning",
    "crossed",
    "explain_signal",
    "signal_note",
    "time_warning",
]

FIVE_MINUTES = 300.0
TENTH = 0.10
# ordered: a later level is more urgent
LEVELS = ("tenth", "five-minutes")

_SIGNAL = re.compile(r"^(?P<batch>[BR]:)?(?P<sig>(?:SIG)?[A-Z0-9]+|\d+)(?:@(?P<time>\d+))?$")


@dataclass(frozen=True)
class TimeWarning:
    level: str  # one of LEVELS
    message: str  # one line, for the panel and the cell's output


def time_warning(left: float | None, limit: float | None) -> TimeWarning | None:
    """The warning due with ``left`` seconds left of a ``limit`` of seconds (None: no limit, nothing due)."""
    if left is None or limit is None or limit <= 0:
        return None
    left = max(0.0, left)
    words = duration_in_words(int(left)) or "under a second"
    if left <= FIVE_MINUTES:
        return TimeWarning(
            "five-minutes",
            f"Time almost up: {words} left — Slurm ends the allocation at its time limit; save your work now",
        )
    if left <= TENTH * limit:
        return TimeWarning(
            "tenth",
            f"Time running out: {words} left (under 10 % of the "
            f"{duration_in_words(int(limit))} limit) — save your work soon",
        )
    return None


def crossed(previous: str | None, current: TimeWarning | None) -> bool:
    """Whether ``current`` is a level not announced yet (``previous``: the last level announced, or None)."""
    if current is None:
        return False
    if previous is None:
        return True
    return LEVELS.index(current.level) > LEVELS.index(previous)


def explain_signal(value: str) -> str:
    """``--signal`` in words; ValueError naming the form for a value Slurm would refuse."""
    m = _SIGNAL.match(value.strip().upper())
    if m is None:
        raise ValueError(f"--signal={value!r} is not Slurm's form [B:]SIG[@TIME] (e.g. --signal=USR1@120)")
    sig = m["sig"] if m["sig"].isdigit() else "SIG" + m["sig"].removeprefix("SIG")
    seconds = int(m["time"]) if m["time"] else 60
    if seconds > 65535:
        raise ValueError(f"--signal={value}: Slurm allows at most 65535 seconds before the limit")
    to = "the batch shell only" if m["batch"] == "B:" else "the job's steps"
    return (
        f"--signal={value}: Slurm sends {sig} to {to} about {duration_in_words(seconds) or '0 seconds'} "
        "before the time limit (give or take a minute), so a step can save its work"
    )


def signal_note(extra: Sequence[Sequence[str]]) -> str:
    """The sentence a dry run adds for a ``--signal`` among a request's unmodelled options (``extra``, one
    group of tokens per option); "" when there is none. A value Slurm would refuse is said as such."""
    for group in extra:
        if group and group[0].startswith("--signal"):
            value = group[0].partition("=")[2] if "=" in group[0] else (group[1] if len(group) > 1 else "")
            try:
                return explain_signal(value) + "."
            except ValueError as exc:
                return f"{exc}."
    return ""
