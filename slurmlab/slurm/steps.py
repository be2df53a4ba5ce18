"""Steps: running a command inside an allocation with ``srun``, streaming what it prints.

Used by :class:`~slurmlab.slurm.allocation.Allocation`; the argv is built here, in the Slurm
room, and run through the one runner.
"""

from __future__ import annotations

import contextlib
import logging
import os
import queue
import re
import select
import signal
import subprocess
import sys
import threading
import time
from collections.abc import Callable, Iterable, Iterator, Sequence
from dataclasses import dataclass, field
from types import ModuleType
from typing import IO

from slurmlab.errors import ControllerDownError, JobNotFoundError, MungeError, SlurmError, SlurmlabError
from slurmlab.slurm.runner import Runner, StallWatch

__all__ = [
    "OutputCallback",
    "RunningStep",
    "StepResult",
    "FUNCTION_LOADER",
    "LOADER_SAYS",
    "REMOTE_STEPS_FOLDER",
    "end_step",
    "function_argv",
    "function_command",
    "kernel_python_version",
    "loader_failure",
    "overlap_refused",
    "pickle_function",
    "print_output",
    "remote_store_argv",
    "remove_stored",
    "run_function",
    "split_at_newlines_only",
    "srun_failure",
    "step_argv",
    "store_locally",
    "store_remotely",
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


# The program a Python function's step runs on the nodes, given the pickle's path, the kernel's Python version
# (major.minor) and the kernel's cloudpickle version. Before it unpickles it checks what would otherwise fail
# obscurely there, and says it on stderr in one line that starts with LOADER_SAYS (which
# :func:`loader_failure` turns into the kernel's error): cloudpickle pickles a function's bytecode, which only
# the same Python version runs, and its pickle needs cloudpickle to load. Written so that any Python parses it
# (no f-strings): a Python 2 named by mistake reaches the version check and says so.
LOADER_SAYS = "slurmlab: "
FUNCTION_LOADER = """\
import socket, sys
path, kernel_python, kernel_cloudpickle = sys.argv[1:4]
here = "%s on %s" % (sys.executable, socket.gethostname())
python = "%d.%d" % tuple(sys.version_info[:2])
if python != kernel_python:
    sys.exit("slurmlab: this step's Python is %s (%s), the kernel's is %s: a function is sent as cloudpickle's"
             " bytecode, which only the same Python version runs" % (python, here, kernel_python))
for stream in (sys.stdout, sys.stderr):
    stream.reconfigure(line_buffering=True)  # each line to the cell as the function prints it, not at its end
try:
    import cloudpickle
except ImportError as exc:
    sys.exit("slurmlab: cloudpickle is not importable by this step's Python (%s): %s" % (here, exc))
import pickle
try:
    fh = open(path, "rb")
except (IOError, OSError) as exc:
    sys.exit("slurmlab: this step's Python (%s) cannot read the function's pickle: %s" % (here, exc))
try:
    with fh:
        func = pickle.load(fh)
except Exception as exc:
    sys.exit("slurmlab: this step's Python (%s) could not unpickle the function (cloudpickle %s there, %s in"
             " the kernel): %s: %s" % (here, getattr(cloudpickle, "__version__", "?"), kernel_cloudpickle,
                                       type(exc).__name__, exc))
result = func()
if result is not None:
    print(result)
"""

# where the pickle of a function's step is written on the cluster's side (the remote user's home, which the nodes
# are expected to share with the login node, as the local home is with this machine)
REMOTE_STEPS_FOLDER = "~/.cache/slurmlab/steps"
# Writes the base64 text on stdin to a new file there, readable by its owner alone, and prints its absolute path
# (one sh word: the link quotes it, and the remote sh runs it; mktemp makes a new name that no other step has);
# first it removes the pickles older than a day.
_REMOTE_STORE = (
    'umask 077; folder="$HOME/.cache/slurmlab/steps"; mkdir -p "$folder" || exit 1; '
    # the pickles a kernel that died mid-step left behind: a day old is past any step's start (each is read
    # once, as its step starts)
    'find "$folder" -maxdepth 1 -name "step-*" -type f -mmin +1440 -exec rm -f -- {} + 2>/dev/null; '
    'path=$(mktemp "$folder/step-XXXXXXXXXX") || exit 1; '
    'if base64 -d > "$path"; then printf "%s\\n" "$path"; else rm -f "$path"; exit 1; fi'
)
# a pickle of a function that holds data takes time to send: at least this many base64 characters a second
_STORE_RATE = 100_000


def _cloudpickle() -> ModuleType:
    from slurmlab._extras import require

    return require("cloudpickle", feature="running a Python function as a step", extra="widgets")


def pickle_function(func: Callable[[], object]) -> bytes:
    """``func`` as cloudpickle pickles it (its bytecode, and what it refers to)."""
    return bytes(_cloudpickle().dumps(func))


def kernel_python_version() -> str:
    """This Python's major.minor, which the step's Python must have to run a pickled function."""
    return f"{sys.version_info[0]}.{sys.version_info[1]}"


def function_argv(python: str, path: str) -> list[str]:
    """The command that runs the function pickled at ``path`` with ``python`` (on the nodes)."""
    version = str(getattr(_cloudpickle(), "__version__", "?"))
    return [python, "-c", FUNCTION_LOADER, path, kernel_python_version(), version]


def store_locally(data: bytes) -> str:
    """Write a pickle to a new file in this machine's home, which the nodes share (0600: it may hold a secret)."""
    import tempfile

    fd, path = tempfile.mkstemp(prefix="slurmlab-step-", suffix=".pkl", dir=os.path.expanduser("~"))
    with os.fdopen(fd, "wb") as fh:
        fh.write(data)
    return path


def remote_store_argv() -> list[str]:
    """The remote command that writes the base64 text on its stdin to a new 0600 file under
    :data:`REMOTE_STEPS_FOLDER` and prints the file's absolute path."""
    return ["sh", "-c", _REMOTE_STORE]


def store_remotely(runner: Runner, data: bytes) -> str:
    """Write a pickle on the cluster's side of ``runner``'s SSH link, through the runner (one command, the pickle
    as base64 on its stdin), and return its absolute path there."""
    import base64

    text = base64.encodebytes(data).decode("ascii")
    where = runner.ssh.target.url() if runner.ssh is not None else "this machine"
    try:
        out = runner.run(
            remote_store_argv(), input=text, timeout=runner.timeout + len(text) / _STORE_RATE
        ).stdout
    except SlurmError as exc:
        if isinstance(exc, ControllerDownError):  # the link is down: its own words say so
            raise
        raise SlurmlabError(
            f"could not write the function's pickle under {REMOTE_STEPS_FOLDER} on {where}: "
            + (exc.stderr.strip() or str(exc)),
            hint="free or fix that folder in your home there, or run a script with an argv list instead",
        ) from None
    path = out.strip()
    if not path.startswith("/") or "\n" in path:
        raise SlurmlabError(
            f"writing the function's pickle on {where} printed {out!r}, not the file's path",
            hint="a login script there that prints (.bashrc, .profile) must stay quiet when not interactive",
        )
    return path


def remove_stored(runner: Runner, path: str) -> None:
    """Remove a function's pickle once its step has ended, on whichever side it was written."""
    if runner.ssh is None:
        with contextlib.suppress(OSError):
            os.unlink(path)
        return
    try:
        removed = runner.run(["rm", "-f", "--", path], check=False)
        said = removed.stderr.strip() or f"exit code {removed.returncode}"
    except Exception as exc:  # a timeout, or a link that is closed
        removed, said = None, str(exc)
    if removed is None or not removed.ok:  # the link went down with the step: the file stays, said where
        log.warning("slurmlab: could not remove %s on the cluster (%s); remove it yourself", path, said)


@contextlib.contextmanager
def function_command(
    runner: Runner, func: Callable[[], object], python: str | None = None
) -> Iterator[list[str]]:
    """The command that runs ``func`` on the nodes, with its pickle written for the time of the ``with``.

    Locally the pickle goes to this machine's home and runs with this kernel's Python (the nodes share both);
    over SSH it is written on the cluster's side (:func:`store_remotely`) and runs with ``python3`` of the
    cluster's PATH. ``python`` names another interpreter. The file is removed however the step ends."""
    data = pickle_function(func)
    path = store_locally(data) if runner.ssh is None else store_remotely(runner, data)
    try:
        yield function_argv(python or runner.python(), path)
    finally:
        remove_stored(runner, path)


def run_function(
    runner: Runner, func: Callable[[], object], python: str | None, run: Callable[[list[str]], StepResult]
) -> StepResult:
    """Run ``func`` as a step through ``run(argv)`` (``python`` or the runner's Python runs it), its pickle
    written for the step's time; what the loader said when it could not run it is raised as the kernel's
    error (:func:`loader_failure`)."""
    interpreter = python or runner.python()
    with function_command(runner, func, interpreter) as argv:
        result = run(argv)
    failure = loader_failure(result, interpreter)
    if failure is not None:
        raise failure
    return result


# (words of what the loader says, the next step for the user: {python} is the step's interpreter,
# {version} the kernel's major.minor)
_LOADER_HINTS = (
    (
        "this step's Python is ",
        "name a Python {version} of the nodes with python= (alloc.srun(func, python='python{version}')), "
        "or run this kernel with the nodes' Python version",
    ),
    (
        "cloudpickle is not importable",
        "install it for that Python on the cluster ({python} -m pip install --user cloudpickle), "
        "or name a Python that has it with python=",
    ),
    (
        "cannot read the function's pickle",
        "the nodes must see the home the pickle was written in (~/.cache/slurmlab/steps over SSH): run "
        "function steps where they share it, or run a script the nodes can reach as an argv list",
    ),
    (
        "could not unpickle the function",
        "the nodes need the kernel's cloudpickle version and the modules the function refers to by name; or "
        "name a Python that has them with python=",
    ),
)


# a line the loader wrote: its own, or with srun's --label before it ("0: ", padded when there are many tasks)
_LOADER_LINE = re.compile(r"\s*(?:\d+: )?" + re.escape(LOADER_SAYS) + r"(.*)")


def loader_failure(result: StepResult, python: str) -> SlurmlabError | None:
    """What :data:`FUNCTION_LOADER` said on the step's stderr when it could not run the function (``python``
    ran it), as the kernel's error with the next step; None when it ran it (or srun itself failed)."""
    if result.ok or result.interrupted:
        return None
    for line in result.stderr:
        found = _LOADER_LINE.match(line)
        said = found.group(1).strip() if found else ""
        for words, hint in _LOADER_HINTS:
            if words in said:
                return SlurmlabError(
                    f"the function did not run: {said}",
                    hint=hint.format(python=python, version=kernel_python_version()),
                )
    return None
