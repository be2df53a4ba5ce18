"""The one framing of what a node program's tasks print: each task prints its report as one framed line, and the
reader puts every task's report back together from ``srun --label`` output.

srun forwards a task's output in messages of at most 1 KiB and writes the messages of different tasks in the order
they arrive, so a report longer than that interleaves with the others' (the verify step broke in 3 of 20 runs at 4
tasks, 3 of 10 at 8; the binding probe's unlabelled report lines, with the 224 CPUs of a DGX H100 in a task's mask,
broke in 3 of 6 runs at 4 tasks). Under ``--label`` srun prefixes every piece of every message with its task id
(``3: ``, padded to the widest id) and ends a piece that did not end a line with a newline of its own, so one task's
pieces can be put back in order; but an added newline cannot be told from a printed one. A task therefore prints its
report between two markers, as JSON that never holds a raw newline, and the reader joins the task's pieces without
newlines and takes what lies between the markers.

The label is written by srun, not by the task: a task that prints another task's label, a marker of its own, bytes
that are not UTF-8 or half a report only spoils its own report (named in the error, with what arrived), never
another task's. That holds while the step's output is split into lines at newlines only, as
:func:`slurmlab.slurm.steps.stream_step` reads a labelled step: a line split at a carriage return the task printed
would begin with whatever label the task wrote after it.

The printing half is :func:`frame`, and :data:`FRAME_SOURCE` is the same function as Python source, for a program
sent to the node as ``python3 -c`` code (whose interpreter may not have slurmlab). The step is run elsewhere; this
reads the lines it printed.
"""

from __future__ import annotations

import json
import re
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass
from typing import NoReturn, Protocol

from slurmlab.errors import ExperimentError, SlurmlabError

__all__ = [
    "BEGIN",
    "END",
    "ErrorType",
    "FRAME_SOURCE",
    "FrameStream",
    "LabelledOutput",
    "StreamItem",
    "frame",
    "has_reports",
    "read_reports",
    "reports_by_task",
    "split_labelled",
]


class ErrorType(Protocol):
    """What the reader raises when reports are missing or broken: an error class such as ``ExperimentError``."""

    def __call__(self, message: str, *, hint: str | None = None) -> SlurmlabError: ...


BEGIN = "<slurmlab-report>"
END = "</slurmlab-report>"

# json.dumps escapes every control character, so the text between the markers is one line; "<" escaped as JSON
# allows keeps a marker that a value holds (a job name, a path) from ending the report early
FRAME_SOURCE = (
    "def frame(report):\n"
    "    import json\n"
    f"    return {BEGIN!r} + json.dumps(report, default=str).replace('<', '\\\\u003c') + {END!r}\n"
)


def frame(report: Mapping[str, object]) -> str:
    """The line a task prints: its report between the markers, with no raw newline inside (as :data:`FRAME_SOURCE`
    does on a node without slurmlab)."""
    return BEGIN + json.dumps(report, default=str).replace("<", "\\u003c") + END


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


def _decode(task: int, body: str) -> tuple[dict[str, object] | None, str | None]:
    """The JSON object between a report's markers, or why it is not one."""
    try:
        data = json.loads(body)
    except (ValueError, RecursionError) as exc:
        pos = getattr(exc, "pos", None)
        return None, f"task {task}'s report arrived broken ({exc}): {_quote(body, pos)}"
    if not isinstance(data, dict):
        return None, f"task {task}'s report is not a JSON object: {_quote(body)}"
    return data, None


def _one(task: int, text: str) -> tuple[dict[str, object] | None, str | None]:
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
    data, why = _decode(task, text[body_at:end])
    if data is None:
        return None, why
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
    error: ErrorType = ExperimentError,
) -> list[dict[str, object]]:
    """The reports of tasks ``0..tasks-1``, in task order, from the step's ``srun --label`` stdout (see
    :func:`reports_by_task`)."""
    found = reports_by_task(stdout, tasks, stderr=stderr, what=what, hint=hint, error=error)
    return list(found.values())


