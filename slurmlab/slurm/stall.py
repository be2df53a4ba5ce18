"""What a Slurm command that does not answer is waiting for: munged, or a controller that is down.

A stopped or frozen munged makes every Slurm command wait (for its whole timeout) as if the controller were
down; a dead slurmctld makes ``squeue`` retry for about 18 s before it says so, where ``scontrol ping`` answers
DOWN in milliseconds. So the runner asks once about a command that has not answered after its
``munge_probe_after`` seconds (2 s):

* munged: its socket is probed (:func:`~slurmlab.slurm.munge.probe_munge`); when munged does not answer, the
  command is stopped and :class:`~slurmlab.errors.MungeError` says why, with the one next step that fits;
* the controller, for a command that asks slurmctld alone (:data:`CONTROLLER_COMMANDS`): one ``scontrol ping``
  with a short timeout; when it names no controller UP, the command is stopped and
  :class:`~slurmlab.errors.ControllerDownError` quotes it. A ping that does not answer in time proves nothing
  (a busy or frozen controller: the command's own timeout decides), and the command goes on.

A command that answers in time costs nothing more: no probe, no RPC.

A process that runs in the background (salloc until it prints its job id, a step until it prints its first
line) gets the same munge probe and the same words through :class:`StallWatch`; the controller is left to it,
since a step that already runs outlives a controller restart, and salloc and srun say by themselves that the
controller is down (:func:`explain_failure` gives their words the runner's hint).
"""

from __future__ import annotations

import contextlib
import os
import signal
import subprocess
import threading
import time
from collections.abc import Callable, Mapping, Sequence

from slurmlab.errors import ControllerDownError, MungeError, SlurmError
from slurmlab.slurm.failures import CONTROLLER_HINT, classify_failure
from slurmlab.slurm.munge import MungeProblem, munge_hint, munge_kind, sandbox_folder
from slurmlab.slurm.throttle import controller_rate_limits

__all__ = [
    "CONTROLLER_COMMANDS",
    "PING_ARGV",
    "STALL_PING_TIMEOUT",
    "StallWatch",
    "asks_controller",
    "controller_failure",
    "controller_hint",
    "down_words",
    "explain_failure",
    "munge_failure",
]

# the commands that ask slurmctld and nothing else (sacct, sacctmgr and sreport ask slurmdbd, which a dead
# slurmctld does not stop; salloc and srun run in the background, see StallWatch)
CONTROLLER_COMMANDS = frozenset(
    {"squeue", "sinfo", "scontrol", "scancel", "sbatch", "sprio", "sshare", "sstat"}
)
PING_ARGV = ("scontrol", "ping")
# a dead controller's ping answers in milliseconds; one that takes longer is busy or frozen, which only the
# command's own timeout can tell
STALL_PING_TIMEOUT = 2.0


def asks_controller(args: Sequence[str], env: Mapping[str, str]) -> bool:
    """Whether a ping can tell what keeps ``args`` waiting: it asks slurmctld alone, is no ping itself, runs
    against the configuration's own cluster (``scontrol ping`` pings those controllers, not another cluster's),
    and that controller does not rate-limit its users: there a refused ping says DOWN at once (24.11, 26.05),
    while the waiting command is only held back and answers right (:mod:`slurmlab.slurm.throttle`)."""
    name = os.path.basename(args[0])
    return (
        name in CONTROLLER_COMMANDS
        and (name, *args[1:2]) != PING_ARGV
        and not env.get("SLURM_CLUSTERS")
        and not controller_rate_limits(env.get("SLURM_CONF"))
    )


def down_words(ping_stdout: str) -> str | None:
    """What ``scontrol ping`` printed when it names controllers and none of them is UP; None otherwise (one UP
    answers every query, and lines it does not recognise prove nothing)."""
    from slurmlab.core.diagnosis.cluster_checks import parse_ping

    lines = parse_ping(ping_stdout)
    if not lines or any(c.state == "UP" for c in lines):
        return None
    return "; ".join(f"Slurmctld({c.role}) at {c.host} is {c.state}" for c in lines)


def controller_hint(conf: str | None) -> str:
    """The next step when the controller does not answer: in a sandbox its own command, elsewhere a check."""
    folder = sandbox_folder(conf)
    if folder is not None:
        return f"bring slurmctld back, keeping every job: slurmlab sandbox restart --dir {folder}"
    return CONTROLLER_HINT


