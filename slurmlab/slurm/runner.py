"""The one place where Slurm commands run.

Every command is an argv list (never a shell string), runs with a timeout so a hung
controller cannot hang the caller, and honours ``SLURM_CONF`` and cluster selection.
Failures become :mod:`slurmlab.errors` exceptions that keep Slurm's own message.
"""

from __future__ import annotations

import asyncio
import os
import shutil
import subprocess
import threading
import time
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field

from slurmlab.errors import (
    ControllerDownError,
    JobNotFoundError,
    MungeError,
    SlurmError,
    SlurmNotFoundError,
    SlurmTimeoutError,
)

__all__ = [
    "DEFAULT_TIMEOUT",
    "INSTALL_HINT",
    "RunResult",
    "Runner",
    "classify_failure",
    "get_runner",
    "set_runner",
]

DEFAULT_TIMEOUT = 30.0
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
            hint="munge authentication failed: is munged running? (sandbox: `slurmlab sandbox up`; "
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
    """

    slurm_conf: str | None = None
    cluster: str | None = None
    timeout: float = DEFAULT_TIMEOUT
    env: Mapping[str, str] = field(default_factory=dict)
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

    # ---- sync ----------------------------------------------------------------------------
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
        start = time.monotonic()
        try:
            proc = subprocess.run(
                args,
                input=input,
                capture_output=True,
                text=True,
                timeout=limit,
                env=self.environ(env),
                stdin=None if input is not None else subprocess.DEVNULL,
            )
        except FileNotFoundError as exc:
            raise SlurmNotFoundError(
                f"the Slurm command {args[0]!r} is not installed or not on PATH",
                argv=args,
                hint=INSTALL_HINT,
            ) from exc
        except subprocess.TimeoutExpired as exc:
            raise SlurmTimeoutError(
                f"{args[0]} did not answer within {limit:g} s: the Slurm controller is not responding",
                argv=args,
                stderr=_text(exc.stderr),
                hint="check that slurmctld is up (`scontrol ping`); retry later or raise the timeout",
            ) from exc
        result = RunResult(tuple(args), proc.returncode, proc.stdout, proc.stderr, time.monotonic() - start)
        if check and proc.returncode != 0:
            raise classify_failure(args, proc.returncode, proc.stderr)
        return result

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
        """Asyncio twin of :meth:`run`: same argv, timeout and errors, never blocks the loop."""
        args = self._check_argv(argv)
        limit = self.timeout if timeout is None else timeout
        start = time.monotonic()
        try:
            proc = await asyncio.create_subprocess_exec(
                *args,
                stdin=asyncio.subprocess.PIPE if input is not None else asyncio.subprocess.DEVNULL,
                stdout=asyncio.subprocess.PIPE,
                stderr=asyncio.subprocess.PIPE,
                env=self.environ(env),
            )
        except FileNotFoundError as exc:
            raise SlurmNotFoundError(
                f"the Slurm command {args[0]!r} is not installed or not on PATH",
                argv=args,
                hint=INSTALL_HINT,
            ) from exc
        try:
            out, err = await asyncio.wait_for(
                proc.communicate(input.encode() if input is not None else None), timeout=limit
            )
        except asyncio.TimeoutError as exc:
            proc.kill()
            await proc.wait()
            raise SlurmTimeoutError(
                f"{args[0]} did not answer within {limit:g} s: the Slurm controller is not responding",
                argv=args,
                hint="check that slurmctld is up (`scontrol ping`); retry later or raise the timeout",
            ) from exc
        rc = proc.returncode if proc.returncode is not None else -1
        result = RunResult(tuple(args), rc, out.decode(errors="replace"), err.decode(errors="replace"),
                           time.monotonic() - start)
        if check and rc != 0:
            raise classify_failure(args, rc, result.stderr)
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
