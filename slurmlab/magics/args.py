"""Splitting a magic's line: our own options, then Slurm's, passed through untouched.

Everything a magic hands on ends up as an argv element of some process, so the text is checked
here first (:func:`check_text`): a NUL byte cannot be in an argv (Python refuses it deep inside
``subprocess`` with ``ValueError: embedded null byte``), a lone surrogate cannot be encoded, and
Linux refuses one argument over 128 KiB with ``E2BIG``. Job ids are checked with
:func:`job_id_option` before anything reaches Slurm or the kernel's shared poller.
"""

from __future__ import annotations

import argparse
import functools
import math
import os
import re
from collections.abc import Callable, Sequence
from typing import Any, TypeVar, cast

from IPython.core import magic_arguments as _ma
from IPython.core.error import UsageError
from IPython.core.magic import needs_local_scope, no_var_expand
from IPython.utils._process_common import arg_split
from IPython.utils.text import DollarFormatter

from slurmlab.core.slurm.jobid import check_job_id
from slurmlab.errors import RequestError

__all__ = [
    "MAX_ARG_BYTES",
    "MAX_EXPAND_CHARS",
    "MAX_LINE_BYTES",
    "argument",
    "check_range",
    "check_text",
    "expand_line",
    "job_id_option",
    "line_tokens",
    "magic_arguments",
    "parse_tokens",
    "raw_line",
    "split_line",
]

F = TypeVar("F", bound=Callable[..., Any])

# Linux's MAX_ARG_STRLEN is 32 pages (131,072 bytes) per argv element, its terminating NUL included.
MAX_ARG_BYTES = 131_071
# Nobody types a longer magic line; a bigger one is a paste accident or an attack, and would only
# meet E2BIG (or a Slurm limit) further down.
MAX_LINE_BYTES = 262_144

# C0 controls other than the whitespace that splits tokens, DEL, and C1 controls: none can be typed
# on purpose in a line, and besides NUL (which no argv can hold) they reach Slurm as job names or
# comments that repaint other users' terminals.
# IPython's $name pattern backtracks: expanding 4,000 characters of "$" takes seconds, 16,000 a minute.
MAX_EXPAND_CHARS = 2_000

_LINE_CONTROL = re.compile(r"[\x00-\x08\x0b\x0c\x0e-\x1f\x7f-\x9f]")
_NUL = re.compile(r"\x00")


def magic_arguments() -> Callable[[F], F]:
    """IPython's ``magic_arguments`` (builds the parser and the ``%magic?`` help), typed."""
    return cast(Callable[[F], F], _ma.magic_arguments())  # type: ignore[no-untyped-call]


def argument(*args: Any, **kwargs: Any) -> Callable[[F], F]:
    """IPython's ``argument`` decorator, typed."""
    return cast(Callable[[F], F], _ma.argument(*args, **kwargs))  # type: ignore[no-untyped-call]


class _HelpShown(Exception):
    """The line asked for help, which was printed: the magic ends there, with nothing run."""


# Slurm's own spelling of "help" per command: `%squeue -h`/`%sinfo -h` mean --noheader, never help
_SHORT_HELP = {"salloc", "srun"}


def raw_line(func: F) -> F:
    """Have IPython hand the magic its line unexpanded (with the caller's namespace): the magic
    checks the line, then expands ``$var`` and ``{expr}`` itself with :func:`expand_line`.

    A line asking for ``--help`` prints the magic's help at once (see :func:`split_line`)."""

    @functools.wraps(func)
    def magic(*args: Any, **kwargs: Any) -> Any:
        try:
            return func(*args, **kwargs)
        except _HelpShown:
            return None

    return cast(F, needs_local_scope(no_var_expand(magic)))


