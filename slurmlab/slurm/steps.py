"""Steps: running a command inside an allocation with ``srun``, streaming what it prints.

Used by :class:`~slurmlab.slurm.allocation.Allocation`; the argv is built here, in the Slurm
room, and run through the one runner.
"""

from __future__ import annotations

import contextlib
import logging
import os
import queue
import select
import signal
import subprocess
import sys
import threading
import time
from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass, field
from typing import IO

from slurmlab.errors import ControllerDownError, JobNotFoundError, MungeError, SlurmError
from slurmlab.slurm.runner import Runner, StallWatch

__all__ = [
    "OutputCallback",
    "RunningStep",
    "StepResult",
    "callable_argv",
    "end_step",
    "overlap_refused",
    "print_output",
    "split_at_newlines_only",
    "srun_failure",
    "step_argv",
    "stream_step",
]

log = logging.getLogger(__name__)

OutputCallback = Callable[[str, str], None]  # (stream "stdout"|"stderr", line without newline)


@dataclass(frozen=True)
class StepResult:
    """A finished step: exit code, the lines it printed, and whether it was interrupted."""

    argv: tuple[str, ...]
    returncode: int
    stdout: list[str] = field(default_factory=list)
    stderr: list[str] = field(default_factory=list)
    interrupted: bool = False
    duration: float = 0.0
    # why srun could not run the step, when its own words say munge, the controller or a job Slurm does not know:
    # the runner's error for them, with its hint (Slurm's words are in stderr)
    failure: SlurmError | None = None

    @property
    def ok(self) -> bool:
        return self.returncode == 0 and not self.interrupted

    def __str__(self) -> str:
        return "\n".join(self.stdout)


class RunningStep:
    """A step started by :meth:`Allocation.launch`; collect it with :meth:`wait`.

    Given the ``runner`` that started it, the step gets the runner's munge probe until it prints (a step that
    printed nothing while munged does not work is ended, and :meth:`wait` raises the MungeError), and a failed
    step's ``failure`` (:func:`srun_failure`)."""

    def __init__(self, argv: list[str], proc: subprocess.Popen[str], runner: Runner | None = None) -> None:
        self.argv = argv
        self.proc = proc
        self._start = time.monotonic()
        self._result: StepResult | None = None
        self._runner = runner
        self._heard = False
        self._watch: StallWatch | None = (
            None if runner is None else runner.watch(proc, argv, answered=self._printed)
        )

    def _printed(self) -> bool:
        """Whether the step has printed anything yet, without reading it (nothing reads it before :meth:`wait`)."""
        if not self._heard:
            pipes = [p for p in (self.proc.stdout, self.proc.stderr) if p is not None and not p.closed]
            with contextlib.suppress(OSError, ValueError):
                self._heard = bool(pipes) and bool(select.select(pipes, [], [], 0)[0])
        return self._heard

    def wait(self, timeout: float | None = None) -> StepResult:
        """What the step printed and its exit code; after ``timeout`` seconds the step is ended (``interrupted``).
        Raises the runner's MungeError when the step was ended because munged does not work."""
        result = self._result
        if result is None:
            try:
                out, err = self.proc.communicate(timeout=timeout)
            except subprocess.TimeoutExpired:
                result = self._end(interrupted=True)
            else:
                result = self._done(out, err, False)
        if self._watch is not None and self._watch.error is not None:
            raise self._watch.error
        return result

    def stop(self) -> None:
        """End the step. What it printed is kept for ``wait``, and its pipes are closed here: left to the
        garbage collector, they raise a ResourceWarning in whatever code runs then."""
        running = self.proc.poll() is None
        if self._result is None:
            self._end(interrupted=running)
        elif running:
            end_step(self.proc)

    def _end(self, *, interrupted: bool) -> StepResult:
        """End the step if it runs and collect its output, waiting at most ``GRACE_AFTER_SIGKILL`` for the pipes: a
        process the step left behind (in a session of its own) may hold them open for as long as it lives."""
        if self.proc.poll() is None:
            end_step(self.proc)
        try:
            out, err = self.proc.communicate(timeout=GRACE_AFTER_SIGKILL)
        except subprocess.TimeoutExpired:  # something else still holds the pipes open: give them up
            close_quietly(self.proc.stdout, self.proc.stderr)
            out = err = ""
        return self._done(out, err, interrupted)

    def _done(self, out: str, err: str, interrupted: bool) -> StepResult:
        if self._watch is not None:
            self._watch.cancel()
        rc = self.proc.returncode if self.proc.returncode is not None else -1
        lines = err.splitlines()
        failure = (
            None if self._runner is None or interrupted else srun_failure(self._runner, self.argv, rc, lines)
        )
        self._result = StepResult(
            tuple(self.argv),
            rc,
            out.splitlines(),
            lines,
            interrupted,
            time.monotonic() - self._start,
            failure,
        )
        return self._result


