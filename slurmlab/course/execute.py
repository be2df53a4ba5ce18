"""Run one lesson headless: a fresh ``python3`` kernel (nbclient), every cell in order, the kernel shut down after.

The notebook runs in a worker thread while this thread waits, so that Ctrl-C lands here: the kernel is then
interrupted (its cell stops, and a graceful shutdown lets it release what it allocated), and killed with its
process group if it does not end in time. nbclient's own signal handlers only work on the main thread, and
would swallow Ctrl-C into a failed cell and go on to the next lesson.
"""

from __future__ import annotations

import atexit
import contextlib
import os
import signal
import sys
import threading
import time
from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from slurmlab._extras import require
from slurmlab.course.lessons import Lesson
from slurmlab.course.report import LessonResult, one_line

__all__ = ["Execution", "run_lesson"]

_FEATURE = "executing the course's lessons"
KERNEL = "python3"
_GRACE_S = 20.0  # after Ctrl-C: how long the interrupted kernel gets to shut down by itself


@dataclass
class Execution:
    nb: Any | None  # the notebook with the outputs it made (None: the file was not a notebook)
    result: LessonResult


class _Stopped(Exception):
    """Raised by the hook before a cell once Ctrl-C came: nbclient then shuts the kernel down gracefully."""


class _Progress:
    """Which code cell is running, told by nbclient's hooks (from the worker thread)."""

    def __init__(self, nb: Any) -> None:
        self.code_number: dict[int, int] = {}
        number = 0
        for index, cell in enumerate(nb.cells):
            if cell.cell_type == "code":
                number += 1
                self.code_number[index] = number
        self.current: int | None = None  # 1-based among the code cells
        self.ran = 0  # code cells that ran to their end
        self.stopping = False  # Ctrl-C: no further cell starts

    def start(self, cell: Any, cell_index: int, **_: Any) -> None:
        if self.stopping:
            raise _Stopped("interrupted (Ctrl-C)")
        self.current = self.code_number.get(cell_index, self.current)

    def complete(self, cell: Any, cell_index: int, **_: Any) -> None:
        self.ran += 1


def _kernel_process(client: Any) -> tuple[int | None, int | None]:
    provisioner = getattr(getattr(client, "km", None), "provisioner", None)
    return getattr(provisioner, "pid", None), getattr(provisioner, "pgid", None)


def _error_of(exc: BaseException, timeout: float) -> str:
    name = type(exc).__name__
    if name == "CellExecutionError":
        ename, evalue = getattr(exc, "ename", "") or "Error", getattr(exc, "evalue", "") or ""
        return one_line(f"{ename}: {evalue}" if evalue else ename)
    if name == "CellTimeoutError":
        return f"timed out after {timeout:.0f} s (a cell that waits on Slurm forever?)"
    if name == "DeadKernelError":
        return one_line(f"the kernel died: {exc}")
    if name == "NoSuchKernel":
        return f"no Jupyter kernel named {KERNEL}: install ipykernel in this Python (pip install ipykernel)"
    return one_line(f"{name}: {exc}") or name


def _note_error(nb: Any, progress: _Progress, text: str) -> None:
    """Put an error that came from outside the cell (timeout, dead kernel) into the cell, for the HTML page."""
    nbformat = require("nbformat", feature=_FEATURE, extra="course")
    if progress.current is None:
        return
    index = next(i for i, n in progress.code_number.items() if n == progress.current)
    cell = nb.cells[index]
    if not any(o.get("output_type") == "error" for o in cell.get("outputs", [])):
        cell.setdefault("outputs", []).append(
            nbformat.v4.new_output("error", ename="slurmlab.course", evalue=text, traceback=[text])
        )


