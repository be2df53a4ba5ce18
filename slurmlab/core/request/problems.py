"""What is wrong with a request, in words: each problem names the offending value and its fix.

:class:`RequestProblems` gathers them all into one RequestError, so a user fixes every problem in one go.
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from dataclasses import dataclass

from slurmlab.errors import RequestError

__all__ = ["BadValue", "Problem", "RequestProblems", "join_names", "raise_problems"]


@dataclass(frozen=True)
class Problem:
    """One thing wrong with a request: what (naming the offending value) and the fix."""

    message: str
    hint: str


class RequestProblems(RequestError):
    """One or more problems with a request; ``problems`` lists each with its own fix."""

    def __init__(self, problems: Sequence[Problem]) -> None:
        self.problems = tuple(problems)
        if len(self.problems) == 1:
            only = self.problems[0]
            super().__init__(only.message, hint=only.hint)
            return
        lines = [f"{len(self.problems)} problems with the request:"]
        for n, p in enumerate(self.problems, 1):
            lines.append(f"  {n}. {p.message}\n     fix: {p.hint}")
        super().__init__("\n".join(lines), hint="fix each problem listed above, then submit again")


def raise_problems(problems: Sequence[Problem]) -> None:
    """Raise all problems at once, or nothing when the list is empty."""
    if problems:
        raise RequestProblems(problems)


class BadValue(Exception):
    """A value that does not parse; the request parser turns it into a Problem naming the option."""

    def __init__(self, message: str, hint: str) -> None:
        super().__init__(message)
        self.message = message
        self.hint = hint


def join_names(names: Iterable[str]) -> str:
    """Names as a problem lists them: ``a, b``; an empty name is ``(untyped)``, no names ``none``."""
    shown = [n if n else "(untyped)" for n in names]
    return ", ".join(shown) if shown else "none"
