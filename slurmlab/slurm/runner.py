"""The one place where Slurm commands run.

Every command is an argv list (never a shell string), runs with a timeout so a hung
controller cannot hang the caller, and honours ``SLURM_CONF`` and cluster selection.
Failures become :mod:`slurmlab.errors` exceptions that keep Slurm's own message.

A stopped or frozen munged makes every Slurm command wait (for its whole timeout) as if the
controller were down. So a command that has not answered after ``munge_probe_after`` seconds
(2 s) has the munge socket of its configuration probed (a connect, then ``munge -n`` with a short
timeout); when munged does not answer, the command is stopped and :class:`MungeError` says so.
A command that answers in time costs nothing more.
"""

from __future__ import annotations

import asyncio
import os
import shutil
import socket
import subprocess
import threading
import time
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path

from slurmlab.errors import (
    ControllerDownError,
    JobNotFoundError,
    MungeError,
    SlurmError,
    SlurmNotFoundError,
    SlurmTimeoutError,
)

__all__ = [
    "DEFAULT_MUNGE_SOCKET",
    "DEFAULT_TIMEOUT",
    "INSTALL_HINT",
    "MUNGE_PROBE_AFTER",
    "MungeProblem",
    "RunResult",
    "Runner",
    "classify_failure",
    "get_runner",
    "munge_socket",
    "probe_munge",
    "set_runner",
]

DEFAULT_TIMEOUT = 30.0
# a Slurm command answers in milliseconds when all is well; after this long, find out whether munged is the cause
MUNGE_PROBE_AFTER = 2.0
MUNGE_PROBE_TIMEOUT = 2.0
DEFAULT_MUNGE_SOCKET = "/run/munge/munge.socket.2"
DEFAULT_SLURM_CONF = "/etc/slurm/slurm.conf"
# the first line of every slurm.conf the sandbox renders (slurmlab.sandbox.render)
_SANDBOX_MARK = "# slurmlab sandbox"
INSTALL_HINT = "sudo apt-get install slurm-client   (or load your site's Slurm module: module load slurm)"

# Stable fragments of Slurm's messages, across 22.05 .. 25.x. Order matters: munge first,
# since a munge failure is often reported together with a controller error.
_MUNGE_FRAGMENTS = (
    "protocol authentication error",
    "munge",
    "auth_g_",
    "invalid authentication credential",
)
_CONTROLLER_FRAGMENTS = (
    "unable to contact slurm controller",
    "slurm_load_",
    "connection refused",
    "socket timed out",
    "slurm controller not responding",
    "unable to establish controller",
    "communication connection failure",
    "zero bytes were transmitted or received",
)


def _flatten_env(env: Mapping[str, str]) -> dict[str, str]:
    return {str(k): str(v) for k, v in env.items()}


def classify_failure(argv: Sequence[str], returncode: int, stderr: str) -> SlurmError:
    """Map a failed command to the right exception, keeping Slurm's message verbatim."""
    text = stderr.strip() or f"exit code {returncode}, no message"
    low = text.lower()
    cmd = argv[0] if argv else "slurm"
    shown = f"{cmd} failed: {text}"
    if any(f in low for f in _MUNGE_FRAGMENTS):
        return MungeError(
            shown,
            argv=argv,
            returncode=returncode,
            stderr=stderr,
            hint="munge authentication failed: is munged running? (sandbox: `slurmlab sandbox restart`; "
            "cluster: ask your admins, `systemctl status munge`)",
        )
    if "invalid job id" in low or "invalid job step id" in low:
        return JobNotFoundError(
            shown, argv=argv, returncode=returncode, stderr=stderr,
            hint="the job ended and was purged, or the id is wrong: check `squeue --me`",
        )
    if any(f in low for f in _CONTROLLER_FRAGMENTS):
        return ControllerDownError(
            f"the Slurm controller is not responding ({cmd}: {text})",
            argv=argv,
            returncode=returncode,
            stderr=stderr,
            hint="check that slurmctld is up (`scontrol ping`); for the sandbox run `slurmlab sandbox status`",
        )
    hint = next((h for frag, h in _HINTS if frag in low), None)
    return SlurmError(shown, argv=argv, returncode=returncode, stderr=stderr, hint=hint)


# Next steps for Slurm's most common refusals (fragments stable from 22.05 to 25.x).
_HINTS = (
    ("requested node configuration is not available",
     "no node of that partition has what was asked for (GPU type or count, CPUs, memory): "
     "see what exists with `%sinfo` or `sinfo -o '%P %N %G'`"),
    ("invalid partition", "list the partitions with `sinfo -s`"),
    ("invalid generic resource", "GRES names this cluster knows: `scontrol show config | grep GresTypes`"),
    ("invalid --gpu-bind", "valid values: closest, map_gpu:…, mask_gpu:…, single:N, per_task:N, none"),
    ("invalid account", "your accounts: `sacctmgr show assoc user=$USER format=account`"),
    ("invalid qos", "your QOS: `sacctmgr show assoc user=$USER format=qos`"),
    ("time limit", "ask for less time (-t) or another partition (`sinfo -o '%P %l'`)"),
)


