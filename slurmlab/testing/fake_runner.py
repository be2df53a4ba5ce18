"""A Runner that replays what a real Slurm printed, for fast tests of everything above the runner.

:class:`FakeRunner` has the interface of :class:`slurmlab.slurm.runner.Runner` (``run``, ``arun``,
``popen``, ``environ``, ``which``, ``calls``) and is one: the Allocation state machine, the queries,
the shared poller, the magics and the server take it wherever they take a Runner. It runs no Slurm.
Each command is answered by the newest script whose argv pattern matches, with output recorded from a
real Slurm — the project's golden files (``tests/data/slurm/<version>/``, written by
``scripts/record-golden.py`` from a sandbox, each command listed with its argv and exit code in
``commands.txt``) or your own recordings. It never invents an answer: a command nothing was scripted
for raises :class:`UnscriptedCommand` (and is kept in ``unscripted``), and every argv it was given is
kept in ``history`` so that a test can assert on what was run.

Failures go through the Runner's own classification, so a recorded ``Unable to contact slurm controller``
raises ControllerDownError and ``Invalid job id specified`` JobNotFoundError, as with a real Slurm.
Commands started with ``popen`` (``salloc`` in the background, ``srun`` steps) are real child processes
that write the recorded text and exit with the recorded code; a *held* reply stays running after its first
part (a pending ``salloc``) until :meth:`FakeRunner.release`, or until a signal, which it answers with
the recorded text of an interrupted salloc. Example::

    from slurmlab.slurm.allocation import Allocation
    from slurmlab.testing import ANY, FakeRunner, recorded

    fake = FakeRunner()
    fake.replay("22.05/00_sinfo_version.txt", "22.05/l02_squeue_brief_pending.txt",
                "22.05/l02_scontrol_show_job_d_pending.txt")
    fake.on(["salloc", "--no-shell", ...],
            reply=recorded("22.05/l01_salloc_pending.txt").held(after=recorded("22.05/l05_salloc_granted.txt")))
    alloc = Allocation.submit(["--gpus=2", "-t", "10"], runner=fake, validate=False,
                              release_at_exit=False)
    assert alloc.state == "PENDING"                  # salloc said so; squeue then gives the reason
    fake.replay("22.05/l06_squeue_brief_running.txt", "22.05/l06_scontrol_show_job_d_running.txt")
    fake.release()                                   # salloc goes on: "Granted job allocation ..."
    alloc.wait(timeout=10)
    assert ["scontrol", "show", "job", "-d", alloc.job_id] in fake.history
    fake.close()

``fake.on(pattern, stdout=..., stderr=..., returncode=...)`` scripts one answer; ``.then(...)`` on what it
returns adds the next (each call takes the next answer, the last one repeats): a sequence
PENDING → RUNNING → COMPLETED is three ``then``. A pattern lists the arguments: a string matches
itself, :data:`ANY` one argument, a compiled regex one argument it fully matches, and ``...`` any
number of arguments. The golden files are read from ``$SLURMLAB_GOLDEN_DIR`` or the repository's
``tests/data/slurm`` (a source checkout); an installed package has none, so give your own text there.
"""

from __future__ import annotations

import asyncio
import json
import os
import re
import shlex
import shutil
import subprocess
import sys
import tempfile
import threading
import uuid
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field, replace
from pathlib import Path
from types import EllipsisType
from typing import Any

from slurmlab.errors import SlurmNotFoundError
from slurmlab.slurm.runner import DEFAULT_TIMEOUT, INSTALL_HINT, Runner, RunResult

__all__ = [
    "ANY",
    "FakeRunner",
    "Reply",
    "Script",
    "UnscriptedCommand",
    "golden",
    "golden_dir",
    "recorded",
]

GOLDEN_ENV = "SLURMLAB_GOLDEN_DIR"


class _Any:
    def __repr__(self) -> str:
        return "ANY"