def _stop(done: threading.Event, client: Any, progress: _Progress) -> None:
    """Ctrl-C: no further cell, the running one interrupted (nbclient then shuts the kernel down gracefully, so
    it releases its allocations); a kernel that does not end in time is killed with its process group."""
    progress.stopping = True
    print(
        f"stopping: the running cell is interrupted and its kernel shut down (killed after {_GRACE_S:.0f} s; "
        "Ctrl-C again kills it now)",
        file=sys.stderr,
        flush=True,
    )
    deadline = time.monotonic() + _GRACE_S
    interrupted = False
    try:
        while not done.is_set() and time.monotonic() < deadline:
            pid, _pgid = _kernel_process(client)
            if pid is not None and not interrupted:
                with contextlib.suppress(OSError):
                    os.kill(pid, signal.SIGINT)
                interrupted = True
            done.wait(0.2)
        why = f"it did not end within {_GRACE_S:.0f} s"
    except KeyboardInterrupt:
        why = "a second Ctrl-C"  # no more patience
    if not done.is_set():
        _pid, pgid = _kernel_process(client)
        if pgid is not None:
            with contextlib.suppress(OSError):
                os.killpg(pgid, signal.SIGKILL)
            print(
                f"stopping: the kernel and what it started were killed ({why})", file=sys.stderr, flush=True
            )
        done.wait(10.0)


def run_lesson(
    lesson: Lesson,
    *,
    env: Mapping[str, str],
    cwd: Path,
    cell_timeout: float = 600.0,
    startup_timeout: float = 120.0,
) -> Execution:
    """Execute ``lesson`` in ``cwd`` with environment ``env``; errors become the result, Ctrl-C included."""
    nbformat = require("nbformat", feature=_FEATURE, extra="course")
    nbclient = require("nbclient", feature=_FEATURE, extra="course")
    try:
        nb = nbformat.read(str(lesson.path), as_version=4)
    except Exception as exc:  # a file that is not a notebook: its own line, the other lessons still run
        return Execution(None, LessonResult(lesson, "FAIL", error=one_line(f"not a notebook: {exc}")))
    progress = _Progress(nb)
    client = nbclient.NotebookClient(
        nb,
        kernel_name=KERNEL,
        timeout=cell_timeout,
        startup_timeout=startup_timeout,
        allow_errors=False,
        resources={"metadata": {"path": str(cwd)}},
        on_cell_execute=progress.start,
        on_cell_executed=progress.complete,
    )
    failure: list[BaseException] = []

    # the kernel's own log lines (its warnings, a crash) go beside its work, not into the summary
    log = (cwd / f"{lesson.name}.kernel.log").open("w", encoding="utf-8")

    # the worker says itself when it is done: after Ctrl-C has interrupted a Thread.join, CPython 3.11 may
    # answer is_alive() False for a thread still running its cell (the kernel then went uninterrupted and two
    # threads shut it down at once when the process exited)
    done = threading.Event()

    def work() -> None:
        try:
            client.execute(env=dict(env), cwd=str(cwd), stdout=log, stderr=log)
        except BaseException as exc:  # reported by the waiting thread
            failure.append(exc)
        finally:
            log.close()
            done.set()

    started = time.monotonic()
    worker = threading.Thread(target=work, name=f"lesson {lesson.name}", daemon=True)
    worker.start()
    pid: int | None = None
    interrupted = False
    try:
        while not done.is_set():
            done.wait(0.2)
            if pid is None:
                pid, _pgid = _kernel_process(client)
    except KeyboardInterrupt:
        interrupted = True
        if pid is None:
            pid, _pgid = _kernel_process(client)
        _stop(done, client, progress)
    finally:
        # nbclient's exit hook would shut down, at interpreter exit, a kernel this worker shuts down or has
        # given up (a worker that outlived its grace): never two at once
        atexit.unregister(client._cleanup_kernel)
    seconds = time.monotonic() - started
    if interrupted:
        return Execution(
            nb,
            LessonResult(
                lesson, "interrupted", seconds, progress.ran, progress.current, "interrupted (Ctrl-C)", pid
            ),
        )
    if failure:
        error = _error_of(failure[0], cell_timeout)
        if type(failure[0]).__name__ != "CellExecutionError":
            _note_error(nb, progress, error)
        return Execution(
            nb, LessonResult(lesson, "FAIL", seconds, progress.current or 0, progress.current, error, pid)
        )
    return Execution(nb, LessonResult(lesson, "ok", seconds, progress.ran, kernel_pid=pid))
