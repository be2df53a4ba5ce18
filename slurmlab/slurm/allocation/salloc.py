"""The salloc process of a submission: ``salloc --no-shell`` running in the background until the controller has
given the job an id, and the thread that reads what it says.

:class:`SallocProcess` owns the process and its reader; it knows nothing of the allocation and reports back
through the callbacks it was given (the job id, an error line, its exit, a munge hang). The end of a salloc
still running (:func:`kill_salloc`) and why no job came out of a submission (:func:`not_created`) are here too.
"""

from __future__ import annotations

import contextlib
import os
import re
import signal
import subprocess
import threading
from collections.abc import Callable, Iterable, Sequence
from typing import Protocol

from slurmlab.errors import AllocationError, ControllerDownError, MungeError, SlurmError
from slurmlab.slurm.runner import Runner
from slurmlab.slurm.steps import close_quietly

__all__ = ["SallocProcess", "Submission", "kill_salloc", "may_still_be_made", "not_created"]

_SALLOC_ID = re.compile(r"(?:Pending|Granted) job allocation (\d+)")
_SALLOC_ERROR = re.compile(r"^salloc: error: (.*)$")


class Submission(Protocol):
    """What a given-up submission's verdicts ask of its allocation (an
    :class:`~slurmlab.slurm.allocation.Allocation`)."""

    @property
    def state(self) -> str: ...
    @property
    def error(self) -> str | None: ...
    @property
    def runner(self) -> Runner: ...


class SallocProcess:
    """One ``salloc --no-shell``, started by :meth:`start`, read line by line in a thread of its own.

    Reports, each called from the reader thread: ``on_job_id(job_id, state)`` once the controller queued the job
    (state ``PENDING`` or ``RUNNING``), ``on_error(message)`` for each ``salloc: error:`` line, ``on_exit(rc)``
    once salloc ended and its pipes are closed. ``on_stuck(error)`` comes from the runner's munge probe: a salloc
    stuck on munged is stopped within seconds, and the error says why. ``answered()`` tells the probe that the
    controller has answered (the probe then stops). Every line salloc printed is appended to ``messages``.
    """

    def __init__(
        self,
        runner: Runner,
        argv: Sequence[str],
        *,
        on_job_id: Callable[[str, str], None],
        on_error: Callable[[str], None],
        on_exit: Callable[[int], None],
        on_stuck: Callable[[SlurmError], None],
        answered: Callable[[], bool],
        messages: list[str] | None = None,
    ) -> None:
        self.runner = runner
        self.argv = list(argv)
        self.messages: list[str] = messages if messages is not None else []
        self.proc: subprocess.Popen[str] | None = None
        self._on_job_id = on_job_id
        self._on_error = on_error
        self._on_exit = on_exit
        self._on_stuck = on_stuck
        self._answered = answered
        self._id_said = False

    @property
    def pid(self) -> int | None:
        return self.proc.pid if self.proc is not None else None

    @property
    def returncode(self) -> int | None:
        return self.proc.returncode if self.proc is not None else None

    def start(self, on_started: Callable[[int], None] | None = None) -> SallocProcess:
        """Run salloc and start its reader; returns at once. ``on_started(pid)`` runs before anything is read
        (the guardian learns of salloc before the job can exist)."""
        proc = self.proc = self.runner.popen(self.argv)
        if on_started is not None:
            on_started(proc.pid)
        # the runner's munge probe, as for every command: a salloc stuck on munged is stopped within seconds
        self.runner.watch(proc, self.argv, answered=self._answered, on_error=self._on_stuck)
        threading.Thread(target=self.read, args=(proc,), name="slurmlab-salloc", daemon=True).start()
        return self

    def read(self, proc: subprocess.Popen[str]) -> None:
        """salloc's stderr, line by line: the job id as soon as the controller queued it, then its errors; the
        pipes are closed once read, then the exit is reported."""
        assert proc.stderr is not None
        try:
            self._read_lines(proc.stderr)
        finally:
            close_quietly(proc.stderr, proc.stdout)  # salloc --no-shell prints nothing on stdout
        self._on_exit(proc.wait())

    def _read_lines(self, stderr: Iterable[str]) -> None:
        for raw in stderr:
            line = raw.rstrip("\n")
            self.messages.append(line)
            m = _SALLOC_ID.search(line)
            if m and not self._id_said:
                self._id_said = True
                self._on_job_id(m.group(1), "PENDING" if "Pending" in line else "RUNNING")
                continue
            m = _SALLOC_ERROR.match(line)
            if m:
                self._on_error(m.group(1))

    def kill(self) -> None:
        """End salloc if it still runs (:func:`kill_salloc`)."""
        kill_salloc(self.proc)


def kill_salloc(proc: subprocess.Popen[str] | None) -> None:
    """End a salloc still running; SIGINT first, which withdraws a pending request. One deaf to it (started
    with SIGINT ignored, or hung) is killed with its whole session (the runner starts it in its own), so no
    process it started outlives it."""
    if proc is not None and proc.poll() is None:
        try:
            os.killpg(proc.pid, signal.SIGINT)  # salloc withdraws a pending request on SIGINT
            proc.wait(timeout=5)
        except (ProcessLookupError, subprocess.TimeoutExpired, PermissionError):
            with contextlib.suppress(ProcessLookupError, PermissionError):
                os.killpg(proc.pid, signal.SIGKILL)
            with contextlib.suppress(ProcessLookupError):
                proc.kill()  # a leader that left its session, still ours to end
            with contextlib.suppress(subprocess.TimeoutExpired):
                proc.wait(timeout=5)


def may_still_be_made(alloc: Submission) -> bool:
    """Whether the controller may still make the job of a submission given up before salloc said its id: salloc
    was stopped while it waited, or gave up on a controller that did not answer. Its request can sit unread in a
    frozen controller's socket and be read later (a refusal, or a munge failure before sending, makes nothing)."""
    from slurmlab.slurm.failures import classify_failure

    if alloc.state != "REJECTED":
        return True
    return isinstance(classify_failure(["salloc"], 1, alloc.error or ""), ControllerDownError)


def not_created(alloc: Submission, cause: SlurmError | None) -> AllocationError:
    """Why no job came out, with the one hint that fits the cause (``cause``: what the lookups of the job id
    raised, if anything).

    A request hint only when Slurm refused the request; munge, the controller and timeouts
    keep the runner's own hint, never a second one stacked on it.
    """
    if cause is None and alloc.error is not None:
        cause = alloc.runner.failure(
            ["salloc"], 1, alloc.error
        )  # with the hint that fits (a sandbox's --dir)
    if isinstance(cause, (MungeError, ControllerDownError)):
        return AllocationError(f"the allocation was not created: {cause.message}", hint=cause.hint)
    if cause is None:
        return AllocationError(
            "the allocation was not created: salloc gave no job id in time",
            hint="the controller may be slow or down: check it with `scontrol ping`, then retry",
        )
    return AllocationError(
        f"the allocation was not created: {alloc.error or cause.message}",
        hint=cause.hint or "check the request with `%salloc --dry-run …` and the cluster with `sinfo`",
    )
