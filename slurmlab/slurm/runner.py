"""The one place where Slurm commands run.

Every command is an argv list (never a shell string), runs with a timeout so a hung
controller cannot hang the caller, and honours ``SLURM_CONF`` and cluster selection.
Failures become :mod:`slurmlab.errors` exceptions that keep Slurm's own message
(:mod:`slurmlab.slurm.failures` reads it).

A command that has not answered after ``munge_probe_after`` seconds (2 s) is asked about once: when munged
does not work, or (for a command that asks slurmctld alone) ``scontrol ping`` finds no controller up, the
command is stopped and :class:`MungeError` or :class:`ControllerDownError` says so
(:mod:`slurmlab.slurm.stall`); a command that answers in time costs nothing more. Processes started in the
background (:meth:`Runner.popen`: salloc, steps) get the same munge probe and words from :meth:`Runner.watch`,
and :meth:`Runner.failure` gives any failed command's words the runner's hint.

``Runner(ssh=SshLink(...))`` runs the same argv on another machine over one multiplexed OpenSSH connection
(:mod:`slurmlab.slurm.ssh`): each word quoted on its own, the runner's variables exported there, signals of a
background command passed on (:mod:`slurmlab.slurm.ssh.relay`), a failed link said in words
(:class:`~slurmlab.slurm.ssh.SshLinkError`). munged is not probed there (its socket is on the other machine):
a stalled command is stopped by its timeout, and ``scontrol ping`` still runs there to tell a dead controller.
"""

from __future__ import annotations

import asyncio
import contextlib
import os
import shutil
import subprocess
import sys
import threading
import time
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import ClassVar

from slurmlab.core.gpu.hardware_profile import HARDWARE_FILE
from slurmlab.core.jsontypes import JSONObject
from slurmlab.errors import SlurmError
from slurmlab.slurm import children, failures, identity, stall
from slurmlab.slurm.failures import INSTALL_HINT, classify_failure, not_installed
from slurmlab.slurm.job_environment import login_environment
from slurmlab.slurm.munge import (
    DEFAULT_MUNGE_SOCKET,
    MUNGE_PROBE_TIMEOUT,
    MungeProblem,
    munge_socket,
    probe_munge,
)
from slurmlab.slurm.ssh import SshLink, relay_signals_held
from slurmlab.slurm.stall import StallWatch

__all__ = [
    "DECODE_ERRORS",
    "DEFAULT_MUNGE_SOCKET",
    "DEFAULT_TIMEOUT",
    "ENCODING",
    "INSTALL_HINT",
    "MUNGE_PROBE_AFTER",
    "MungeProblem",
    "RunResult",
    "Runner",
    "StallWatch",
    "classify_failure",
    "get_runner",
    "munge_socket",
    "probe_munge",
    "set_runner",
]

DEFAULT_TIMEOUT = 30.0
# How every byte a Slurm command prints is read (other users write part of it): a byte that is not UTF-8
# becomes U+FFFD, so it neither takes a listing down nor stops a step's output pump.
ENCODING, DECODE_ERRORS = "utf-8", "replace"
# a Slurm command answers in milliseconds when all is well; after this long, find out whether munged is the cause
MUNGE_PROBE_AFTER = 2.0


def _flatten_env(env: Mapping[str, str]) -> dict[str, str]:
    return {str(k): str(v) for k, v in env.items()}


@dataclass(frozen=True)
class RunResult:
    """What a finished command printed."""

    argv: tuple[str, ...]
    returncode: int
    stdout: str
    stderr: str
    duration: float

    @property
    def ok(self) -> bool:
        return self.returncode == 0


def _with_sandbox_tools(conf: str | None, path: str) -> str:
    """``path`` with a slurmlab sandbox's stand-in tools first, when ``conf`` is a sandbox's slurm.conf.

    slurmstepd looks a step's command (``srun nvidia-smi``) up in the PATH srun sends, before the sandbox's
    TaskProlog can add its ``bin`` folder (see :mod:`slurmlab.sandbox.standin`); so srun's own PATH must have it.
    """
    if not conf:
        return path
    folder = os.path.dirname(os.path.abspath(conf))
    tools = os.path.join(folder, "bin")
    if not os.path.isfile(os.path.join(folder, HARDWARE_FILE)) or tools in path.split(os.pathsep):
        return path
    return tools + os.pathsep + path if path else tools