ANY: Any = _Any()
"""In an argv pattern: any one argument."""

Pattern = Sequence["str | re.Pattern[str] | EllipsisType | _Any"]


class UnscriptedCommand(AssertionError):
    """The FakeRunner was asked to run a command no script answers."""


# ---- golden files ------------------------------------------------------------------------------------
def golden_dir() -> Path:
    """Where the recorded outputs live: ``$SLURMLAB_GOLDEN_DIR``, else the checkout's tests/data/slurm."""
    override = os.environ.get(GOLDEN_ENV)
    return Path(override) if override else Path(__file__).resolve().parents[2] / "tests" / "data" / "slurm"


def golden(name: str) -> str:
    """The text of one recorded file, e.g. ``golden("22.05/s06_scontrol_show_job_d.txt")``."""
    path = golden_dir() / name
    try:
        return path.read_text()
    except FileNotFoundError:
        raise FileNotFoundError(
            f"no recorded Slurm output {path}: record it with scripts/record-golden.py "
            f"(or point {GOLDEN_ENV} at your recordings)") from None


@dataclass(frozen=True)
class Reply:
    """What one command printed and its exit code.

    For ``popen`` only: ``hold`` keeps the process running after it has written this, until
    :meth:`FakeRunner.release` (then it writes ``after`` and exits with that one's code) or a SIGINT /
    SIGTERM (then it writes ``interrupted`` and exits with its code).
    ``argv`` is the command that printed it, when it was read from a recording.
    """

    stdout: str = ""
    stderr: str = ""
    returncode: int = 0
    hold: bool = False
    after: Reply | None = None
    interrupted: Reply | None = None
    argv: tuple[str, ...] | None = field(default=None, compare=False)

    def held(self, *, after: Reply | None = None, interrupted: Reply | None = None) -> Reply:
        """This output, then wait for release (``after``) or a signal (``interrupted``)."""
        return replace(self, hold=True, after=after, interrupted=interrupted)

    def split_stderr(self, fragment: str) -> tuple[Reply, Reply]:
        """(stderr up to and including the first line containing ``fragment``, the rest): a recorded
        background command cut where it started to wait."""
        lines = self.stderr.splitlines(keepends=True)
        cut = next((i + 1 for i, line in enumerate(lines) if fragment in line), len(lines))
        head = replace(self, stderr="".join(lines[:cut]), stdout="", returncode=0)
        return head, replace(self, stderr="".join(lines[cut:]))


def _commands(version_dir: Path) -> dict[str, tuple[tuple[str, ...], int]]:
    """name -> (argv, exit code) from a recording's commands.txt (``name<TAB>rc=N<TAB>argv``)."""
    out: dict[str, tuple[tuple[str, ...], int]] = {}
    path = version_dir / "commands.txt"
    if not path.is_file():
        return out
    for line in path.read_text().splitlines():
        parts = line.split("\t")
        if len(parts) < 3 or not parts[1].startswith("rc=") or not parts[1][3:].lstrip("-").isdigit():
            continue
        out[parts[0]] = (tuple(shlex.split(parts[2])), int(parts[1][3:]))
    return out


def recorded(name: str) -> Reply:
    """One recorded command, e.g. ``recorded("22.05/l02_squeue_brief_pending.txt")``: its stdout (the
    file), its stderr (``<stem>.stderr``), its exit code and argv (``commands.txt`` beside them).

    A name that commands.txt lists with no file on disk printed nothing on that stream."""
    folder, _, file = name.rpartition("/")
    version_dir = golden_dir() / folder
    listed = _commands(version_dir)
    if file not in listed:
        raise FileNotFoundError(
            f"{version_dir / 'commands.txt'} lists no command {file!r}: record it with scripts/record-golden.py")
    argv, rc = listed[file]
    stem = file.rpartition(".")[0]
    out = version_dir / file
    err = version_dir / f"{stem}.stderr"
    return Reply(out.read_text() if out.is_file() else "", err.read_text() if err.is_file() else "", rc,
                 argv=argv)