def _wants_help(name: str, tokens: Sequence[str]) -> bool:
    """``--help`` (``-h`` where Slurm's command means help by it) as the first token; for a magic that runs
    no command, anywhere — after a command it is the command's own option."""
    asks = {"--help", "-h"} if name in _SHORT_HELP else {"--help"}
    if not tokens:
        return False
    if tokens[0] in asks:
        return True
    return name != "srun" and any(t in asks for t in tokens)


# what slides and word processors turn "-" and quotes into
_DASHES = {
    "\u2010": "hyphen",
    "\u2011": "non-breaking hyphen",
    "\u2012": "figure dash",
    "\u2013": "en dash",
    "\u2014": "em dash",
    "\u2212": "minus sign",
    "\ufe63": "small hyphen-minus",
    "\uff0d": "fullwidth hyphen",
}
_QUOTES = {"\u2018": "'", "\u2019": "'", "\u201c": '"', "\u201d": '"', "\u00ab": '"', "\u00bb": '"'}


def _check_pasted_typography(tokens: Sequence[str]) -> None:
    """UsageError for an option typed with a typographic dash or quote (a paste from slides), with the fix."""
    for token in tokens:
        head = token.lstrip("".join(_DASHES))
        dashes = token[: len(token) - len(head)]
        if dashes and head:
            name = head.split("=", 1)[0]
            short = len(name) == 1 or (name[:1].isalpha() and name[1:].isdigit())  # -t, -N2 (none: "−=")
            # autocorrect turns "--" into one en/em dash: a long option lost a dash too
            fixed = "-" * len(dashes) if len(dashes) > 1 else ("-" if short else "--")
            names = " and ".join(sorted({_DASHES[d] for d in dashes}))
            raise UsageError(
                f"{token!r} starts with {names} ({', '.join(f'U+{ord(d):04X}' for d in dashes)}), not "
                f"the ASCII '-' options need (a paste from slides or a word processor?): "
                f"write {fixed + head!r}"
            )
        if token.startswith("-") and any(q in token for q in _QUOTES):
            fixed = "".join(_QUOTES.get(c, c) for c in token)
            raise UsageError(
                f"{token!r} holds typographic quotes, which reach Slurm as part of the value: "
                f"write {fixed!r} (plain quotes are removed as in a shell)"
            )


def _show_help(name: str, parser: argparse.ArgumentParser) -> None:
    print(parser.format_help().rstrip())
    print(
        f"\nOptions %{name} does not know go to Slurm unchanged; Slurm's own list: `man {name}`"
        if name in {"salloc", "srun", "squeue", "sinfo"}
        else ""
    )


def expand_line(magics: Any, line: str, local_ns: dict[str, Any] | None) -> str:
    """The line with IPython's ``$var``/``{expr}`` expansion, after checking what was typed.

    Same rules and namespaces as IPython's own expansion of a magic's line (a line it cannot
    expand stays as written); what differs is that the line is checked first, and that a long
    line with ``$`` or braces is refused instead of freezing the kernel in IPython's regex.
    """
    check_text(line)
    if not any(c in line for c in "${}"):
        return line  # nothing the formatter would change
    if len(line) > MAX_EXPAND_CHARS:
        raise UsageError(
            f"the line is {len(line):,} characters long and has $ or {{…}} to expand; IPython expands "
            f"at most {MAX_EXPAND_CHARS:,} in reasonable time: shorten it, write $$ for a literal $, "
            "or put long text in a %%srun cell or a file"
        )
    shell = getattr(magics, "shell", None)
    ns: dict[str, Any] = dict(getattr(shell, "user_ns", None) or {})
    ns.update(local_ns or {})
    try:
        return DollarFormatter().vformat(line, args=[], kwargs=ns)
    except Exception:  # IPython's rule: a line that does not expand (an unknown $name) stays as written
        return line


def _describe(ch: str) -> str:
    return "a NUL byte (\\x00)" if ch == "\x00" else f"the control character {ch!r}"


