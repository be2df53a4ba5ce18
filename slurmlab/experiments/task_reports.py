"""One JSON report per task of a step, read back whole from ``srun --label`` output.

srun forwards a task's output in messages of at most 1 KiB and writes the messages of different
tasks in the order they arrive, so a report longer than that interleaves with the others' (the
verify step broke in 3 of 20 runs at 4 tasks, 3 of 10 at 8). Under ``--label`` srun prefixes
every piece of every message with its task id (``3: ``, padded to the widest id) and ends a piece
that did not end a line with a newline of its own, so one task's pieces can be put back in order;
but an added newline cannot be told from a printed one. The task therefore prints its report
between two markers, as JSON that never holds a raw newline, and the reader joins the task's
pieces without newlines and takes what lies between the markers.

Pure functions: the step is run elsewhere; this reads the lines it printed. The printing half
(the markers and :func:`frame`) runs in the tasks: :mod:`slurmlab.experiments.node.framing`.
"""

from __future__ import annotations

import json
import re
from collections.abc import Iterable, Sequence
from typing import Any

from slurmlab.errors import ExperimentError
from slurmlab.experiments.node.framing import BEGIN, END, frame

__all__ = ["BEGIN", "END", "LabelledOutput", "frame", "has_reports", "read_reports", "split_labelled"]

# srun's "%*d: " prefix; a piece may be empty ("3: "), and a stripped trailing blank leaves "3:"
_LABEL = re.compile(r" *(\d{1,7}):(?: (.*))?", re.DOTALL)
_SHOWN = 160  # characters of a broken report quoted in an error, each side
_LISTED = 4  # tasks named one by one in an error; the rest are counted


class LabelledOutput:
    """A step's labelled stdout, split per task: the pieces in arrival order, and unlabelled lines."""

    def __init__(self) -> None:
        self.pieces: dict[int, list[str]] = {}
        self.other: list[str] = []

    def text(self, task: int) -> str:
        return "".join(self.pieces.get(task, ()))


def split_labelled(lines: Iterable[str]) -> LabelledOutput:
    """Group ``srun --label`` lines by task id (lines without a label go to ``other``)."""
    out = LabelledOutput()
    for line in lines:
        m = _LABEL.fullmatch(line)
        if m is None:
            out.other.append(line)
            continue
        out.pieces.setdefault(int(m.group(1)), []).append(m.group(2) or "")
    return out


def has_reports(lines: Iterable[str]) -> bool:
    """True when any task of the step began a report (so the step ran its command)."""
    return any(BEGIN in line for line in lines)


def _quote(text: str, at: int | None = None) -> str:
    """What arrived, bounded: its start, and its end (or the place where the decoder stopped)."""
    if len(text) <= 2 * _SHOWN:
        return repr(text)
    stop = len(text) if at is None else min(len(text), max(at + _SHOWN // 2, 2 * _SHOWN))
    quoted = f"{text[:_SHOWN]!r} … ({stop - 2 * _SHOWN} characters) … {text[stop - _SHOWN : stop]!r}"
    return quoted + (f" … ({len(text) - stop} more)" if stop < len(text) else "")


def _one(task: int, text: str) -> tuple[dict[str, Any] | None, str | None]:
    """The task's report, or why there is none (naming the task and quoting what arrived)."""
    start = text.find(BEGIN)
    if start < 0:
        seen = f"it printed {_quote(text)}" if text.strip() else "it printed nothing"
        return None, f"task {task} sent no report ({seen})"
    body_at = start + len(BEGIN)
    end = text.find(END, body_at)
    if end < 0:
        body = text[body_at:]
        return None, f"task {task}'s report was cut short after {len(body)} characters: {_quote(body)}"
    body = text[body_at:end]
    try:
        data = json.loads(body)
    except (ValueError, RecursionError) as exc:
        pos = getattr(exc, "pos", None)
        return None, f"task {task}'s report arrived broken ({exc}): {_quote(body, pos)}"
    if not isinstance(data, dict):
        return None, f"task {task}'s report is not a JSON object: {_quote(body)}"
    if "error" in data:
        return None, f"task {task} failed: {data['error']}"
    return data, None


def read_reports(
    stdout: Sequence[str],
    tasks: int,
    *,
    stderr: Sequence[str] = (),
    what: str = "the step",
    hint: str | None = None,
) -> list[dict[str, Any]]:
    """The reports of tasks ``0..tasks-1``, in task order, from the step's ``srun --label`` stdout.

    Raises :class:`ExperimentError` naming every task whose report is missing, cut short, broken
    or an error, with what arrived from it (and its last stderr lines).
    """
    out = split_labelled(stdout)
    errs = split_labelled(stderr)
    extra = sorted(t for t in out.pieces if t >= tasks and BEGIN in out.text(t))
    if extra:
        raise ExperimentError(
            f"{what} ran more tasks than the {tasks} expected (reports from task(s) "
            f"{', '.join(map(str, extra))})",
            hint="give the task count once: in tasks= or in the step options",
        )
    reports: list[dict[str, Any]] = []
    problems: dict[int, str] = {}
    # only the tasks that printed are walked, and only the first silent ones are named: a task
    # count typed as 10**9 must not cost a loop of that length
    for task in sorted(t for t in set(out.pieces) | set(errs.pieces) if t < tasks):
        data, why = _one(task, out.text(task))
        if data is None:
            problems[task] = str(why)
        else:
            reports.append(data)
    silent = tasks - len(reports) - len(problems)
    task = 0
    while silent and len(problems) < _LISTED and task < tasks:
        if task not in out.pieces and task not in errs.pieces:
            problems[task] = f"task {task} sent no report (it printed nothing)"
        task += 1
    if problems:
        shown = []
        for task, why in sorted(problems.items())[:_LISTED]:
            said = [p for p in errs.pieces.get(task, ()) if p.strip()][-2:]
            shown.append(why + (f"; its stderr: {' | '.join(said)}" if said else ""))
        left = tasks - len(reports) - len(shown)
        if left:
            shown.append(f"… and {left} more")
        unlabelled = [ln for ln in errs.other if ln.strip()][-2:]
        tail = f" (srun: {' | '.join(unlabelled)})" if unlabelled else ""
        raise ExperimentError(
            f"{what}: {len(reports)} of {tasks} task report(s) arrived whole{tail}:\n  " + "\n  ".join(shown),
            hint=hint or "run the step again; if the same task fails, check its node",
        )
    return reports