def srun_failure(runner: Runner, argv: list[str], returncode: int, stderr: list[str]) -> SlurmError | None:
    """Why srun could not run a step, in the runner's words and with its hint, when srun's own lines
    (``srun: error: …``; the others are the program's) say munge, the controller or a job Slurm does not know."""
    own = [line for line in stderr if line.startswith("srun: ")]
    if returncode == 0 or not own:
        return None
    err = runner.failure(argv, returncode, "\n".join(own[-20:]), quote=False)
    return err if isinstance(err, (MungeError, ControllerDownError, JobNotFoundError)) else None


def close_quietly(*streams: IO[str] | Iterable[str] | None) -> None:
    """Close the pipes of a process started by ``Runner.popen`` once they are read (or no longer wanted): left
    to the garbage collector, each one raises a ResourceWarning in whatever code happens to run then."""
    for stream in streams:
        close = getattr(stream, "close", None)
        if close is not None:
            with contextlib.suppress(OSError, ValueError):
                close()


def step_argv(job_id: str, extra: list[str], command: list[str], *, label: bool, overlap: bool) -> list[str]:
    """``srun --jobid=J [--overlap] [--label] <srun options> <command>``."""
    argv = ["srun", f"--jobid={job_id}"]
    if overlap:
        argv.append("--overlap")
    if label:
        argv.append("--label")
    return argv + extra + command


def _labelled(argv: Sequence[str]) -> bool:
    """Whether ``argv`` is a step that :func:`step_argv` gave srun's ``--label`` (before the step's own options)."""
    return bool(argv) and argv[0] == "srun" and "--label" in argv[1:4]


def split_at_newlines_only(proc: subprocess.Popen[str]) -> None:
    """Read a labelled step's pipes split at ``\n`` only. srun ends each piece with ``\n``; a ``\r`` a task prints
    must stay inside its labelled line, or the text after it would read as a line of its own, with whatever label
    the task wrote there (another task's)."""
    for stream in (proc.stdout, proc.stderr):
        reconfigure = getattr(stream, "reconfigure", None)
        if reconfigure is not None:
            reconfigure(newline="\n")


