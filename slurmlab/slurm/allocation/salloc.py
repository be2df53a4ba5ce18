"""The salloc process of a submission, and the thread that reads what it says.

An allocation that lives with its kernel is *held* by its salloc for its whole life (:func:`holding_argv`): salloc
runs ``cat`` on a pipe only this process writes (:data:`HOLD_COMMAND`), so it stays as long as this process does, and slurmctld pushes
the job's news to it as to any interactive salloc: the grant, the revocation (a ``scancel``, a preemption), the
end by the time limit, a node failure. salloc prints each at once; the reader turns them into reports, and the
allocation needs no poll to know them (one ``salloc … sleep`` costs the controller nothing while it holds its
job). The pipe is also the allocation's last line of release: however this process ends (SIGKILL included), the
pipe closes, ``cat`` ends, and salloc relinquishes the job. An allocation meant to outlive its kernel uses
``salloc --no-shell``, which exits once the job is granted; so does one whose salloc is let go (:meth:`detach`).

:class:`SallocProcess` owns the process and its reader; it knows nothing of the allocation and reports back
through the callbacks it was given (the job id, an error line, Slurm's pushed news, its exit, a munge hang). The
end of a salloc still running (:func:`kill_salloc`) and why no job came out of a submission (:func:`not_created`)
are here too.
"""

from __future__ import annotations

import contextlib
import os
import re
import signal
import subprocess
import threading
import time
import weakref
from collections.abc import Callable, Iterable, Sequence
from typing import Protocol

from slurmlab.errors import AllocationError, ControllerDownError, MungeError, SlurmError
from slurmlab.slurm.runner import Runner
from slurmlab.slurm.steps import close_quietly

__all__ = [
    "HOLD_COMMAND",
    "NUDGE_AFTER",
    "PUSHED",
    "PUSHED_STATE",
    "SallocProcess",
    "Submission",
    "holding_argv",
    "kill_salloc",
    "may_still_be_made",
    "not_created",
    "nudge_salloc",
]

_SALLOC_ID = re.compile(r"(?:Pending|Granted) job allocation (\d+)")
_SALLOC_ERROR = re.compile(r"^salloc: error: (.*)$")

# What slurmctld pushes to the allocating salloc, as salloc prints it (the same words in 22.05, 24.11 and 26.05;
# ``error:`` where salloc prints it as one): (kind, pattern); each names the job (or the node) it is about.
# A revocation after the time limit passed says so in its own words; one from scancel or a preemption does not.
PUSHED: tuple[tuple[str, re.Pattern[str]], ...] = (
    ("granted", re.compile(r"^salloc: Granted job allocation (\d+)$")),
    (
        "timeout",
        re.compile(
            r"^salloc: (?:error: )?Job (\d+) has exceeded its time limit and its allocation has been revoked\.?$"
        ),
    ),
    ("revoked", re.compile(r"^salloc: (?:error: )?Job allocation (\d+) has been revoked\.?$")),
    ("node_failure", re.compile(r"^salloc: error: Node failure on (\S+)$")),
    ("relinquished", re.compile(r"^salloc: Relinquishing job allocation (\d+)$")),
)
# the state a push says the job is in (the poll that follows it has the last word)
PUSHED_STATE = {"revoked": "CANCELLED", "timeout": "TIMEOUT"}
# seconds after salloc said the grant in which a poll's PENDING is taken as read before it (a poll round's squeue
# and scontrol take well under this); later, one is not (a controller restarted from a state saved before the grant)
GRANT_RACE = 10.0
# The held command: waits, doing nothing, until its stdin (a pipe only this process writes) closes. Its stdout and
# stderr go nowhere: a cat holding salloc's stderr would keep the reader from seeing the end of a salloc killed
# alone (SIGKILL, which leaves the job RUNNING), and the job would wait for its slow check to be polled again.
HOLD_COMMAND = ("sh", "-c", "exec cat >/dev/null 2>&1")
_HOLDING: weakref.WeakSet[SallocProcess] = weakref.WeakSet()


