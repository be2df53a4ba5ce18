"""The seats of a workshop (pure): their Unix names and the secrets the teacher hands out.

Names are a prefix and a number, ``student01`` … ``student30``, padded to the widest number so that they sort
as the room does; a name already on the machine is refused (:func:`taken`), so a workshop never adopts (and
later deletes) an account that was not its own.
"""

from __future__ import annotations

import re
import secrets
from collections.abc import Callable, Sequence

__all__ = ["MAX_SEATS", "PASSWORD_MODES", "check_prefix", "seat_names", "seat_secrets", "taken"]

MAX_SEATS = 200
PASSWORD_MODES = ("shared", "per-seat")
# a portable Unix user name (POSIX, useradd's default NAME_REGEX): lower case, starts with a letter; short
# enough that the widest number still fits the 32 characters of a user name
_PREFIX = re.compile(r"^[a-z][a-z0-9_]{0,23}$")


def check_prefix(prefix: str) -> str:
    """``prefix`` when it makes valid Unix user names, else ValueError saying what would."""
    if not _PREFIX.match(prefix):
        raise ValueError(
            f"the seat prefix {prefix!r} would not make Unix user names: use 1-24 lower-case letters, digits "
            "or _, starting with a letter (e.g. student)"
        )
    return prefix


def seat_names(prefix: str, count: int) -> tuple[str, ...]:
    """``count`` seat names: ``student01`` … (two digits at least, more when ``count`` needs them)."""
    check_prefix(prefix)
    if isinstance(count, bool) or not isinstance(count, int) or not 1 <= count <= MAX_SEATS:
        raise ValueError(f"a workshop has 1 to {MAX_SEATS} seats, not {count!r}")
    width = max(2, len(str(count)))
    return tuple(f"{prefix}{i:0{width}d}" for i in range(1, count + 1))


def taken(names: Sequence[str], exists: Callable[[str], bool]) -> list[str]:
    """The ``names`` that ``exists`` says are users already (a Unix user, or a group of that name)."""
    return [n for n in names if exists(n)]


def seat_secrets(names: Sequence[str], mode: str) -> dict[str, str]:
    """name -> the password that seat logs in with: one for the whole class (``shared``, easy to write on a
    board) or one each (``per-seat``, handed out on slips)."""
    if mode not in PASSWORD_MODES:
        raise ValueError(f"--password-mode is one of {', '.join(PASSWORD_MODES)}, not {mode!r}")
    if mode == "shared":
        one = _spoken()
        return dict.fromkeys(names, one)
    return {n: _spoken() for n in names}


def _spoken() -> str:
    # three groups of four from an alphabet without look-alikes (0/O, 1/l/I): read aloud or copied from a slip
    alphabet = "abcdefghjkmnpqrstuvwxyz23456789"
    return "-".join("".join(secrets.choice(alphabet) for _ in range(4)) for _ in range(3))