# ---- scripts -----------------------------------------------------------------------------------------
def _matches(pattern: Sequence[Any], argv: Sequence[str]) -> bool:
    if not pattern:
        return not argv
    head, rest = pattern[0], pattern[1:]
    if head is Ellipsis:
        return any(_matches(rest, argv[i:]) for i in range(len(argv) + 1))
    if not argv:
        return False
    arg = argv[0]
    if head is ANY:
        ok = True
    elif isinstance(head, re.Pattern):
        ok = head.fullmatch(arg) is not None
    else:
        ok = head == arg
    return ok and _matches(rest, argv[1:])


class Script:
    """The answers to one argv pattern, in order; the last one answers every later call."""

    def __init__(self, pattern: Pattern, replies: list[Reply]) -> None:
        self.pattern = list(pattern)
        self.replies = replies
        self.used = 0

    def then(self, reply: Reply | None = None, *, stdout: str = "", stderr: str = "",
             returncode: int = 0) -> Script:
        """Add the answer the next call gets."""
        self.replies.append(reply if reply is not None else Reply(stdout, stderr, returncode))
        return self

    def matches(self, argv: Sequence[str]) -> bool:
        return _matches(self.pattern, argv)

    def take(self) -> Reply:
        reply = self.replies[min(self.used, len(self.replies) - 1)]
        self.used += 1
        return reply

    def __repr__(self) -> str:
        return f"<Script {self.pattern!r}: {len(self.replies)} replies, used {self.used}>"


# The process behind a popen reply: writes the recorded text, waits when held, answers signals.
# Signals wait while the first part is written (a signal handler writing into a half-written
# buffered stream fails); the writes are unbuffered for the same reason.
_REPLAY = r"""
import json, os, signal, sys
spec = json.load(open(sys.argv[1]))
def emit(part):
    for fd, key in ((1, "stdout"), (2, "stderr")):
        data = part[key].encode()
        while data:
            data = data[os.write(fd, data):]
def on_signal(signum, frame):
    part = spec.get("interrupted")
    if part:
        emit(part)
        os._exit(part["returncode"] & 255)
    os._exit(128 + signum)
signals = {signal.SIGINT, signal.SIGTERM}
signal.pthread_sigmask(signal.SIG_BLOCK, signals)
signal.signal(signal.SIGINT, on_signal)
signal.signal(signal.SIGTERM, on_signal)
emit(spec["first"])
signal.pthread_sigmask(signal.SIG_UNBLOCK, signals)
if spec["hold"]:
    sys.stdin.readline()
    if spec.get("after"):
        emit(spec["after"])
        sys.exit(spec["after"]["returncode"] & 255)
sys.exit(spec["first"]["returncode"] & 255)
"""


def _part(reply: Reply | None) -> dict[str, Any] | None:
    if reply is None:
        return None
    return {"stdout": reply.stdout, "stderr": reply.stderr, "returncode": reply.returncode}


