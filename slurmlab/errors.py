"""The one exception tree of slurmlab.

Every error says what happened and what to do next. Catch :class:`SlurmlabError`
to handle anything slurmlab raises on purpose::

    SlurmlabError
    ├── ParseError            output (from Slurm or nvidia-smi) that does not parse; quotes the text
    ├── RequestError          a GPU request that is malformed or that Slurm would reject
    ├── SlurmError            a Slurm command failed; carries argv, exit code and Slurm's own message
    │   ├── SlurmNotFoundError      the command is not installed
    │   ├── AccountingOffError      the cluster keeps no accounting (no slurmdbd): sacct/sshare cannot answer
    │   ├── MungeError              authentication (munged) failed
    │   ├── ControllerDownError     slurmctld not responding / refused / timed out
    │   │   ├── SlurmTimeoutError   the command ran past its timeout
    │   │   └── SlurmNotConfiguredError  no controller to ask: no slurm.conf here (nor a DNS SRV record)
    │   └── JobNotFoundError        the controller does not know that job (any more)
    ├── NotYourJobError       an action on someone else's job (slurmlab acts only on your own)
    ├── AllocationError       an allocation ended, failed or cannot be used
    ├── SandboxError          the local sandbox cannot start / stop; says the fix
    ├── ExperimentError       a time-slice / isolation experiment's worker failed or never reported
    │   └── KernelCompileError      a CUDA kernel failed to compile (or compiled with a warning)
    ├── SourceUnavailable     no source (profile, nvidia-smi, NVML) could give a topology; lists what was tried
    └── MissingExtraError     an optional dependency is not installed; names the extra
"""

from __future__ import annotations

from collections.abc import Sequence

__all__ = [
    "AccountingOffError",
    "AllocationError",
    "ControllerDownError",
    "ExperimentError",
    "JobNotFoundError",
    "KernelCompileError",
    "MissingExtraError",
    "MungeError",
    "NotYourJobError",
    "ParseError",
    "RequestError",
    "SandboxError",
    "SlurmError",
    "SlurmNotConfiguredError",
    "SlurmNotFoundError",
    "SlurmTimeoutError",
    "SlurmlabError",
    "SourceUnavailable",
]


class SlurmlabError(Exception):
    """Base of every error slurmlab raises on purpose.

    ``hint`` is the next step for the user; it is appended to the message.
    """

    def __init__(self, message: str, *, hint: str | None = None) -> None:
        self.message = message
        self.hint = hint
        super().__init__(message if not hint else f"{message}\n  -> {hint}")


class ParseError(SlurmlabError, ValueError):
    """Text that does not parse. ``text`` holds the offending value (quoted in the message).

    ``record_id`` names the record it belongs to (a job id, node or partition name) when a list
    parser skips that record and reports it, so a listing can say which entry it left out.
    """

    def __init__(
        self, what: str, text: str, *, hint: str | None = None, record_id: str | None = None
    ) -> None:
        self.what = what
        self.text = text
        self.record_id = record_id
        shown = text if len(text) <= 200 else text[:200] + "…"
        where = f" (record {record_id})" if record_id else ""
        super().__init__(f"cannot parse {what}{where}: {shown!r}", hint=hint)

    def for_record(self, record_id: str | None) -> ParseError:
        """This error, naming ``record_id`` (a copy; the original is left as it was)."""
        if record_id is None or self.record_id is not None:
            return self
        return ParseError(self.what, self.text, hint=self.hint, record_id=record_id)


class RequestError(SlurmlabError, ValueError):
    """A GPU request that is malformed, contradictory, or does not fit the cluster."""


class SlurmError(SlurmlabError):
    """A Slurm command failed. Carries the argv, exit code and Slurm's own message."""

    def __init__(
        self,
        message: str,
        *,
        argv: Sequence[str] = (),
        returncode: int | None = None,
        stderr: str = "",
        hint: str | None = None,
    ) -> None:
        self.argv = list(argv)
        self.returncode = returncode
        self.stderr = stderr
        super().__init__(message, hint=hint)


class SlurmNotFoundError(SlurmError):
    """A Slurm command is not installed on this machine."""


class AccountingOffError(SlurmError):
    """Slurm accounting is off here (``AccountingStorageType=none``) or its slurmdbd does not answer."""


class ControllerDownError(SlurmError):
    """slurmctld did not answer (refused, timed out, or stopped)."""


class JobNotFoundError(SlurmError):
    """The controller does not know the job: a wrong id, or a job purged after it ended."""


class MungeError(SlurmError):
    """munge authentication failed, usually because munged is not running."""


class SlurmNotConfiguredError(ControllerDownError):
    """The Slurm commands are installed but find no cluster: no slurm.conf (or SLURM_CONF names a file that is
    not there) and no DNS SRV record."""


class SlurmTimeoutError(ControllerDownError):
    """A Slurm command ran past its timeout; most often a hung controller."""


class NotYourJobError(SlurmlabError, PermissionError):
    """The job belongs to another user; slurmlab acts only on the caller's own jobs."""


class AllocationError(SlurmlabError):
    """An allocation failed, ended, or cannot take the requested action."""


class SandboxError(SlurmlabError):
    """The local sandbox cannot be started, reused or stopped."""


class ExperimentError(SlurmlabError):
    """A worker failed, never became ready, or printed no report."""


class KernelCompileError(ExperimentError):
    """A kernel failed to compile, or compiled with a warning."""


class SourceUnavailable(SlurmlabError):
    """No source could give the topology (or MIG layout); the message lists what was tried and why."""


class MissingExtraError(SlurmlabError, ImportError):
    """An optional dependency is missing; the message names the pip extra to install."""

    def __init__(self, feature: str, package: str, extra: str) -> None:
        self.feature = feature
        self.package = package
        self.extra = extra
        super().__init__(
            f"{feature} needs {package}, which is not installed",
            hint=f"pip install 'slurmlab[{extra}]'",
        )