# ---- munge ---------------------------------------------------------------------------------------
def munge_socket(slurm_conf: str | None) -> str | None:
    """The munge socket that the Slurm configuration file ``slurm_conf`` authenticates through.

    None when it names another AuthType (e.g. ``auth/slurm``) or cannot be read (then Slurm's commands fail
    on their own, or fetch a configuration this cannot see); munge's default socket when the file says
    nothing."""
    try:
        text = Path(slurm_conf or DEFAULT_SLURM_CONF).read_text(errors="replace")
    except OSError:
        return None
    auth_type: str | None = None
    found: str | None = None
    for raw in text.splitlines():
        line = raw.split("#", 1)[0].strip()
        key, sep, value = line.partition("=")
        if not sep:
            continue
        key, value = key.strip().lower(), value.strip().strip('"')
        if key == "authtype":
            auth_type = value.lower()
        elif key == "authinfo":
            for item in value.split(","):
                name, _, path = item.partition("=")
                if name.strip().lower() == "socket" and path.strip():
                    found = path.strip()
    if auth_type is not None and auth_type != "auth/munge":
        return None
    return found or DEFAULT_MUNGE_SOCKET


@dataclass(frozen=True)
class MungeProblem:
    """Why munged does not serve ``socket``: ``kind`` is stopped, frozen, denied or failed."""

    socket: str
    kind: str
    detail: str


def probe_munge(path: str, *, timeout: float = MUNGE_PROBE_TIMEOUT) -> MungeProblem | None:
    """None when munged answers on the socket ``path``; otherwise what is wrong.

    A connect tells a stopped munged (refused, or no socket) or a socket this user may not use at once;
    a frozen munged still accepts connections (the kernel queues them), so ``munge -n`` then has to get a
    credential within ``timeout``."""
    with socket.socket(socket.AF_UNIX, socket.SOCK_STREAM) as s:
        s.settimeout(timeout)
        try:
            s.connect(path)
        except (FileNotFoundError, ConnectionRefusedError) as exc:
            return MungeProblem(path, "stopped", f"munged is not running (its socket {path}: {exc.strerror})")
        except PermissionError:
            return MungeProblem(path, "denied", f"you may not use munged's socket {path} (permission denied)")
        except TimeoutError:
            return MungeProblem(path, "frozen", f"munged's socket {path} accepts no connection (munged frozen?)")
        except OSError as exc:
            return MungeProblem(path, "failed", f"munged's socket {path} cannot be reached: {exc.strerror or exc}")
    munge = shutil.which("munge")
    if munge is None:
        return None  # without munge's client a frozen munged cannot be told from a slow one
    try:
        proc = subprocess.run([munge, "-n", "-S", path], stdin=subprocess.DEVNULL, stdout=subprocess.DEVNULL,
                              stderr=subprocess.PIPE, text=True, timeout=timeout, check=False)
    except subprocess.TimeoutExpired:
        return MungeProblem(path, "frozen", f"munged does not answer on {path} within {timeout:g} s "
                                            "(it is frozen or overloaded)")
    except OSError:
        return None
    if proc.returncode != 0:
        return MungeProblem(path, "failed", f"munged on {path} gives no credential: {proc.stderr.strip()}")
    return None


def _sandbox_folder(slurm_conf: str | None) -> Path | None:
    """The sandbox folder when ``slurm_conf`` is one a slurmlab sandbox rendered."""
    if not slurm_conf:
        return None
    try:
        with open(slurm_conf, errors="replace") as fh:
            first = fh.readline()
    except OSError:
        return None
    return Path(slurm_conf).parent if first.startswith(_SANDBOX_MARK) else None


def _munge_hint(slurm_conf: str | None, kind: str) -> str:
    folder = _sandbox_folder(slurm_conf)
    if kind == "denied":
        if folder is not None:
            return (f"this sandbox lets in only its owner and the users it admits; its owner can add you: "
                    f"slurmlab sandbox up --dir {folder} --admit {_user()}")
        return "munged's socket must be usable by every user: ask your cluster's admins"
    if folder is not None:
        return f"bring munged back, keeping every job: slurmlab sandbox restart --dir {folder}"
    return "munged on this machine needs your cluster's admins (they can check `systemctl status munge`)"


def _user() -> str:
    import pwd

    try:
        return pwd.getpwuid(os.geteuid()).pw_name
    except KeyError:
        return str(os.geteuid())


