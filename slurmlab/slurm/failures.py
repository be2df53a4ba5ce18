"""What a failed Slurm command means, read from Slurm's own words: the exception to raise and the next step.

The fragments are stable across Slurm 22.05 .. 25.x; the message itself is kept verbatim.
"""

from __future__ import annotations

from collections.abc import Sequence

from slurmlab.errors import (
    ControllerDownError,
    JobNotFoundError,
    MungeError,
    SlurmError,
    SlurmNotConfiguredError,
    SlurmNotFoundError,
    SlurmTimeoutError,
)

__all__ = [
    "CONTROLLER_HINT",
    "CPU_LAYOUT_HINT",
    "INSTALL_HINT",
    "NOT_CONFIGURED_HINT",
    "RATE_LIMIT_HINT",
    "classify_failure",
    "missing_configuration",
    "not_installed",
    "rate_limited",
    "refusal_hint",
    "timed_out",
]

INSTALL_HINT = "sudo apt-get install slurm-client   (or load your site's Slurm module: module load slurm)"
CONTROLLER_HINT = (
    "check that slurmctld is up (`scontrol ping`); for the sandbox run `slurmlab sandbox status`"
)

NOT_CONFIGURED_HINT = (
    "no Slurm cluster is configured for this machine: start a local one with `%slurm sandbox up` "
    "(terminal: `slurmlab sandbox up`), or point at a cluster's config with "
    "`%slurm use /path/to/slurm.conf` (or set SLURM_CONF)"
)
# what the client commands print when they find neither a slurm.conf nor a DNS SRV record (configless)
_NOT_CONFIGURED_FRAGMENTS = (
    "could not establish a configuration source",
    "resolve_ctls_from_dns_srv",
    "fetch_config: dns srv lookup failed",
)

# Order matters: munge first, since a munge failure is often reported together with a controller error.
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


# slurmctld's per-user RPC rate limit (SlurmctldParameters=rl_enable, Slurm >= 23.02): a refused client sleeps
# (N s after the N-th refusal) and asks again until let through, then exits 0 with the right answer; it says so
# only with -v, as
# "squeue: RPC rate limited 1 time(s). Sleeping then trying again." (24.11 and 26.05, recorded in
# tests/data/slurm/<version>/rate_limit/), so they show only in the stderr of a command run with -v
_RATE_LIMIT_FRAGMENTS = ("rpc rate limited",)
RATE_LIMIT_HINT = (
    "the cluster's controller limits how many requests each user may make a second; slurmlab asks less often "
    "until it stops: close what polls Slurm that you do not need (`watch squeue`, other notebooks' panels) "
    "or retry in a minute"
)


def rate_limited(text: str) -> bool:
    """Whether Slurm's words in ``text`` (a command's stderr) say the controller rate-limited it."""
    low = text.lower()
    return any(f in low for f in _RATE_LIMIT_FRAGMENTS)


def not_installed(argv: Sequence[str]) -> SlurmNotFoundError:
    """The error for a Slurm command that is not on PATH, with the line that installs it."""
    return SlurmNotFoundError(
        f"the Slurm command {argv[0]!r} is not installed or not on PATH",
        argv=argv,
        hint=INSTALL_HINT,
    )


def missing_configuration(conf: str, argv: Sequence[str]) -> SlurmNotConfiguredError:
    """The error for a ``SLURM_CONF`` that names no file."""
    return SlurmNotConfiguredError(
        f"SLURM_CONF points to {conf}, which does not exist",
        argv=argv,
        hint="unset SLURM_CONF to use the cluster's own configuration, or start a local Slurm: "
        '`%slurm sandbox up` in a notebook, `slurmlab sandbox up` then `eval "$(slurmlab sandbox env)"` '
        "in a terminal",
    )


def timed_out(argv: Sequence[str], limit: float, stderr: str = "") -> SlurmTimeoutError:
    """The error for a command that ran past its timeout of ``limit`` seconds: a rate-limited one (its stderr
    says so) is not a controller that does not respond."""
    if rate_limited(stderr):
        return SlurmTimeoutError(
            f"{argv[0]} did not answer within {limit:g} s: the controller is rate-limiting your requests",
            argv=argv,
            stderr=stderr,
            hint=RATE_LIMIT_HINT,
        )
    return SlurmTimeoutError(
        f"{argv[0]} did not answer within {limit:g} s: the Slurm controller is not responding",
        argv=argv,
        stderr=stderr,
        hint="check that slurmctld is up (`scontrol ping`); retry later or raise the timeout",
    )


