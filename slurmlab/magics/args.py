"""Splitting a magic's line: our own options, then Slurm's, passed through untouched."""

from __future__ import annotations

import argparse
from collections.abc import Callable, Sequence
from typing import Any, TypeVar, cast

from IPython.core import magic_arguments as _ma
from IPython.core.error import UsageError
from IPython.utils._process_common import arg_split

__all__ = ["argument", "magic_arguments", "parse_tokens", "split_line"]

F = TypeVar("F", bound=Callable[..., Any])


def magic_arguments() -> Callable[[F], F]:
    """IPython's ``magic_arguments`` (builds the parser and the ``%magic?`` help), typed."""
    return cast(Callable[[F], F], _ma.magic_arguments())  # type: ignore[no-untyped-call]


def argument(*args: Any, **kwargs: Any) -> Callable[[F], F]:
    """IPython's ``argument`` decorator, typed."""
    return cast(Callable[[F], F], _ma.argument(*args, **kwargs))  # type: ignore[no-untyped-call]


def split_line(magics: Any, name: str, line: str) -> tuple[argparse.Namespace, list[str], list[str]]:
    """(our options, Slurm options, command) of the line of magic ``name`` of a Magics instance.

    Tokens after the first ``--`` are the command, verbatim, never read as our options. Before it,
    ``parse_known_args`` takes our options and leaves every Slurm flag, in order, for Slurm.
    """
    try:
        tokens = arg_split(line, posix=True, strict=True)
    except ValueError as exc:  # an unclosed quote
        raise UsageError(f"cannot split the line ({exc}): close the quote, or escape it") from None
    parser: argparse.ArgumentParser = getattr(type(magics), name).parser
    command: list[str] = []
    if "--" in tokens:
        cut = tokens.index("--")
        tokens, command = tokens[:cut], tokens[cut + 1 :]
    parser.allow_abbrev = False  # a Slurm flag must never be read as an abbreviation of ours
    ns, rest = parser.parse_known_args(tokens)
    return ns, rest, command


def parse_tokens(tokens: Sequence[str]) -> Any:
    """Slurm options as a GpuRequest (RequestProblems, a RequestError, when malformed)."""
    from slurmlab.core.request import parse_request

    return parse_request(list(tokens))