class FakeRunner(Runner):
    """A :class:`~slurmlab.slurm.runner.Runner` that answers from recorded Slurm output (module docstring).

    Its ``slurm_conf`` is a path that never exists and is unique to this runner, so the version cache,
    the shared poller and the guardian keep it apart from any real cluster, and a command that escaped
    to a real Slurm would fail.
    """

    def __init__(self, *, timeout: float = DEFAULT_TIMEOUT, env: Mapping[str, str] | None = None,
                 cluster: str | None = None) -> None:
        token = uuid.uuid4().hex[:12]
        super().__init__(slurm_conf=f"/nonexistent/slurmlab-fake-{token}/slurm.conf", cluster=cluster,
                         timeout=timeout, env=dict(env or {}), munge_probe_after=0)
        self.scripts: list[Script] = []
        self.history: list[list[str]] = []
        self.unscripted: list[list[str]] = []
        self._fake_lock = threading.Lock()
        self._procs: list[subprocess.Popen[str]] = []
        self._held: list[subprocess.Popen[str]] = []
        self._workdir: str | None = None

    # ---- scripting ---------------------------------------------------------------------------------
    def on(self, pattern: Pattern, *, stdout: str = "", stderr: str = "", returncode: int = 0,
           reply: Reply | None = None) -> Script:
        """Answer commands matching ``pattern`` with this output (newest script first)."""
        if isinstance(pattern, str) or not pattern:
            raise TypeError("pattern must be a non-empty list of arguments, e.g. ['sinfo', '--version']")
        script = Script(pattern, [reply if reply is not None else Reply(stdout, stderr, returncode)])
        with self._fake_lock:
            self.scripts.insert(0, script)
        return script

    def replay(self, *names: str) -> list[Script]:
        """Answer each recorded command's exact argv (from commands.txt) with its recorded output.

        Names that share one argv become one sequence, in the order given. All take effect at once, so a
        poller thread never sees one command of a new state beside another of the old one."""
        scripts: dict[tuple[str, ...], Script] = {}
        for name in names:
            reply = recorded(name)
            assert reply.argv is not None
            if reply.argv in scripts:
                scripts[reply.argv].then(reply)
            else:
                scripts[reply.argv] = Script(list(reply.argv), [reply])
        with self._fake_lock:
            self.scripts[:0] = reversed(list(scripts.values()))
        return list(scripts.values())

    def replay_cluster(self, version: str) -> None:
        """Script the cluster-wide state of a recording (version, nodes, partitions, every job, owners,
        brief states, steps, ping): what ``%squeue``, ``%sinfo``, validation and the server ask."""
        wanted = ("00_sinfo_version.txt", "s01_squeue.json", "s05_scontrol_json_show_job_d.json",
                  "s06_scontrol_show_job_d.txt", "s07_scontrol_json_show_node.json", "s08_scontrol_show_node_d.txt",
                  "s09_scontrol_json_show_partition.json", "s16_scontrol_show_partition.txt",
                  "s20_sinfo_partitions.txt", "s13_scontrol_json_show_steps.json", "s13b_scontrol_show_steps.txt",
                  "s21_squeue_brief.txt", "s22_squeue_owners.txt", "s23_scontrol_ping.txt")
        listed = _commands(golden_dir() / version)
        self.replay(*(f"{version}/{n}" for n in wanted if n in listed))

    def called(self, pattern: Pattern) -> list[list[str]]:
        """Every argv run so far that matches ``pattern``."""
        with self._fake_lock:
            return [list(a) for a in self.history if _matches(list(pattern), a)]

    def _reply(self, args: list[str]) -> Reply:
        with self._fake_lock:
            for script in self.scripts:
                if script.matches(args):
                    return script.take()
            self.unscripted.append(list(args))
        raise UnscriptedCommand(
            f"FakeRunner has no recorded output for {shlex.join(args)}: script it with "
            f"fake.on([...], stdout=golden(...)) or fake.replay(...)")

    # ---- the Runner interface ----------------------------------------------------------------------
    def _check_argv(self, argv: Sequence[str]) -> list[str]:
        if isinstance(argv, str) or not argv:
            raise TypeError("argv must be a non-empty list of strings, never a shell string")
        out = [str(a) for a in argv]
        for a in out:  # what subprocess would refuse, refused the same way
            if "\x00" in a:
                raise ValueError("embedded null byte")
            os.fsencode(a)
        with self._lock:
            self.calls += 1
        with self._fake_lock:
            self.history.append(out)
        return out

    def which(self, command: str) -> str:
        with self._fake_lock:
            known = any(s.pattern and s.pattern[0] == command for s in self.scripts)
        if not known:
            raise SlurmNotFoundError(f"the Slurm command {command!r} is not installed or not on PATH",
                                     argv=[command], hint=INSTALL_HINT)
        return f"/usr/bin/{command}"

    def run(self, argv: Sequence[str], *, timeout: float | None = None, check: bool = True,
            input: str | None = None, env: Mapping[str, str] | None = None) -> RunResult:
        args = self._check_argv(argv)
        reply = self._reply(args)
        if reply.hold:
            raise UnscriptedCommand(f"{shlex.join(args)} was run to completion but scripted as held "
                                    "(held replies are for popen)")
        result = RunResult(tuple(args), reply.returncode, reply.stdout, reply.stderr, 0.0)
        if check and reply.returncode != 0:
            raise self._failure(args, reply.returncode, reply.stderr, self.environ(env))
        return result

    async def arun(self, argv: Sequence[str], *, timeout: float | None = None, check: bool = True,
                   input: str | None = None, env: Mapping[str, str] | None = None) -> RunResult:
        await asyncio.sleep(0)  # a real subprocess yields to the loop too
        return self.run(argv, timeout=timeout, check=check, input=input, env=env)

    def popen(self, argv: Sequence[str], *, env: Mapping[str, str] | None = None,
              stdin: int | None = subprocess.DEVNULL, merge_stderr: bool = False) -> subprocess.Popen[str]:
        args = self._check_argv(argv)
        reply = self._reply(args)
        spec = {"first": _part(reply), "hold": reply.hold, "after": _part(reply.after),
                "interrupted": _part(reply.interrupted)}
        with self._fake_lock:
            if self._workdir is None:
                self._workdir = tempfile.mkdtemp(prefix="slurmlab-fake-")
            path = os.path.join(self._workdir, f"{len(self.history)}-{uuid.uuid4().hex[:8]}.json")
        with open(path, "w") as fh:
            json.dump(spec, fh)
        proc = subprocess.Popen(
            [sys.executable, "-I", "-S", "-c", _REPLAY, path],
            stdin=subprocess.PIPE if reply.hold else stdin,
            stdout=subprocess.PIPE,
            stderr=subprocess.STDOUT if merge_stderr else subprocess.PIPE,
            text=True,
            bufsize=1,
            env={"PATH": os.environ.get("PATH", "/usr/bin:/bin")},
            start_new_session=True,  # as Runner.popen: the caller signals its process group
        )
        with self._fake_lock:
            self._procs.append(proc)
            if reply.hold:
                self._held.append(proc)
        return proc

    # ---- control -----------------------------------------------------------------------------------
    def release(self) -> int:
        """Let every held process go on (a pending salloc is granted). Returns how many were released."""
        with self._fake_lock:
            held, self._held = self._held, []
        count = 0
        for proc in held:
            if proc.poll() is not None or proc.stdin is None:
                continue
            try:
                proc.stdin.write("\n")
                proc.stdin.flush()
                count += 1
            except (BrokenPipeError, ValueError):
                continue
        return count

    def close(self) -> None:
        """End what this runner started: held and running replay processes, its shared poller."""
        from slurmlab.slurm import poller as poller_module

        key = (self.slurm_conf, self.cluster)
        with poller_module._poller_lock:
            poller = poller_module._pollers.pop(key, None)
        if poller is not None:
            poller.stop()
        with self._fake_lock:
            procs, self._procs, self._held = self._procs, [], []
        for proc in procs:
            if proc.poll() is None:
                proc.kill()
            try:
                proc.wait(timeout=5)
            except subprocess.TimeoutExpired:
                pass
            if proc.stdin is not None:  # stdout/stderr belong to their readers (threads may still read)
                try:
                    proc.stdin.close()
                except OSError:
                    pass
        if self._workdir is not None:
            shutil.rmtree(self._workdir, ignore_errors=True)
            self._workdir = None

    def __enter__(self) -> FakeRunner:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()
