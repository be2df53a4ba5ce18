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

Its parts live beside it: :mod:`.recordings` (golden files, :class:`Reply`), :mod:`.scripted` (argv
patterns, :class:`Script`) and :mod:`.replay_process` (the child processes behind ``popen``).
"""

from __future__ import annotations

import asyncio
import os
import shlex
import shutil
import subprocess
import tempfile
import threading
import uuid
from collections.abc import Mapping, Sequence

from slurmlab.errors import SlurmNotFoundError
from slurmlab.slurm.runner import DEFAULT_TIMEOUT, INSTALL_HINT, Runner, RunResult
from slurmlab.testing import replay_process
from slurmlab.testing.recordings import GOLDEN_ENV, Reply, golden, golden_dir, listed_commands, recorded
from slurmlab.testing.scripted import ANY, Pattern, Script, UnscriptedCommand, matches_pattern

__all__ = [
    "ANY",
    "GOLDEN_ENV",
    "FakeRunner",
    "Pattern",
    "Reply",
    "Script",
    "UnscriptedCommand",
    "golden",
    "golden_dir",
    "recorded",
]


class FakeRunner(Runner):
    """A :class:`~slurmlab.slurm.runner.Runner` that answers from recorded Slurm output (module docstring).

    Its ``slurm_conf`` is a path that never exists and is unique to this runner, so the version cache and
    the shared poller keep it apart from any real cluster, and a command that escaped to a real Slurm would
    fail. Allocations made through it start no guardian process.
    """

    guarded = False  # no guardian process: there is no cluster it could cancel a recorded job on

    def __init__(
        self,
        *,
        timeout: float = DEFAULT_TIMEOUT,
        env: Mapping[str, str] | None = None,
        cluster: str | None = None,
    ) -> None:
        token = uuid.uuid4().hex[:12]
        super().__init__(
            slurm_conf=f"/nonexistent/slurmlab-fake-{token}/slurm.conf",
            cluster=cluster,
            timeout=timeout,
            env=dict(env or {}),
            munge_probe_after=0,
        )
        self.scripts: list[Script] = []
        self.history: list[list[str]] = []
        self.unscripted: list[list[str]] = []
        self._fake_lock = threading.Lock()
        self._procs: list[subprocess.Popen[str]] = []
        self._held: list[subprocess.Popen[str]] = []
        self._workdir: str | None = None

    # ---- scripting ---------------------------------------------------------------------------------
    def on(
        self,
        pattern: Pattern,
        *,
        stdout: str = "",
        stderr: str = "",
        returncode: int = 0,
        reply: Reply | None = None,
    ) -> Script:
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
        wanted = (
            "00_sinfo_version.txt",
            "s01_squeue.json",
            "s05_scontrol_json_show_job_d.json",
            "s06_scontrol_show_job_d.txt",
            "s07_scontrol_json_show_node.json",
            "s08_scontrol_show_node_d.txt",
            "s09_scontrol_json_show_partition.json",
            "s16_scontrol_show_partition.txt",
            "s20_sinfo_partitions.txt",
            "s13_scontrol_json_show_steps.json",
            "s13b_scontrol_show_steps.txt",
            "s21_squeue_brief.txt",
            "s22_squeue_owners.txt",
            "s23_scontrol_ping.txt",
        )
        listed = listed_commands(golden_dir() / version)
        self.replay(*(f"{version}/{n}" for n in wanted if n in listed))

    def called(self, pattern: Pattern) -> list[list[str]]:
        """Every argv run so far that matches ``pattern``."""
        with self._fake_lock:
            return [list(a) for a in self.history if matches_pattern(list(pattern), a)]

    def _reply(self, args: list[str]) -> Reply:
        with self._fake_lock:
            for script in self.scripts:
                if script.matches(args):
                    return script.take()
            self.unscripted.append(list(args))
        raise UnscriptedCommand(
            f"FakeRunner has no recorded output for {shlex.join(args)}: script it with "
            f"fake.on([...], stdout=golden(...)) or fake.replay(...)"
        )

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
            raise SlurmNotFoundError(
                f"the Slurm command {command!r} is not installed or not on PATH",
                argv=[command],
                hint=INSTALL_HINT,
            )
        return f"/usr/bin/{command}"

    def run(
        self,
        argv: Sequence[str],
        *,
        timeout: float | None = None,
        check: bool = True,
        input: str | None = None,
        env: Mapping[str, str] | None = None,
    ) -> RunResult:
        args = self._check_argv(argv)
        reply = self._reply(args)
        if reply.hold:
            raise UnscriptedCommand(
                f"{shlex.join(args)} was run to completion but scripted as held (held replies are for popen)"
            )
        result = RunResult(tuple(args), reply.returncode, reply.stdout, reply.stderr, 0.0)
        if check and reply.returncode != 0:
            raise self.failure(args, reply.returncode, reply.stderr, env=self.environ(env))
        return result

    async def arun(
        self,
        argv: Sequence[str],
        *,
        timeout: float | None = None,
        check: bool = True,
        input: str | None = None,
        env: Mapping[str, str] | None = None,
    ) -> RunResult:
        await asyncio.sleep(0)  # a real subprocess yields to the loop too
        return self.run(argv, timeout=timeout, check=check, input=input, env=env)

    def popen(
        self,
        argv: Sequence[str],
        *,
        env: Mapping[str, str] | None = None,
        stdin: int | None = subprocess.DEVNULL,
        merge_stderr: bool = False,
    ) -> subprocess.Popen[str]:
        args = self._check_argv(argv)
        reply = self._reply(args)
        with self._fake_lock:
            if self._workdir is None:
                self._workdir = tempfile.mkdtemp(prefix="slurmlab-fake-")
            path = os.path.join(self._workdir, f"{len(self.history)}-{uuid.uuid4().hex[:8]}.json")
        proc = replay_process.start(reply, path, stdin=stdin, merge_stderr=merge_stderr)
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
        return replay_process.release(held)

    def close(self) -> None:
        """End what this runner started: held and running replay processes, its shared poller."""
        from slurmlab.slurm.poller import drop_poller

        poller = drop_poller(self)
        if poller is not None:
            poller.stop()
        with self._fake_lock:
            procs, self._procs, self._held = self._procs, [], []
        replay_process.end(procs)
        if self._workdir is not None:
            shutil.rmtree(self._workdir, ignore_errors=True)
            self._workdir = None

    def __enter__(self) -> FakeRunner:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()