def reports_by_task(
    stdout: Sequence[str],
    tasks: int | None,
    *,
    stderr: Sequence[str] = (),
    what: str = "the step",
    hint: str | None = None,
    error: ErrorType = ExperimentError,
) -> dict[int, dict[str, object]]:
    """Each task's report by task id (srun's label, which no task can write for another), in task order.

    ``tasks``: the step's task count (tasks ``0..tasks-1`` must each report); None when the caller does not know
    it (then every task that printed must report). Raises ``error(message, hint=...)`` (an
    :class:`~slurmlab.errors.ExperimentError` unless told) naming every task whose report is missing, cut short,
    broken or an error, with what arrived from it (and its last stderr lines).
    """
    out = split_labelled(stdout)
    errs = split_labelled(stderr)
    seen = set(out.pieces) | set(errs.pieces)
    if tasks is not None:
        extra = sorted(t for t in out.pieces if t >= tasks and BEGIN in out.text(t))
        if extra:
            raise error(
                f"{what} ran more tasks than the {tasks} expected (reports from task(s) "
                f"{', '.join(map(str, extra))})",
                hint="give the task count once: in tasks= or in the step options",
            )
    count = len(seen) if tasks is None else tasks
    reports: dict[int, dict[str, object]] = {}
    problems: dict[int, str] = {}
    # only the tasks that printed are walked, and only the first silent ones are named: a task
    # count typed as 10**9 must not cost a loop of that length
    for task in sorted(t for t in seen if t < count or tasks is None):
        data, why = _one(task, out.text(task))
        if data is None:
            problems[task] = str(why)
        else:
            reports[task] = data
    silent = count - len(reports) - len(problems)
    task = 0
    while silent and len(problems) < _LISTED and task < count:
        if task not in seen:
            problems[task] = f"task {task} sent no report (it printed nothing)"
        task += 1
    if problems:
        _complain(error, problems, errs, len(reports), count, what, hint)
    return reports


def _complain(
    error: ErrorType,
    problems: Mapping[int, str],
    errs: LabelledOutput,
    whole: int,
    tasks: int,
    what: str,
    hint: str | None,
) -> NoReturn:
    shown = []
    for task, why in sorted(problems.items())[:_LISTED]:
        said = [p for p in errs.pieces.get(task, ()) if p.strip()][-2:]
        shown.append(why + (f"; its stderr: {' | '.join(said)}" if said else ""))
    left = tasks - whole - len(shown)
    if left:
        shown.append(f"… and {left} more")
    unlabelled = [ln for ln in errs.other if ln.strip()][-2:]
    tail = f" (srun: {' | '.join(unlabelled)})" if unlabelled else ""
    raise error(
        f"{what}: {whole} of {tasks} task report(s) arrived whole{tail}:\n  " + "\n  ".join(shown),
        hint=hint or "run the step again; if the same task fails, check its node",
    )


@dataclass(frozen=True)
class StreamItem:
    """One thing a running step completed: a task's ``report``, or ``problem`` (why a frame it began could not be
    read), or ``text`` outside any frame (srun's own words, ``task`` None, or a task's stray print)."""

    task: int | None
    report: dict[str, object] | None = None
    problem: str | None = None
    text: str | None = None


class FrameStream:
    """The reader of a labelled step that keeps printing reports (the usage sampler): each task's reports as they
    complete, where :func:`reports_by_task` reads a finished step's one report per task.

    :meth:`feed` takes the step's lines one at a time, as read (split at newlines only, see the module's note). A
    task's frame may span several lines (srun's 1 KiB pieces); text outside frames is passed on as it comes. A frame
    still open after ``limit`` characters is dropped as a problem, so a task that never ends one costs bounded
    memory."""

    def __init__(self, *, limit: int = 1 << 20) -> None:
        self.limit = limit
        self._open: dict[int, str] = {}  # per task: the frame begun and not yet ended (from its BEGIN on)

    def feed(self, line: str) -> list[StreamItem]:
        m = _LABEL.fullmatch(line)
        if m is None:
            return [StreamItem(None, text=line)]
        task, piece = int(m.group(1)), m.group(2) or ""
        items: list[StreamItem] = []
        text = self._open.pop(task, "") + piece
        while text:
            start = text.find(BEGIN)
            if start < 0:
                items.append(StreamItem(task, text=text))
                break
            if start > 0:
                items.append(StreamItem(task, text=text[:start]))
            body_at = start + len(BEGIN)
            end = text.find(END, body_at)
            if end < 0:
                if len(text) - start > self.limit:
                    problem = (
                        f"task {task}'s report ran past {self.limit} characters with no end: {_quote(text)}"
                    )
                    items.append(StreamItem(task, problem=problem))
                else:
                    self._open[task] = text[start:]
                break
            data, why = _decode(task, text[body_at:end])
            items.append(StreamItem(task, report=data, problem=why))
            text = text[end + len(END) :]
        return items