def check_text(text: str, where: str = "the line", *, cell: bool = False) -> None:
    """UsageError naming the first character of ``text`` that cannot reach a command's argv.

    A line refuses every control character but tab and newline; a ``%%srun`` cell (a script)
    refuses only what no argv can hold. Positions are 1-based, as an editor shows them.
    """
    found = (_NUL if cell else _LINE_CONTROL).search(text)
    if found is not None:
        at = found.start()
        raise UsageError(
            f"{where} has {_describe(found.group())} at character {at + 1} "
            f"(after {text[max(0, at - 20) : at]!r}): a command-line argument cannot carry it; "
            "delete it (it usually comes from a paste) and run again"
        )
    try:
        size = len(os.fsencode(text))
    except UnicodeEncodeError as exc:
        raise UsageError(
            f"{where} has the character {text[exc.start]!r} at character {exc.start + 1}, which cannot "
            "be encoded for a command line (a lone surrogate); retype that part"
        ) from None
    limit = MAX_ARG_BYTES if cell else MAX_LINE_BYTES
    if size > limit:
        fix = (
            "put the code in a file and run it with %srun bash FILE (or %srun python FILE)"
            if cell
            else "put long input in a file and pass its name"
        )
        raise UsageError(f"{where} is {size:,} bytes; a command line takes at most {limit:,}: {fix}")


def line_tokens(line: str) -> list[str]:
    """The line's arguments as a shell splits them (IPython's arg_split), or UsageError saying what is wrong."""
    check_text(line)
    try:
        tokens: list[str] = arg_split(line, posix=True, strict=True)
    except ValueError as exc:  # an unclosed quote, or a backslash at the very end
        raise UsageError(f"cannot split the line ({exc}): close the quote, or escape it") from None
    big = next((t for t in tokens if len(os.fsencode(t)) > MAX_ARG_BYTES), None)
    if big is not None:
        raise UsageError(
            f"one argument ({big[:20]!r}…) is over {MAX_ARG_BYTES:,} bytes, more than a "
            "command line takes: put it in a file and pass the file's name"
        )
    return tokens


def split_line(magics: Any, name: str, line: str) -> tuple[argparse.Namespace, list[str], list[str]]:
    """(our options, Slurm options, command) of the line of magic ``name`` of a Magics instance.

    Tokens after the first ``--`` are the command, verbatim, never read as our options. Before it,
    ``parse_known_args`` takes our options and leaves every Slurm flag, in order, for Slurm.
    """
    tokens = line_tokens(line)
    parser: argparse.ArgumentParser = getattr(type(magics), name).parser
    command: list[str] = []
    if "--" in tokens:
        cut = tokens.index("--")
        tokens, command = tokens[:cut], tokens[cut + 1 :]
    _check_pasted_typography(tokens)
    if _wants_help(name, tokens):
        # handled here: passed on, `salloc --help` prints to a pipe nobody reads and no job id comes back
        _show_help(name, parser)
        raise _HelpShown
    parser.allow_abbrev = False  # a Slurm flag must never be read as an abbreviation of ours
    ns, rest = parser.parse_known_args(tokens)
    return ns, rest, command


def job_id_option(value: str, option: str = "--jobid") -> str:
    """``value`` as a checked job id, or UsageError saying what a job id looks like."""
    try:
        return check_job_id(value)
    except RequestError as exc:
        raise UsageError(f"{option}: {exc}") from None


def check_range(value: float | None, option: str, low: float, high: float) -> None:
    """UsageError unless ``value`` (when given) is a finite number within [low, high]."""
    if value is None:
        return
    if not math.isfinite(value) or not low <= value <= high:
        raise UsageError(f"{option} must be between {low:g} and {high:g}, got {value:g}")


def parse_tokens(tokens: Sequence[str]) -> Any:
    """Slurm options as a GpuRequest (RequestProblems, a RequestError, when malformed)."""
    from slurmlab.core.request.request import parse_request

    return parse_request(list(tokens))