def holding_argv(argv: Sequence[str], hold_command: Sequence[str] = HOLD_COMMAND) -> list[str]:
    """The salloc that holds its allocation while this process lives: ``argv`` (:func:`.request.salloc_argv`)
    without ``--no-shell``, running :data:`HOLD_COMMAND` (over SSH, the link's lease holder: a link that drops
    must not end the hold, see :mod:`slurmlab.slurm.ssh.lease`)."""
    return [a for a in argv if a != "--no-shell"] + list(hold_command)


def _close_held_pipes_in_child() -> None:
    # a forked child (multiprocessing) must not keep a salloc's pipe open: the job would outlive its kernel
    for held in list(_HOLDING):
        held.forget_pipe()


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
    """One salloc, started by :meth:`start`, read line by line in a thread of its own; ``hold``: it holds the
    allocation until :meth:`kill` or the end of this process (:func:`holding_argv`), else ``--no-shell``.

    Reports, each called from the reader thread: ``on_job_id(job_id, state)`` once the controller queued the job
    (state ``PENDING`` or ``RUNNING``), ``on_error(message)`` for each ``salloc: error:`` line,
    ``on_push(kind, what)`` for each news of the job Slurm pushed (:data:`PUSHED`: ``granted``, ``revoked``,
    ``timeout``, ``node_failure`` with the node list, ``relinquished``), ``on_exit(rc)``
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
        on_push: Callable[[str, str], None] | None = None,
        hold: bool = False,
    ) -> None:
        self.runner = runner
        self.hold = hold
        held = runner.ssh.hold_command() if hold and runner.ssh is not None else HOLD_COMMAND
        self.argv = holding_argv(argv, held) if hold else list(argv)
        self.messages: list[str] = messages if messages is not None else []
        self.proc: subprocess.Popen[str] | None = None
        self._on_job_id = on_job_id
        self._on_error = on_error
        self._on_exit = on_exit
        self._on_stuck = on_stuck
        self._answered = answered
        self._on_push = on_push
        self._id_said = False
        self.granted = False  # salloc said the job was granted
        self.granted_at: float | None = None  # when it said so (monotonic)
        self.job_id: str | None = None

    @property
    def pid(self) -> int | None:
        return self.proc.pid if self.proc is not None else None

    @property
    def returncode(self) -> int | None:
        return self.proc.returncode if self.proc is not None else None

    @property
    def alive(self) -> bool:
        return self.proc is not None and self.proc.poll() is None

    @property
    def holding(self) -> bool:
        """salloc holds the granted job and hears Slurm's news of it."""
        return self.hold and self.granted and self.alive

    def start(self, on_started: Callable[[int], None] | None = None) -> SallocProcess:
        """Run salloc and start its reader; returns at once. ``on_started(pid)`` runs before anything is read
        (the guardian learns of salloc before the job can exist)."""
        proc = self.proc = self.runner.popen(
            self.argv, stdin=subprocess.PIPE if self.hold else subprocess.DEVNULL
        )
        if self.hold:
            _HOLDING.add(self)
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
            close_quietly(proc.stderr, proc.stdout)  # salloc prints nothing on stdout, nor does cat
        rc = proc.wait()
        self.release_hold()
        self._on_exit(rc)

    def _read_lines(self, stderr: Iterable[str]) -> None:
        for raw in stderr:
            line = raw.rstrip("\n")
            self.messages.append(line)
            m = _SALLOC_ID.search(line)
            if m and not self._id_said:
                self._id_said = True
                self.job_id = m.group(1)
                self.granted = "Granted" in line
                self.granted_at = time.monotonic() if self.granted else None
                self._on_job_id(m.group(1), "RUNNING" if self.granted else "PENDING")
                continue
            if self._pushed(line):
                continue
            m = _SALLOC_ERROR.match(line)
            if m:
                self._on_error(m.group(1))

    def _pushed(self, line: str) -> bool:
        """Report one of Slurm's pushed news of this job (its id must be the job's: a line naming another job is
        not about this one)."""
        for kind, pattern in PUSHED:
            m = pattern.match(line)
            if m is None:
                continue
            what = m.group(1)
            if kind != "node_failure" and what != self.job_id:
                return False
            if kind == "granted":
                self.granted, self.granted_at = True, time.monotonic()
            elif kind in ("revoked", "timeout"):
                self.release_hold()  # the job is over: the held command may end, and salloc with it
            if self._on_push is not None:
                self._on_push(kind, what)
            return True
        return False

    def granted_just_now(self) -> bool:
        """salloc said the grant less than :data:`GRANT_RACE` seconds ago."""
        return self.granted_at is not None and time.monotonic() - self.granted_at < GRANT_RACE

    def release_hold(self) -> None:
        """Close the held command's pipe: ``cat`` ends, and salloc with it (relinquishing a job still granted)."""
        proc = self.proc
        if proc is not None and proc.stdin is not None:
            with contextlib.suppress(OSError, ValueError):
                proc.stdin.close()

    def forget_pipe(self) -> None:
        """In a forked child: close this process's copy of the pipe, which is its parent's to hold."""
        self.release_hold()

    def kill(self) -> None:
        """End salloc if it still runs: a held one by closing its pipe (salloc then relinquishes the job, unless
        it was cancelled first), nudged with SIGHUP if it lost its command (:func:`nudge_salloc`), then, or at
        once, :func:`kill_salloc`."""
        proc = self.proc
        if proc is not None and self.hold and self.granted and proc.poll() is None:
            self.release_hold()
            local = self.runner.ssh is None
            with contextlib.suppress(subprocess.TimeoutExpired):
                proc.wait(timeout=NUDGE_AFTER if local else 5)
            # over SSH the process here is the relay: a signal would end the link's session before the holder
            # there saw its pipe close, and a holder whose session dropped keeps the job for its lease
            if proc.poll() is None and local:
                nudge_salloc(proc.pid)
                with contextlib.suppress(subprocess.TimeoutExpired):
                    proc.wait(timeout=5)
        kill_salloc(proc)

    def abandon(self) -> None:
        """Let the job outlive salloc: salloc and its command are killed outright (SIGKILL leaves salloc no time
        to relinquish the job, which stays as it is). The job's news then comes from polling."""
        proc = self.proc
        if proc is None or proc.poll() is not None:
            return
        if self.hold and self.runner.ssh is not None:  # the remote holder ends salloc there, unreleased
            self.runner.ssh.let_go(self.argv)
        with contextlib.suppress(ProcessLookupError, PermissionError):
            os.killpg(proc.pid, signal.SIGKILL)  # the runner started it in its own session: cat goes too
        with contextlib.suppress(subprocess.TimeoutExpired):
            proc.wait(timeout=5)


os.register_at_fork(after_in_child=_close_held_pipes_in_child)

# Seconds a held salloc gets to end after its command did, before it is nudged. salloc's own handler of the job's
# end (the news of a scancel) reaps the command when the command ended just before that news came; salloc's main
# loop then waits for a child that is gone, busy (waitpid fails at once, over and over), until a signal sets its
# exit flag. Measured on 22.05 in the sandbox tests: 100 % of a core for 10 s per such cancel (until SIGKILL:
# salloc ignores SIGINT once granted), 20-40 s for the salloc of a killed kernel (until something signalled it), 100
# s of CPU in one run of the sandbox tier. SIGHUP ends that loop; salloc then finishes as usual.
NUDGE_AFTER = 1.0


def nudge_salloc(pid: int) -> None:
    """SIGHUP to salloc ``pid`` alone: its handler forwards it to the command (gone, or ending: its pipe is
    closed) and lets salloc finish, relinquishing a job still held."""
    with contextlib.suppress(ProcessLookupError, PermissionError):
        os.kill(pid, signal.SIGHUP)


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