@dataclass
class Runner:
    """Runs Slurm commands.

    ``slurm_conf`` and ``cluster`` select which Slurm to talk to (``SLURM_CONF`` and
    ``SLURM_CLUSTERS``); ``env`` adds variables. ``timeout`` bounds every call.
    ``munge_probe_after``: seconds a command may take before munged is probed (0: never).

    Inside a Slurm job, commands run without the job's variables, as from a login node
    (:func:`slurmlab.slurm.job_environment.login_environment`); ``in_own_job=True`` keeps them, for steps in
    that very job only.
    """

    slurm_conf: str | None = None
    cluster: str | None = None
    timeout: float = DEFAULT_TIMEOUT
    env: Mapping[str, str] = field(default_factory=dict)
    munge_probe_after: float = MUNGE_PROBE_AFTER
    in_own_job: bool = field(default=False, compare=False)  # which environment, not which Slurm
    # the login node whose Slurm this runner drives (None: this machine's)
    ssh: SshLink | None = None
    # the Python that steps and experiments run on the nodes where none is named: a cluster's shared environment
    # with slurmlab installed (None: SLURMLAB_NODE_PYTHON, else the default of :meth:`python`)
    node_python: str | None = None
    # whether allocations made through this runner get the per-kernel guardian (a replaying runner, which has
    # no cluster to cancel on, says no)
    guarded: ClassVar[bool] = True
    calls: int = field(default=0, init=False, compare=False)
    _lock: threading.Lock = field(default_factory=threading.Lock, init=False, repr=False, compare=False)

    # ---- environment -------------------------------------------------------------------
    def environ(self, extra: Mapping[str, str] | None = None) -> dict[str, str]:
        """The environment a command runs with: this process's, less a surrounding job's variables unless
        ``in_own_job``, then ``env``, the configuration, the cluster and ``extra``. Over SSH: only ``env``, the
        configuration, the cluster and ``extra``, set on top of the remote login's environment."""
        if self.ssh is not None:
            return self._remote_environ(extra)
        env = login_environment(os.environ, keep_job=self.in_own_job)
        env.update(_flatten_env(self.env))
        if self.slurm_conf:
            env["SLURM_CONF"] = self.slurm_conf
        env["PATH"] = _with_sandbox_tools(self.configuration(), env.get("PATH", ""))
        if self.cluster:
            env["SLURM_CLUSTERS"] = self.cluster
        if extra:
            env.update(_flatten_env(extra))
        return env

    def _remote_environ(self, extra: Mapping[str, str] | None) -> dict[str, str]:
        env = _flatten_env(self.env)
        if self.slurm_conf:
            env["SLURM_CONF"] = self.slurm_conf
        if self.cluster:
            env["SLURM_CLUSTERS"] = self.cluster
        env.update(_flatten_env(extra or {}))
        return env

    def _spawn(self, args: list[str], env: dict[str, str]) -> tuple[list[str], dict[str, str]]:
        """The local argv and environment that run ``args`` with ``env`` (from :meth:`environ`): as they are,
        or through the SSH link."""
        if self.ssh is None:
            return args, env
        return self.ssh.command(args, env), self.ssh.environ(os.environ)

    def which(self, command: str) -> str:
        """Full path of a Slurm command, or :class:`SlurmNotFoundError` with the install line (over SSH: the
        name, which the remote PATH resolves)."""
        if self.ssh is not None:
            return command
        path = shutil.which(command, path=self.environ().get("PATH"))
        if path is None:
            raise not_installed([command])
        return path

    def python(self) -> str:
        """The Python a step runs where no other is named (``%%srun --python``, the experiments' workers):
        ``node_python``, else ``SLURMLAB_NODE_PYTHON`` of this process, else this kernel's, which the nodes
        share with this machine; over SSH ``python3`` of the cluster's PATH (this machine's path means nothing
        there)."""
        named = self.node_python or os.environ.get("SLURMLAB_NODE_PYTHON", "").strip()
        if named:
            return named
        return "python3" if self.ssh is not None else sys.executable

    def configuration(self) -> str | None:
        """The slurm.conf this runner's commands read: its own, else ``SLURM_CONF`` of this process (None:
        Slurm's default or configless; over SSH, this process's ``SLURM_CONF`` is not the cluster's)."""
        if self.ssh is not None:
            return self.slurm_conf
        return self.slurm_conf or os.environ.get("SLURM_CONF")

    def cluster_key(self) -> tuple[str | None, str | None, str | None]:
        """Which cluster this runner's commands reach: its SSH login (None: this machine), its slurm.conf and its
        cluster name. Job ids and inventories belong to one cluster, so what is shared per cluster (the poller,
        the inventory) is kept per key: a kernel that moves to ``ssh://…`` never keeps the local one's."""
        return (self.ssh.target.url() if self.ssh is not None else None, self.configuration(), self.cluster)

    def settings(self) -> JSONObject:
        """What selects this runner's Slurm, as JSON values, for a process that runs it later from elsewhere
        (the allocation guardian runs from "/", and this process's environment may change)."""
        conf = self.configuration()
        settings: JSONObject = {
            "conf": os.path.abspath(conf) if conf and self.ssh is None else conf,
            "cluster": self.cluster or (None if self.ssh else os.environ.get("SLURM_CLUSTERS")),
            "env": dict(_flatten_env(self.env).items()),
            "timeout": self.timeout,
        }
        if self.ssh is not None:
            settings["ssh"] = self.ssh.settings()  # type: ignore[assignment]
        return settings

    @classmethod
    def from_settings(cls, settings: Mapping[str, object]) -> Runner:
        """The runner that :meth:`settings` describes; a value of the wrong type is left at its default."""
        env = settings.get("env")
        timeout = settings.get("timeout")
        conf, cluster, ssh = settings.get("conf"), settings.get("cluster"), settings.get("ssh")
        return cls(
            ssh=SshLink.from_settings(ssh) if isinstance(ssh, dict) else None,
            slurm_conf=conf if isinstance(conf, str) and conf else None,
            cluster=cluster if isinstance(cluster, str) and cluster else None,
            env=env if isinstance(env, dict) else {},
            timeout=float(timeout) if isinstance(timeout, (int, float)) and timeout > 0 else DEFAULT_TIMEOUT,
        )

    def _check_argv(self, argv: Sequence[str]) -> list[str]:
        if isinstance(argv, str) or not argv:
            raise TypeError("argv must be a non-empty list of strings, never a shell string")
        out = [str(a) for a in argv]
        conf = self.configuration()
        if (
            conf and self.ssh is None and not os.path.exists(conf)
        ):  # Slurm's commands retry a missing file for 60 s before they fail
            raise failures.missing_configuration(conf, out)
        with self._lock:
            self.calls += 1
        return out

    # ---- a command that does not answer: munged, or a dead controller (slurmlab.slurm.stall) -------------
    def _probe_after(self, limit: float) -> float | None:
        return None if self.munge_probe_after <= 0 else min(self.munge_probe_after, limit / 2)

    def _munge_problem(self, env: Mapping[str, str], remaining: float) -> MungeProblem | None:
        if self.ssh is not None:
            return None  # munged's socket is on the other machine: the command's timeout decides there
        path = munge_socket(env.get("SLURM_CONF"))
        # never so short that a healthy but loaded munged is taken for a frozen one
        return (
            None if path is None else probe_munge(path, timeout=min(MUNGE_PROBE_TIMEOUT, max(remaining, 1.0)))
        )

    def _stall(
        self, args: list[str], env: Mapping[str, str], start: float, limit: float, stderr: str = ""
    ) -> SlurmError | None:
        """Why ``args`` (started at ``start``) has not answered yet: munged, or a controller that ``scontrol ping``
        finds down (see :mod:`slurmlab.slurm.stall`); None when neither, and it is left to run."""
        conf = env.get("SLURM_CONF")
        problem = self._munge_problem(env, limit - (time.monotonic() - start))
        if problem is not None:
            return stall.munge_failure(args, problem, time.monotonic() - start, conf, stderr)
        remaining = limit - (time.monotonic() - start)
        if remaining <= 0 or not stall.asks_controller(args, env):
            return None
        said = self._ping(env, min(stall.STALL_PING_TIMEOUT, remaining))
        return (
            None
            if said is None
            else stall.controller_failure(args, said, time.monotonic() - start, conf, stderr)
        )

    def _ping(self, env: Mapping[str, str], timeout: float) -> str | None:
        """``scontrol ping``'s words when it finds every controller down; None when one is up or it proves nothing."""
        with self._lock:
            self.calls += 1
        argv, environ = self._spawn(list(stall.PING_ARGV), dict(env))
        try:
            proc = subprocess.Popen(
                argv,
                stdin=subprocess.DEVNULL,
                stdout=subprocess.PIPE,
                stderr=subprocess.PIPE,
                encoding=ENCODING,
                errors=DECODE_ERRORS,
                env=environ,
            )
        except OSError:
            return None  # missing: the command's own timeout decides
        # asked from a poll round's daemon thread too: it must not outlive the process either (a ping left
        # running at exit failed a CI stage)
        children.track(proc)
        with proc:
            try:
                out, _ = proc.communicate(timeout=timeout)
            except subprocess.TimeoutExpired:
                proc.kill()
                proc.communicate()
                return None  # busy or frozen: the command's own timeout decides
            finally:
                children.untrack(proc)
        return stall.down_words(out)

    def failure(
        self,
        argv: Sequence[str],
        returncode: int,
        stderr: str,
        *,
        env: Mapping[str, str] | None = None,
        quote: bool = True,
    ) -> SlurmError:
        """What a failed command means, in the runner's words: Slurm's message classified, a munge failure named
        by a probe of the socket, and the hint that fits this runner's configuration (a sandbox's own command,
        with its ``--dir``). ``quote=False``: Slurm's words stay out of the message (a step showed them)."""
        environ = self.environ() if env is None else env
        args = [str(a) for a in argv]
        if self.ssh is not None:
            cut = self.ssh.failure(returncode, stderr)
            if cut is not None:
                cut.argv = args
                return cut
        return stall.explain_failure(
            args,
            returncode,
            stderr,
            environ.get("SLURM_CONF"),
            lambda: self._munge_problem(environ, 1.0),
            quote=quote,
        )

    def watch(
        self,
        proc: subprocess.Popen[str],
        argv: Sequence[str],
        *,
        answered: Callable[[], bool],
        on_error: Callable[[SlurmError], None] | None = None,
        env: Mapping[str, str] | None = None,
    ) -> StallWatch:
        """The munge probe of :meth:`run` for ``proc`` from :meth:`popen` (salloc, a step), which has answered when
        ``answered()`` says so: when munged does not work, the process is stopped and the watch's ``error`` (also
        handed to ``on_error``) says why in the words of :meth:`run`. Call ``cancel()`` once it has answered."""
        environ = self.environ(env)
        return StallWatch(
            proc,
            [str(a) for a in argv],
            environ.get("SLURM_CONF"),
            self._probe_after(float("inf")),
            lambda: self._munge_problem(environ, MUNGE_PROBE_TIMEOUT),
            answered,
            on_error,
        )

    def _prepare(
        self, argv: Sequence[str], timeout: float | None, env: Mapping[str, str] | None
    ) -> tuple[list[str], float, dict[str, str], float]:
        """What :meth:`run` and :meth:`arun` start from: the checked argv, the time limit, the environment
        and the start time."""
        return (
            self._check_argv(argv),
            self.timeout if timeout is None else timeout,
            self.environ(env),
            time.monotonic(),
        )

    # ---- sync ----------------------------------------------------------------------------------
    def run(
        self,
        argv: Sequence[str],
        *,
        timeout: float | None = None,
        check: bool = True,
        input: str | None = None,
        env: Mapping[str, str] | None = None,
    ) -> RunResult:
        """Run ``argv`` to completion. Raises on failure when ``check`` (the default)."""
        args, limit, environ, start = self._prepare(argv, timeout, env)
        spawn, spawn_env = self._spawn(args, environ)
        try:
            proc = subprocess.Popen(
                spawn,
                stdin=subprocess.PIPE if input is not None else subprocess.DEVNULL,
                stdout=subprocess.PIPE,
                stderr=subprocess.PIPE,
                encoding=ENCODING,
                errors=DECODE_ERRORS,
                env=spawn_env,
            )
        except FileNotFoundError as exc:
            raise not_installed(args) from exc
        # a poll round's daemon thread may be waiting for it when the process exits (slurmlab.slurm.children)
        children.track(proc)
        with proc:
            try:
                out, err = self._communicate(proc, args, input, limit, start, environ)
            except subprocess.TimeoutExpired as exc:
                proc.kill()
                proc.wait()
                raise failures.timed_out(args, limit, _text(exc.stderr)) from exc
            except BaseException:
                proc.kill()
                proc.wait()
                raise
            finally:
                children.untrack(proc)
        result = RunResult(tuple(args), proc.returncode, out, err, time.monotonic() - start)
        if check and proc.returncode != 0:
            raise self.failure(args, proc.returncode, err, env=environ)
        return result

    def _communicate(
        self,
        proc: subprocess.Popen[str],
        args: list[str],
        input: str | None,
        limit: float,
        start: float,
        env: Mapping[str, str],
    ) -> tuple[str, str]:
        after = self._probe_after(limit)
        if after is None:
            return proc.communicate(input, timeout=limit)
        try:
            return proc.communicate(input, timeout=after)
        except subprocess.TimeoutExpired as exc:
            partial = _text(exc.stderr)
        trouble = self._stall(args, env, start, limit, partial)
        if trouble is not None and proc.poll() is None:
            raise trouble
        # retrying communicate() loses no output (and sends the input only once)
        return proc.communicate(timeout=max(limit - (time.monotonic() - start), 0.01))

    def popen(
        self,
        argv: Sequence[str],
        *,
        env: Mapping[str, str] | None = None,
        stdin: int | None = subprocess.DEVNULL,
        merge_stderr: bool = False,
    ) -> subprocess.Popen[str]:
        """Start ``argv`` in the background (for salloc and streamed steps); the caller owns it."""
        args = self._check_argv(argv)
        spawn, environ = args, self.environ(env)
        held: contextlib.AbstractContextManager[None] = contextlib.nullcontext()
        if self.ssh is not None:  # a relay passes the caller's signals (Ctrl-C) on to the remote process
            spawn, environ = self.ssh.relayed(args, environ), self.ssh.environ(os.environ)
            held = relay_signals_held()  # it starts with them blocked: one sent as it starts is not lost
        try:
            with held:
                return subprocess.Popen(
                    spawn,
                    stdin=stdin,
                    stdout=subprocess.PIPE,
                    stderr=subprocess.STDOUT if merge_stderr else subprocess.PIPE,
                    encoding=ENCODING,
                    errors=DECODE_ERRORS,
                    bufsize=1,
                    env=environ,
                    start_new_session=True,
                )
        except FileNotFoundError as exc:
            raise not_installed(args) from exc

    # ---- async twin ------------------------------------------------------------------------
    async def arun(
        self,
        argv: Sequence[str],
        *,
        timeout: float | None = None,
        check: bool = True,
        input: str | None = None,
        env: Mapping[str, str] | None = None,
    ) -> RunResult:
        """Asyncio twin of :meth:`run`: same argv, timeout, munge probe and errors, never blocks the loop."""
        args, limit, environ, start = self._prepare(argv, timeout, env)
        spawn, spawn_env = self._spawn(args, environ)
        try:
            proc = await asyncio.create_subprocess_exec(
                *spawn,
                stdin=asyncio.subprocess.PIPE if input is not None else asyncio.subprocess.DEVNULL,
                stdout=asyncio.subprocess.PIPE,
                stderr=asyncio.subprocess.PIPE,
                env=spawn_env,
            )
        except FileNotFoundError as exc:
            raise not_installed(args) from exc
        talk = asyncio.ensure_future(proc.communicate(input.encode() if input is not None else None))
        try:
            after = self._probe_after(limit)
            if after is not None:
                done, _ = await asyncio.wait({talk}, timeout=after)
                if not done:
                    loop = asyncio.get_running_loop()
                    trouble = await loop.run_in_executor(None, self._stall, args, environ, start, limit)
                    if trouble is not None and not talk.done():
                        raise trouble
            remaining = max(limit - (time.monotonic() - start), 0.01)
            try:
                out, err = await asyncio.wait_for(asyncio.shield(talk), timeout=remaining)
            except asyncio.TimeoutError as exc:
                raise failures.timed_out(args, limit) from exc
        finally:
            if not talk.done():
                if proc.returncode is None:
                    proc.kill()
                # a grandchild may hold the pipes open: stop reading instead of waiting for their end
                talk.cancel()
                await asyncio.gather(talk, return_exceptions=True)
                await proc.wait()
        rc = proc.returncode if proc.returncode is not None else -1
        result = RunResult(tuple(args), rc, _text(out), _text(err), time.monotonic() - start)
        if check and rc != 0:
            raise self.failure(args, rc, result.stderr, env=environ)
        return result


def _text(data: str | bytes | None) -> str:
    if data is None:
        return ""
    if isinstance(data, bytes):
        return data.decode(ENCODING, errors=DECODE_ERRORS)
    return data


_default: Runner | None = None
_default_lock = threading.Lock()


def get_runner() -> Runner:
    """The process-wide runner (follows ``SLURM_CONF`` of the environment unless replaced)."""
    global _default
    with _default_lock:
        if _default is None:
            _default = Runner()
        return _default


def set_runner(runner: Runner) -> Runner:
    """Replace the process-wide runner (e.g. to point at a sandbox); returns the old one. A runner over SSH
    makes its login's user on the cluster the one whose jobs slurmlab acts on
    (:func:`slurmlab.slurm.identity.follow`)."""
    global _default
    with _default_lock:
        old = _default if _default is not None else Runner()
        _default = runner
        return old


def _cluster_user() -> tuple[int, str] | None:
    """Whom the process-wide runner's commands run as on the cluster: over SSH, the login's user there."""
    link = getattr(_default, "ssh", None)
    return link.remote_user if link is not None else None


# whose jobs are "mine" follows the process-wide runner, however it was replaced
identity.follow(_cluster_user)
