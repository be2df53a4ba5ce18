"""Slurm times and durations.

API::

    parse_duration(text) -> int | None      # seconds; "1-02:03:04", "01:00:00", "30:00", "5", None = UNLIMITED
    parse_optional_duration(text) -> (present, seconds | None)
    format_duration(seconds | None, unlimited="UNLIMITED", clamp=False) -> str
                                            # inverse of parse_duration; the one [D-]HH:MM:SS formatter
    duration_in_words(seconds) -> str       # "1 day 2 hours" for sentences
    parse_timestamp(text, tz=None) -> datetime | None   # "2026-11-29T15:04:03" (cluster-local) ; N/A/Unknown/None -> None
    from_epoch(n) -> datetime | None        # 0 means "not set" in Slurm JSON

Durations follow Slurm's ``[days-]hours:minutes:seconds`` / ``minutes:seconds`` / ``minutes``
rules. ``INVALID``, ``NOT_SET`` and ``N/A`` are "no value" (None from parse_optional_duration).
"""

from __future__ import annotations

import re
from datetime import datetime, timezone, tzinfo

from slurmlab.errors import ParseError

__all__ = [
    "duration_in_words",
    "format_duration",
    "from_epoch",
    "parse_duration",
    "parse_optional_duration",
    "parse_timestamp",
]

_UNLIMITED = {"UNLIMITED", "INFINITE", "Partition_Limit", "NONE"}
_NO_VALUE = {"INVALID", "NOT_SET", "N/A", "", "(null)"}
# ASCII digits, few enough for int(); a duration of 10^18 days is corrupt output, not a limit
_DURATION = re.compile(r"(?:([0-9]{1,12})-)?([0-9]{1,12})(?::([0-9]{1,12}))?(?::([0-9]{1,12}))?")


def parse_duration(text: str) -> int | None:
    """Seconds in a Slurm duration; None for UNLIMITED. Raises ParseError otherwise."""
    raw = text.strip()
    if raw in _UNLIMITED:
        return None
    m = _DURATION.fullmatch(raw)
    if m is None:
        raise ParseError("duration", text, hint="expected [D-]HH:MM:SS, MM:SS, MM or UNLIMITED")
    days_s, a, b, c = m.groups()
    days = int(days_s) if days_s else 0
    if c is not None:
        h, mi, s = int(a), int(b), int(c)
    elif b is not None:
        # "D-HH:MM" has hours first; "MM:SS" alone has minutes first
        h, mi, s = (int(a), int(b), 0) if days_s else (0, int(a), int(b))
    else:
        h, mi, s = (int(a), 0, 0) if days_s else (0, int(a), 0)
    return ((days * 24 + h) * 60 + mi) * 60 + s


def parse_optional_duration(text: str) -> tuple[bool, int | None]:
    """(present, seconds): INVALID/NOT_SET/N/A -> (False, None); UNLIMITED -> (True, None)."""
    if text.strip() in _NO_VALUE:
        return False, None
    return True, parse_duration(text)


def format_duration(seconds: float | None, *, unlimited: str = "UNLIMITED", clamp: bool = False) -> str:
    """``[D-]HH:MM:SS`` (Slurm's own form; fractions of a second are dropped). None -> ``unlimited``
    (``"INFINITE"`` for a request, ``"-"`` for "not known"). A negative duration raises ParseError,
    unless ``clamp`` shows it as 0 (a countdown that has just run out)."""
    if seconds is None:
        return unlimited
    if seconds < 0:
        if not clamp:
            raise ParseError("duration", str(seconds), hint="a duration cannot be negative")
        seconds = 0
    days, rest = divmod(int(seconds), 86400)
    h, rest = divmod(rest, 3600)
    m, s = divmod(rest, 60)
    core = f"{h:02d}:{m:02d}:{s:02d}"
    return f"{days}-{core}" if days else core


def duration_in_words(seconds: int) -> str:
    """``1 day 2 hours 3 seconds``; "" for 0 (the caller says what no time means there)."""
    days, rest = divmod(int(seconds), 86400)
    hours, rest = divmod(rest, 3600)
    minutes, secs = divmod(rest, 60)
    return " ".join(
        f"{n} {word}{'s' if n != 1 else ''}"
        for n, word in ((days, "day"), (hours, "hour"), (minutes, "minute"), (secs, "second"))
        if n
    )


def parse_timestamp(text: str, tz: tzinfo | None = None) -> datetime | None:
    """A Slurm text timestamp. Slurm prints the cluster's local time without a zone: ``tz``
    names that zone; None means this machine's local zone. Unknown/None/N/A -> None."""
    raw = text.strip()
    if raw in {"Unknown", "None", "N/A", "(null)", "", "NONE"}:
        return None
    try:
        if not raw.isascii():
            raise ValueError(raw)  # strptime takes other scripts' digits; Slurm prints none
        naive = datetime.strptime(raw, "%Y-%m-%dT%H:%M:%S")
        return naive.replace(tzinfo=tz) if tz is not None else naive.astimezone()
    except (ValueError, OverflowError, OSError):
        # astimezone() fails on dates the C library cannot place (year 1, year 9999)
        raise ParseError("timestamp", text, hint="expected YYYY-MM-DDTHH:MM:SS") from None


def from_epoch(value: int | None) -> datetime | None:
    """Slurm JSON epoch seconds (0 = not set)."""
    if value is None or value == 0:
        return None
    try:
        return datetime.fromtimestamp(value, tz=timezone.utc)
    except (OverflowError, OSError, ValueError):
        raise ParseError(
            "epoch time", str(value)[:40], hint="not a time this machine can represent"
        ) from None