def stream_step(
    runner: Runner, argv: list[str], on_output: OutputCallback, timeout: float | None
) -> StepResult:
    """Run a step, handing each line to ``on_output`` as it comes; Ctrl-C or ``timeout`` end the step.

    Until it prints, the step has the runner's munge probe: one stuck on a munged that does not work is ended,
    and the runner's MungeError raised. A step srun could not run says why in ``failure``."""
    start = time.monotonic()
    proc = runner.popen(argv)
    if _labelled(argv):
        split_at_newlines_only(proc)
    out: list[str] = []
    err: list[str] = []
    lines: queue.Queue[tuple[str, str] | None] = queue.Queue()
    held: list[str] = []
    heard = threading.Event()
    watch = runner.watch(proc, argv, answered=heard.is_set)

    def pump(stream: Iterable[str], name: str) -> None:
        try:
            for raw in stream:
                heard.set()
                lines.put((name, raw.rstrip("\n")))
        finally:
            close_quietly(stream)  # read to its end (or broken): closed here, not left to a ResourceWarning
            lines.put(None)

    for stream, name in ((proc.stdout, "stdout"), (proc.stderr, "stderr")):
        threading.Thread(target=pump, args=(stream, name), daemon=True).start()
    # Lines are handed to on_output in the calling thread, in arrival order: in a kernel
    # that is the cell's thread, so output lands in the running cell as it comes, and
    # Ctrl-C (KeyboardInterrupt) arrives here, where the step can be ended cleanly.
    interrupted = False
    open_streams = 2
    deadline = None if timeout is None else start + timeout
    try:
        while open_streams:
            try:
                item = lines.get(timeout=0.1)
            except queue.Empty:
                if deadline is not None and time.monotonic() > deadline:
                    interrupted = True
                    end_step(proc)
                    deadline = None
                continue
            if item is None:
                open_streams -= 1
                continue
            name, line = item
            (out if name == "stdout" else err).append(line)
            if name == "stderr" and "--overlap" in argv and "Insufficient GRES available" in line:
                held.append(line)  # may be retried without --overlap: shown only if not
                continue
            try:
                on_output(name, line)
            except Exception:
                log.exception("slurmlab: output callback raised")
        proc.wait()
    except KeyboardInterrupt:
        interrupted = True
        end_step(proc)
        while True:  # keep what the step printed while it ended
            try:
                item = lines.get(timeout=0.5)
            except queue.Empty:
                break
            if item is not None:
                (out if item[0] == "stdout" else err).append(item[1])
    finally:
        watch.cancel()
    if watch.error is not None:
        raise watch.error
    rc = proc.returncode if proc.returncode is not None else -1
    result = StepResult(
        tuple(argv),
        rc,
        out,
        err,
        interrupted,
        time.monotonic() - start,
        None if interrupted else srun_failure(runner, argv, rc, err),
    )
    if held and not overlap_refused(result):
        for line in held:
            on_output("stderr", line)
    return result


def print_output(stream: str, line: str) -> None:
    print(line, file=sys.stderr if stream == "stderr" else sys.stdout, flush=True)


def overlap_refused(result: StepResult) -> bool:
    return (
        result.returncode != 0
        and "--overlap" in result.argv
        and not result.stdout
        and any("Insufficient GRES available in allocation" in line for line in result.stderr)
    )


# srun takes two SIGINTs within a second as "abort"; SIGTERM's grace covers KillWait-free task ends
SIGINT_GAP = 0.2
GRACE_AFTER_SIGINT = 3.0
GRACE_AFTER_SIGTERM = 10.0
GRACE_AFTER_SIGKILL = 5.0


def end_step(proc: subprocess.Popen[str]) -> None:
    """End a step, not the allocation.

    Two SIGINTs within a second make srun abort the step, as Ctrl-C twice does in a terminal. srun
    measures that second on its own clock, after it has asked Slurm for the step's state: on a loaded
    machine the two land "more than a second apart" and srun only reports the step again. Then SIGTERM,
    which srun always answers by killing the step's tasks and ending; SIGKILL on srun itself comes last,
    because it would leave the step running in the allocation.
    """
    for _ in range(2):
        if not _signal_group(proc, signal.SIGINT):
            return
        time.sleep(SIGINT_GAP)
    # (wait this long for srun to end, then send this)
    for grace, then in (
        (GRACE_AFTER_SIGINT, signal.SIGTERM),
        (GRACE_AFTER_SIGTERM, signal.SIGKILL),
        (GRACE_AFTER_SIGKILL, None),
    ):
        try:
            proc.wait(timeout=grace)
            return
        except subprocess.TimeoutExpired:
            if then is None:
                log.warning("slurmlab: srun (pid %s) did not end after SIGKILL", proc.pid)
            elif not _signal_group(proc, then):
                return


def _signal_group(proc: subprocess.Popen[str], sig: int) -> bool:
    try:
        os.killpg(proc.pid, sig)
    except ProcessLookupError:
        return False
    return True


def callable_argv(func: Callable[[], object]) -> tuple[list[str], str]:
    from slurmlab._extras import require

    cloudpickle = require("cloudpickle", feature="running a Python function as a step", extra="widgets")
    import tempfile

    fd, path = tempfile.mkstemp(prefix="slurmlab-step-", suffix=".pkl", dir=os.path.expanduser("~"))
    with os.fdopen(fd, "wb") as fh:
        cloudpickle.dump(func, fh)
    code = "import pickle,sys;f=pickle.load(open(sys.argv[1],'rb'));r=f();print(r) if r is not None else None"
    return [sys.executable, "-c", code, path], path