def munge_failure(
    args: Sequence[str], problem: MungeProblem, waited: float, conf: str | None, stderr: str = ""
) -> MungeError:
    """The error of a command that waited ``waited`` seconds for a munged that does not work."""
    return MungeError(
        f"{args[0]} got no answer in {waited:.0f} s because munge does not work: {problem.detail}",
        argv=args,
        stderr=stderr,
        hint=munge_hint(conf, problem.kind),
    )


def controller_failure(
    args: Sequence[str], said: str, waited: float, conf: str | None, stderr: str = ""
) -> ControllerDownError:
    """The error of a command that waited ``waited`` seconds while ``scontrol ping`` said ``said`` (all DOWN)."""
    return ControllerDownError(
        f"{args[0]} got no answer in {waited:.0f} s: the Slurm controller is not responding "
        f"(`scontrol ping` says: {said})",
        argv=args,
        stderr=stderr,
        hint=controller_hint(conf),
    )


def explain_failure(
    args: Sequence[str],
    returncode: int,
    stderr: str,
    conf: str | None,
    probe: Callable[[], MungeProblem | None],
    *,
    quote: bool = True,
) -> SlurmError:
    """What a failed command means (:func:`~slurmlab.slurm.failures.classify_failure`), with the next step that
    fits the configuration ``conf``: for munge, ``probe()`` names the problem; in a sandbox, its own command.
    ``quote=False`` leaves Slurm's words out of the message (a step's cell shows them already)."""
    err = classify_failure(args, returncode, stderr, quote=quote)
    if isinstance(err, MungeError):
        # Slurm's own words ("Munge encode failed …") do not say why; the socket does, in
        # milliseconds when munged is stopped. The hint is the one next step that fits.
        said = munge_kind(stderr)
        problem = None if said == "denied" else probe()
        message = err.message
        if problem is not None:
            words = stderr.strip()
            quoted = words if len(words) <= 300 else words[:300] + "…"
            message = f"{args[0]} failed because munge does not work: {problem.detail}" + (
                f" (Slurm said: {quoted})" if words and quote else ""
            )
        return MungeError(
            message,
            argv=args,
            returncode=returncode,
            stderr=stderr,
            hint=munge_hint(conf, problem.kind if problem is not None else said),
        )
    if type(err) is ControllerDownError:  # not a timeout or a missing configuration, whose hints fit already
        return ControllerDownError(
            err.message, argv=args, returncode=returncode, stderr=stderr, hint=controller_hint(conf)
        )
    return err


class StallWatch:
    """The runner's munge probe for a process in the background (salloc, a step): once, ``after`` seconds after
    it started, unless it has ``answered()`` or ended by then (``after`` None: never).

    When ``probe()`` finds munged not working, ``error`` says so in the words of :func:`munge_failure`,
    ``on_error`` gets it, and the process's group is killed: a Slurm client stuck on munge ignores SIGINT and
    SIGTERM (srun sat out a 264 s freeze on 22.05), and one that got no credential has made nothing (no job, no
    step) that a gentler end would tidy. Whoever reads the process raises ``error`` once it has ended.
    """

    def __init__(
        self,
        proc: subprocess.Popen[str],
        args: Sequence[str],
        conf: str | None,
        after: float | None,
        probe: Callable[[], MungeProblem | None],
        answered: Callable[[], bool],
        on_error: Callable[[SlurmError], None] | None = None,
    ) -> None:
        self.error: SlurmError | None = None
        self._proc, self._args, self._conf = proc, list(args), conf
        self._probe_munge, self._answered, self._on_error = probe, answered, on_error
        self._start = time.monotonic()
        self._timer: threading.Timer | None = None
        if after is not None:
            self._timer = threading.Timer(after, self._probe)
            self._timer.name, self._timer.daemon = "slurmlab-stall-watch", True
            self._timer.start()

    def _quiet(self) -> bool:
        return self._proc.poll() is None and not self._answered()

    def _probe(self) -> None:
        if not self._quiet():
            return
        problem = self._probe_munge()
        if problem is None or not self._quiet():
            return
        self.error = error = munge_failure(self._args, problem, time.monotonic() - self._start, self._conf)
        if self._on_error is not None:
            self._on_error(error)
        with contextlib.suppress(ProcessLookupError, PermissionError):
            os.killpg(self._proc.pid, signal.SIGKILL)

    def cancel(self) -> None:
        """No probe after all (the process ended, or its reader gave up on it)."""
        if self._timer is not None:
            self._timer.cancel()
