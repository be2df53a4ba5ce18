"""A query is a pair (argv, parser), run by :func:`run_query` or its asyncio twin :func:`arun_query`, so the
sync and async APIs of :mod:`slurmlab.slurm.queries` share one definition; plus what every parser of a
listing shares: reading Slurm's JSON, and a list that keeps the records it could not read."""

from __future__ import annotations

import json
from collections.abc import Callable, Iterable
from dataclasses import dataclass
from typing import Generic, TypeVar

from slurmlab.core.slurm.models import Job
from slurmlab.errors import ParseError, SlurmError
from slurmlab.slurm.runner import Runner, RunResult, get_runner

__all__ = ["JobList", "Listing", "Query", "arun_query", "read_json", "run_query"]

T = TypeVar("T")


@dataclass(frozen=True)
class Query(Generic[T]):
    argv: tuple[str, ...]
    parse: Callable[[RunResult], T]


def run_query(q: Query[T], runner: Runner | None) -> T:
    return q.parse((runner or get_runner()).run(list(q.argv)))


async def arun_query(q: Query[T], runner: Runner | None) -> T:
    return q.parse(await (runner or get_runner()).arun(list(q.argv)))


def read_json(result: RunResult) -> dict[str, object]:
    """The JSON document a command printed; the errors Slurm reports inside it become a SlurmError."""
    try:
        doc = json.loads(result.stdout)
    except (json.JSONDecodeError, RecursionError) as exc:
        raise ParseError(
            f"JSON from {' '.join(result.argv[:4])}",
            result.stdout[:400],
            hint="run the command by hand to see what it printed",
        ) from exc
    if not isinstance(doc, dict):
        raise ParseError(f"JSON from {' '.join(result.argv[:4])}", result.stdout[:400])
    errors = doc.get("errors") or []
    if errors:
        if not isinstance(errors, list):
            errors = [errors]
        msg = "; ".join(
            str(e.get("description") or e.get("error") or e) if isinstance(e, dict) else str(e)
            for e in errors
            if e
        )
        raise SlurmError(f"{result.argv[0]} reported: {msg}", argv=result.argv, stderr=msg)
    return doc


class Listing(list[T]):
    """The records of a listing, plus those that could not be read (``problems``: ParseErrors,
    each naming its record), so one bad record never takes a listing down or goes unseen."""

    def __init__(self, items: Iterable[T] = (), problems: Iterable[ParseError] = ()) -> None:
        super().__init__(items)
        self.problems: list[ParseError] = list(problems)


JobList = Listing[Job]
