"""The scripted-answer table of a FakeRunner: argv patterns and the replies each one gives, in order.

A pattern lists the arguments: a string matches itself, :data:`ANY` one argument, a compiled regex one
argument it fully matches, and ``...`` any number of arguments.
"""

from __future__ import annotations

import re
from collections.abc import Sequence
from types import EllipsisType
from typing import Any

from slurmlab.testing.recordings import Reply

__all__ = ["ANY", "Pattern", "Script", "UnscriptedCommand", "matches_pattern"]


class _Any:
    def __repr__(self) -> str:
        return "ANY"


ANY: Any = _Any()
"""In an argv pattern: any one argument."""

Pattern = Sequence["str | re.Pattern[str] | EllipsisType | _Any"]


class UnscriptedCommand(AssertionError):
    """The FakeRunner was asked to run a command no script answers."""


def matches_pattern(pattern: Sequence[Any], argv: Sequence[str]) -> bool:
    if not pattern:
        return not argv
    head, rest = pattern[0], pattern[1:]
    if head is Ellipsis:
        return any(matches_pattern(rest, argv[i:]) for i in range(len(argv) + 1))
    if not argv:
        return False
    arg = argv[0]
    if head is ANY:
        ok = True
    elif isinstance(head, re.Pattern):
        ok = head.fullmatch(arg) is not None
    else:
        ok = head == arg
    return ok and matches_pattern(rest, argv[1:])


class Script:
    """The answers to one argv pattern, in order; the last one answers every later call."""

    def __init__(self, pattern: Pattern, replies: list[Reply]) -> None:
        self.pattern = list(pattern)
        self.replies = replies
        self.used = 0

    def then(
        self, reply: Reply | None = None, *, stdout: str = "", stderr: str = "", returncode: int = 0
    ) -> Script:
        """Add the answer the next call gets."""
        self.replies.append(reply if reply is not None else Reply(stdout, stderr, returncode))
        return self

    def matches(self, argv: Sequence[str]) -> bool:
        return matches_pattern(self.pattern, argv)

    def take(self) -> Reply:
        reply = self.replies[min(self.used, len(self.replies) - 1)]
        self.used += 1
        return reply

    def __repr__(self) -> str:
        return f"<Script {self.pattern!r}: {len(self.replies)} replies, used {self.used}>"
