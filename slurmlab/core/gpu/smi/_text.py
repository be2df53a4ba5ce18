"""What every nvidia-smi parser shares: cleaning a capture into lines, and the warning for a partial one."""

from __future__ import annotations

import re
import warnings
from collections.abc import Iterator

from slurmlab.core.gpu.standin_names import STANDIN_MARK
from slurmlab.errors import ParseError


class SmiParseWarning(UserWarning):
    """A capture parsed only in part (it was cut short)."""


ANSI_RE = re.compile(r"\x1b\[[0-9;?]*[ -/]*[@-~]")
GPU_RE = re.compile(r"^GPU(0|[1-9]\d{0,3})$")
# the GPU line of `nvidia-smi -L` and of `nvlink -s`/`-c`
GPU_LINE = re.compile(r"^GPU (\d+): (.+?) \(UUID: (GPU-[0-9A-Fa-f-]+)\)$")
_HUGE_NUMBER = re.compile(r"\d{19,}")
_NON_ASCII = re.compile(r"[^\x00-\x7f]")


def clean(text: str) -> list[str]:
    """The lines of a capture without ANSI escapes; refuses numbers nvidia-smi cannot print."""
    if not isinstance(text, str):
        raise ParseError("nvidia-smi output", repr(text)[:200], hint="pass the captured text as a str")
    huge = _HUGE_NUMBER.search(text)
    if huge:
        raise ParseError(
            "number in nvidia-smi output", huge.group(0)[:40], hint="no field of nvidia-smi is this long"
        )
    # \d and int() take other scripts' digits, isdigit() even superscripts int() refuses;
    # nvidia-smi prints ASCII digits only, so any other digit is corruption
    for m in _NON_ASCII.finditer(text):
        if m.group(0).isdigit():
            raise ParseError(
                "number in nvidia-smi output", m.group(0), hint="nvidia-smi prints ASCII digits only"
            )
    lines = ANSI_RE.sub("", text).replace("\r\n", "\n").replace("\r", "\n").split("\n")
    # the sandbox's stand-in nvidia-smi says what it is on lines of its own: they are not the tool's output
    return [ln for ln in lines if not ln.lstrip().startswith(STANDIN_MARK)]


def nonblank_lines(text: str) -> Iterator[str]:
    """The lines of :func:`clean` that hold anything, stripped."""
    for raw in clean(text):
        s = raw.strip()
        if s:
            yield s


def warn(message: str) -> None:
    """Warn from a public parser: the warning points at the code that called it."""
    warnings.warn(message, SmiParseWarning, stacklevel=3)
