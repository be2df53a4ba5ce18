from __future__ import annotations

import os
from collections.abc import Iterator
from typing import Any

import pytest


@pytest.fixture
def ip() -> Iterator[Any]:
    """An IPython shell with the slurmlab magics loaded and a fresh magics session."""
    from IPython.testing.globalipapp import get_ipython

    from slurmlab.magics.session import Session

    shell = get_ipython()
    shell.run_line_magic("load_ext", "slurmlab.magics")
    old = Session.of(shell)
    session = Session(shell)
    try:
        yield shell
    finally:
        for alloc in session.allocations:
            try:
                alloc.cancel()
            except Exception:  # the test already ended it, or the controller is gone
                pass
        old.install(shell)
        shell.run_line_magic("unload_ext", "slurmlab.magics")


@pytest.fixture
def sandbox_ip(slurm_sandbox: Any, ip: Any) -> Any:
    """The shell, with the process-wide runner pointed at the session's sandbox."""
    return ip


class RecordingRunner:
    """A runner that reaches no Slurm: it records each argv and fails it at once, as a dead controller.

    Used to show that a refused line never got as far as a Slurm command, and to fuzz the magics
    fast without submitting anything.
    """

    @staticmethod
    def make() -> Any:
        from slurmlab.errors import ControllerDownError
        from slurmlab.slurm.runner import Runner

        class _Recording(Runner):
            def _check_argv(self, argv: Any) -> list[str]:
                args = [str(a) for a in argv]
                self.seen.append(args)
                for a in args:  # what subprocess would refuse, refused the same way
                    if "\x00" in a:
                        raise ValueError("embedded null byte")
                    os.fsencode(a)
                raise ControllerDownError(
                    f"{args[0]} failed: no Slurm in this test",
                    argv=args,
                    hint="this test runs without a controller",
                )

        runner = _Recording(slurm_conf="/nonexistent/slurmlab-test/slurm.conf")
        runner.seen = []  # type: ignore[attr-defined]
        return runner


@pytest.fixture
def offline_runner() -> Iterator[Any]:
    """The process-wide runner replaced by a RecordingRunner (``.seen``: every argv it was given)."""
    from slurmlab.slurm.runner import set_runner

    runner = RecordingRunner.make()
    old = set_runner(runner)
    try:
        yield runner
    finally:
        set_runner(old)


@pytest.fixture
def xip(ip: Any) -> Iterator[Any]:
    """The shell with the experiment magics registered the way load_ipython_extension does."""
    from slurmlab.magics.experiments import ExperimentMagics

    ip.register_magics(ExperimentMagics)
    try:
        yield ip
    finally:
        for name in ("gpu_timeslice", "gpu_isolation"):
            ip.magics_manager.magics["line"].pop(name, None)


# ---- a notebook on the recorded cluster (fake_slurm), and stand-ins for allocations the recording lacks ----------
@pytest.fixture
def shell(ip: Any, fake_runner: Any, monkeypatch: pytest.MonkeyPatch) -> Any:
    """The magics' shell on the recorded cluster, as the uid that recorded it (its jobs are "mine")."""
    from fake_slurm import OWNER_UID, cluster

    from slurmlab.slurm import identity

    monkeypatch.setattr(identity, "current_uid", lambda: OWNER_UID)
    cluster(fake_runner)
    return ip


class KernelStandIn:
    """What ipykernel offers the shell: the parent execute request, with JupyterLab's cellId."""

    def __init__(self) -> None:
        self.cell: str | None = None
        self.msg = "m0"

    def run(self, cell: str | None, msg: str) -> None:
        self.cell, self.msg = cell, msg

    def get_parent(self, channel: str = "shell") -> dict[str, Any]:
        return {"header": {"msg_id": self.msg}, "metadata": {"cellId": self.cell} if self.cell else {}}


@pytest.fixture
def kernel(shell: Any, monkeypatch: pytest.MonkeyPatch) -> KernelStandIn:
    k = KernelStandIn()
    monkeypatch.setattr(shell, "kernel", k, raising=False)
    return k


class AllocationStandIn:
    """Another allocation of the notebook: its id and state, and what was asked of it. A wait for it to start
    fails the test at once (it would last until the job starts), or with ``interrupt`` ends as a user ends it
    after minutes of "waiting for allocation … to start": Ctrl-C."""

    def __init__(self, job_id: str | None, state: str, *, interrupt: bool = False) -> None:
        from slurmlab.slurm.runner import get_runner

        self.job_id, self.state = job_id, state
        self.runner = get_runner()  # made on the kernel's Slurm (%slurm lists only that Slurm's allocations)
        self.interrupt = interrupt
        self.waited = 0
        self.cancelled = 0

    @property
    def ended(self) -> bool:
        from slurmlab.slurm.allocation import ENDED_STATES

        return self.state in ENDED_STATES

    def wait(self, *_args: Any, **_kwargs: Any) -> None:
        self.waited += 1
        if self.interrupt:
            raise KeyboardInterrupt
        raise AssertionError(f"waited for allocation {self.job_id} to start")

    def cancel(self) -> None:
        self.cancelled += 1

    def summary(self) -> str:
        return f"allocation {self.job_id}: {self.state}"


@pytest.fixture
def stand_in() -> type[AllocationStandIn]:
    """Makes :class:`AllocationStandIn` s: ``stand_in("12", "RUNNING")``."""
    return AllocationStandIn