def classify_failure(argv: Sequence[str], returncode: int, stderr: str, *, quote: bool = True) -> SlurmError:
    """Map a failed command to the right exception, keeping Slurm's message verbatim.

    ``quote=False`` leaves Slurm's words out of the message (they stay in ``stderr``): for a step, whose words
    the cell already shows as they came."""
    text = stderr.strip() or f"exit code {returncode}, no message"
    low = text.lower()
    cmd = argv[0] if argv else "slurm"
    shown = f"{cmd} failed: {text}" if quote else f"{cmd} failed"
    if any(f in low for f in _MUNGE_FRAGMENTS):
        return MungeError(
            shown if quote else f"{cmd} failed: munge (Slurm's authentication) gave no credential",
            argv=argv,
            returncode=returncode,
            stderr=stderr,
            hint="munge authentication failed: is munged running? (sandbox: `slurmlab sandbox restart`; "
            "cluster: ask your admins, `systemctl status munge`)",
        )
    if any(f in low for f in _NOT_CONFIGURED_FRAGMENTS):
        last = text.splitlines()[-1]
        return SlurmNotConfiguredError(
            f"{cmd} found no Slurm to talk to ({last})",
            argv=argv,
            returncode=returncode,
            stderr=stderr,
            hint=NOT_CONFIGURED_HINT,
        )
    if "invalid job id" in low or "invalid job step id" in low:
        return JobNotFoundError(
            shown if quote else f"{cmd} failed: Slurm does not know the job",
            argv=argv,
            returncode=returncode,
            stderr=stderr,
            hint="the job ended and was purged, or the id is wrong: check `squeue --me`",
        )
    if any(f in low for f in _CONTROLLER_FRAGMENTS):
        return ControllerDownError(
            f"the Slurm controller is not responding ({cmd}: {text})"
            if quote
            else f"{cmd} failed: the Slurm controller is not responding",
            argv=argv,
            returncode=returncode,
            stderr=stderr,
            hint=CONTROLLER_HINT,
        )
    hint = refusal_hint(low) or (RATE_LIMIT_HINT if rate_limited(low) else None)
    return SlurmError(shown, argv=argv, returncode=returncode, stderr=stderr, hint=hint)


def refusal_hint(stderr: str) -> str | None:
    """The next step for a refusal Slurm printed (a failed step's stderr), or None when none is known."""
    low = stderr.lower()
    return next((h for frag, h in _HINTS if frag in low), None)


# slurmd's task/affinity could not pin the tasks' CPUs: 22.05 prints both lines, later releases at least the
# second (ESLURMD_CPU_LAYOUT_ERROR, "Unable to layout tasks on given cpus", exit 193 from srun)
_CPU_LAYOUT_FRAGMENTS = ("failed to distribute tasks", "unable to layout tasks on given cpus")
CPU_LAYOUT_HINT = (
    "slurmd could not pin the tasks to CPUs: the node claims more CPUs in slurm.conf than its machine has, and "
    "Slurm pins only CPUs that exist. A slurmlab sandbox is built so (each node claims the profile's CPUs, e.g. "
    "112 for dgx-h100, on a machine with a few: `slurmlab sandbox up` says how many), so --cpu-bind=cores, "
    "threads or sockets fails once a node's tasks or one task's --cpus-per-task outnumber the machine's CPUs: "
    "run the same line with --cpu-bind=none (each task still holds its --cpus-per-task CPUs in Slurm's count; "
    "only the pinning is left out). On a real cluster it usually means a node whose configuration does not match "
    "its hardware: tell the admins, and use --cpu-bind=none meanwhile"
)

# Next steps for Slurm's most common refusals (fragments stable from 22.05 to 25.x).
_HINTS = (
    (
        "requested node configuration is not available",
        "no node of that partition has what was asked for (GPU type or count, CPUs, memory): "
        "see what exists with `%sinfo` or `sinfo -o '%P %N %G'`",
    ),
    ("invalid partition", "list the partitions with `sinfo -s`"),
    (
        "more processors requested than permitted",
        "a step can use only what its allocation holds: ask for fewer tasks or CPUs (-n, -c) than the allocation "
        "has (`%slurm` / the panel shows them), or make a bigger allocation with %salloc",
    ),
    ("invalid generic resource", "GRES names this cluster knows: `scontrol show config | grep GresTypes`"),
    ("invalid --gpu-bind", "valid values: closest, map_gpu:…, mask_gpu:…, single:N, per_task:N, none"),
    ("invalid account", "your accounts: `sacctmgr show assoc user=$USER format=account`"),
    ("invalid qos", "your QOS: `sacctmgr show assoc user=$USER format=qos`"),
    ("time limit", "ask for less time (-t) or another partition (`sinfo -o '%P %l'`)"),
    *((fragment, CPU_LAYOUT_HINT) for fragment in _CPU_LAYOUT_FRAGMENTS),
)