def _munge_kind(stderr: str) -> str:
    return "denied" if "permission denied" in stderr.lower() else "failed"


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


@dataclass
class Runner:
    """Runs Slurm commands.

    ``slurm_conf`` and ``cluster`` select which Slurm to talk to (``SLURM_CONF`` and
    ``SLURM_CLUSTERS``); ``env`` adds variables. ``timeout`` bounds every call.
    ``munge_probe_after``: seconds a command may take before munged is probed (0: never).
    """

    slurm_conf: str | None = None
    cluster: str | None = None
    timeout: float = DEFAULT_TIMEOUT
    env: Mapping[str, str] = field(default_factory=dict)
    munge_probe_after: float = MUNGE_PROBE_AFTER
    calls: int = field(default=0, init=False, compare=False)
    _lock: threading.Lock = field(default_factory=threading.Lock, init=False, repr=False, compare=False)

    # ---- environment -------------------------------------------------------------------
    def environ(self, extra: Mapping[str, str] | None = None) -> dict[str, str]:
        """The environment a command runs with."""
        env = dict(os.environ)
        env.update(_flatten_env(self.env))
        if self.slurm_conf:
            env["SLURM_CONF"] = self.slurm_conf
        if self.cluster:
            env["SLURM_CLUSTERS"] = self.cluster
        if extra:
            env.update(_flatten_env(extra))
        return env

    def which(self, command: str) -> str:
        """Full path of a Slurm command, or :class:`SlurmNotFoundError` with the install line."""
        path = shutil.which(command, path=self.environ().get("PATH"))
        if path is None:
            raise SlurmNotFoundError(
                f"the Slurm command {command!r} is not installed or not on PATH",
                argv=[command],
                hint=INSTALL_HINT,
            )
        return path

    def _check_argv(self, argv: Sequence[str]) -> list[str]:
        if isinstance(argv, str) or not argv:
            raise TypeError("argv must be a non-empty list of strings, never a shell string")
        out = [str(a) for a in argv]
        conf = self.slurm_conf or os.environ.get("SLURM_CONF")
        if conf and not os.path.exists(conf):
            # Slurm's commands retry a missing configuration file for 60 s before they fail
            raise SlurmError(
                f"SLURM_CONF points to {conf}, which does not exist",
                argv=out,
                hint="unset SLURM_CONF to use the cluster's own configuration, or start the sandbox "
                "(`slurmlab sandbox up`, then `eval \"$(slurmlab sandbox env)\"`)",
            )
        with self._lock:
            self.calls += 1
        return out

    # ---- munge ---------------------------------------------------------------------------------
    def _probe_after(self, limit: float) -> float | None:
        if self.munge_probe_after <= 0:
            return None
        return min(self.munge_probe_after, limit / 2)

    def _munge_problem(self, env: Mapping[str, str], remaining: float) -> MungeProblem | None:
        path = munge_socket(env.get("SLURM_CONF"))
        if path is None:
            return None
        # never so short that a healthy but loaded munged is taken for a frozen one
        return probe_munge(path, timeout=min(MUNGE_PROBE_TIMEOUT, max(remaining, 1.0)))

    def _munge_failure(self, args: list[str], problem: MungeProblem, waited: float, env: Mapping[str, str],
                       stderr: str = "") -> MungeError:
        return MungeError(
            f"{args[0]} got no answer in {waited:.0f} s because munge does not work: {problem.detail}",
            argv=args, stderr=stderr, hint=_munge_hint(env.get("SLURM_CONF"), problem.kind),
        )

    def _failure(self, args: list[str], returncode: int, stderr: str, env: Mapping[str, str]) -> SlurmError:
        err = classify_failure(args, returncode, stderr)
        if isinstance(err, MungeError):
            # Slurm's own words ("Munge encode failed …") do not say why; the socket does, in
            # milliseconds when munged is stopped. The hint is the one next step that fits.
            said = _munge_kind(stderr)
            problem = None if said == "denied" else self._munge_problem(env, 1.0)
            kind = problem.kind if problem is not None else said
            words = stderr.strip()
            message = err.message if problem is None else (
                f"{args[0]} failed because munge does not work: {problem.detail}"
                + (f" (Slurm said: {words if len(words) <= 300 else words[:300] + '…'})" if words else ""))
            err = MungeError(message, argv=args, returncode=returncode, stderr=stderr,
                             hint=_munge_hint(env.get("SLURM_CONF"), kind))
        return err

    def _timeout(self, args: list[str], limit: float, stderr: str = "") -> SlurmTimeoutError:
        return SlurmTimeoutError(
            f"{args[0]} did not answer within {limit:g} s: the Slurm controller is not responding",
            argv=args,
            stderr=stderr,
            hint="check that slurmctld is up (`scontrol ping`); retry later or raise the timeout",
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
        args = self._check_argv(argv)
        limit = self.timeout if timeout is None else timeout
        environ = self.environ(env)
        start = time.monotonic()
        try:
            proc = subprocess.Popen(
                args,
                stdin=subprocess.PIPE if input is not None else subprocess.DEVNULL,
                stdout=subprocess.PIPE,
                stderr=subprocess.PIPE,
                text=True,
                env=environ,
            )
        except FileNotFoundError as exc:
            raise SlurmNotFoundError(
                f"the Slurm command {args[0]!r} is not installed or not on PATH",
                argv=args,
                hint=INSTALL_HINT,
            ) from exc
        with proc:
            try:
                out, err = self._communicate(proc, args, input, limit, start, environ)
            except subprocess.TimeoutExpired as exc:
                proc.kill()
                proc.wait()
                raise self._timeout(args, limit, _text(exc.stderr)) from exc
            except BaseException:
                proc.kill()
                proc.wait()
                raise
        result = RunResult(tuple(args), proc.returncode, out, err, time.monotonic() - start)
        if check and proc.returncode != 0:
            raise self._failure(args, proc.returncode, err, environ)
        return result

    def _communicate(self, proc: subprocess.Popen[str], args: list[str], input: str | None, limit: float,
                     start: float, env: Mapping[str, str]) -> tuple[str, str]:
        after = self._probe_after(limit)
        if after is None:
            return proc.communicate(input, timeout=limit)
        try:
            return proc.communicate(input, timeout=after)
        except subprocess.TimeoutExpired as exc:
            partial = _text(exc.stderr)
        problem = self._munge_problem(env, limit - (time.monotonic() - start))
        if problem is not None and proc.poll() is None:
            raise self._munge_failure(args, problem, time.monotonic() - start, env, partial)
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
        try:
            return subprocess.Popen(
                args,
                stdin=stdin,
                stdout=subprocess.PIPE,
                stderr=subprocess.STDOUT if merge_stderr else subprocess.PIPE,
                text=True,
                bufsize=1,
                env=self.environ(env),
                start_new_session=True,
            )
        except FileNotFoundError as exc:
            raise SlurmNotFoundError(
                f"the Slurm command {args[0]!r} is not installed or not on PATH",
                argv=args,
                hint=INSTALL_HINT,
            ) from exc

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
        args = self._check_argv(argv)
        limit = self.timeout if timeout is None else timeout
        environ = self.environ(env)
        start = time.monotonic()
        try:
            proc = await asyncio.create_subprocess_exec(
                *args,
                stdin=asyncio.subprocess.PIPE if input is not None else asyncio.subprocess.DEVNULL,
                stdout=asyncio.subprocess.PIPE,
                stderr=asyncio.subprocess.PIPE,
                env=environ,
            )
        except FileNotFoundError as exc:
            raise SlurmNotFoundError(
                f"the Slurm command {args[0]!r} is not installed or not on PATH",
                argv=args,
                hint=INSTALL_HINT,
            ) from exc
        talk = asyncio.ensure_future(proc.communicate(input.encode() if input is not None else None))
        try:
            after = self._probe_after(limit)
            if after is not None:
                done, _ = await asyncio.wait({talk}, timeout=after)
                if not done:
                    remaining = limit - (time.monotonic() - start)
                    loop = asyncio.get_running_loop()
                    problem = await loop.run_in_executor(None, self._munge_problem, environ, remaining)
                    if problem is not None and not talk.done():
                        raise self._munge_failure(args, problem, time.monotonic() - start, environ)
            remaining = max(limit - (time.monotonic() - start), 0.01)
            try:
                out, err = await asyncio.wait_for(asyncio.shield(talk), timeout=remaining)
            except asyncio.TimeoutError as exc:
                raise self._timeout(args, limit) from exc
        finally:
            if not talk.done():
                if proc.returncode is None:
                    proc.kill()
                # a grandchild may hold the pipes open: stop reading instead of waiting for their end
                talk.cancel()
                await asyncio.gather(talk, return_exceptions=True)
                await proc.wait()
        rc = proc.returncode if proc.returncode is not None else -1
        result = RunResult(tuple(args), rc, out.decode(errors="replace"), err.decode(errors="replace"),
                           time.monotonic() - start)
        if check and rc != 0:
            raise self._failure(args, rc, result.stderr, environ)
        return result


def _text(data: str | bytes | None) -> str:
    if data is None:
        return ""
    if isinstance(data, bytes):
        return data.decode(errors="replace")
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
    """Replace the process-wide runner (e.g. to point at a sandbox); returns the old one."""
    global _default
    with _default_lock:
        old = _default if _default is not None else Runner()
        _default = runner
        return old
