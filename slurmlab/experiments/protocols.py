"""What the experiments need of an allocation, as typing Protocols.

The experiments room does not import ``slurmlab.slurm`` (README, Layout); it states here the part of
:class:`slurmlab.slurm.allocation.Allocation` it uses, and an Allocation satisfies it as it is. So do
the small stand-ins the tests build. Only what the orchestration really touches is listed.
"""

from __future__ import annotations

import subprocess
from collections.abc import Callable, Iterable, Sequence
from typing import Any, Protocol

from slurmlab.core.slurm.models import Job

__all__ = ["ExperimentAllocation", "FinishedStep", "LaunchedStep", "SlurmConfigured"]


class FinishedStep(Protocol):
    """A step that ended (``Allocation.srun``): its argv, exit code and the lines it printed."""

    @property
    def argv(self) -> Sequence[str]: ...
    @property
    def returncode(self) -> int: ...
    @property
    def stdout(self) -> list[str]: ...
    @property
    def stderr(self) -> list[str]: ...


class LaunchedStep(Protocol):
    """A step still running (``Allocation.launch``): its srun process, ended through ``stop``."""

    @property
    def argv(self) -> Sequence[str]: ...
    @property
    def proc(self) -> subprocess.Popen[str]: ...
    def stop(self) -> None: ...


class SlurmConfigured(Protocol):
    """The runner's Slurm configuration file (a sandbox points it at its own folder)."""

    @property
    def slurm_conf(self) -> str | None: ...
    def python(self) -> str: ...


class ExperimentAllocation(Protocol):
    """A running allocation the experiments start steps in."""

    @property
    def job_id(self) -> str | None: ...
    @property
    def state(self) -> str: ...
    @property
    def job(self) -> Job | None: ...
    @property
    def nodes(self) -> list[str]: ...
    @property
    def runner(self) -> SlurmConfigured: ...
    def refresh(self) -> Any: ...

    def srun(
        self,
        command: Sequence[str],
        *,
        args: Iterable[str] = (),
        on_output: Callable[[str, str], None] | None = None,
        label: bool = False,
        timeout: float | None = None,
    ) -> FinishedStep: ...

    def launch(
        self, command: Sequence[str], *, args: Iterable[str] = (), overlap: bool = True
    ) -> LaunchedStep: ...
