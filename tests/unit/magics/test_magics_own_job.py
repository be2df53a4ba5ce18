"""Issue 29, point 2, in the magics: the job the kernel runs in is where ``%srun`` runs when the notebook has no
live allocation of its own, ``%slurm`` names it first, and neither a bare ``%scancel`` nor ``%scancel ID`` ends it.

Recorded Slurm 22.05 output (FakeRunner: job 19 running, its ``scontrol show job -d`` with 2 H100 on node1). Which
job the kernel runs in is decided by :func:`slurmlab.slurm.own_job.find_own_job` (tests/unit/slurm/test_own_job.py
checks it on recorded squeue answers and a /proc tree); here it names job 19, or no job.
"""

from __future__ import annotations

from typing import Any

import pytest
from fake_slurm import JOB, OWNER_UID, cluster, job_in, rec
from IPython.core.error import UsageError

from slurmlab.slurm.own_job import OwnJob
from slurmlab.testing import FakeRunner


class _Other:
    """Another live allocation of the notebook (the recording has one job only): what the session reads."""

    def __init__(self, job_id: str) -> None:
        self.job_id, self.state, self.released_at = job_id, "RUNNING", None

    ended = False


def _inside(monkeypatch: pytest.MonkeyPatch, found: OwnJob, monkeypatch_env: bool = True) -> list[int]:
    """The kernel runs in what ``found`` says; returns the list that counts the look-ups."""
    from slurmlab.magics import kernel

    looked: list[int] = []

    def find() -> OwnJob:
        looked.append(1)
        return found

    monkeypatch.setattr(kernel, "find_own_job", find)
    if monkeypatch_env and found.job_id:
        monkeypatch.setenv("SLURM_JOB_ID", found.job_id)
    return looked


@pytest.fixture
def shell(ip: Any, fake_runner: FakeRunner, monkeypatch: pytest.MonkeyPatch) -> Any:
    from slurmlab.slurm import identity

    monkeypatch.setattr(identity, "current_uid", lambda: OWNER_UID)
    cluster(fake_runner)
    job_in(fake_runner, "running")
    fake_runner.on(["squeue", "-h", "--me", ...], stdout="")  # no job left by an earlier kernel
    return ip


def test_srun_runs_in_the_session_s_job_when_the_notebook_has_none(
    shell: Any, fake_runner: FakeRunner, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    from slurmlab.magics.session import get_session

    looked = _inside(monkeypatch, OwnJob(job_id=JOB, evidence="test"))
    # the step shares the job's memory (--mem=0, see Allocation.own); it prints job 19's recorded hostname step
    step = ["srun", f"--jobid={JOB}", "--overlap", "--mem=0", "hostname"]
    fake_runner.on(step, reply=rec("l09_srun_overlap_hostname.txt"))
    shell.run_line_magic("srun", "hostname")
    out = capsys.readouterr()
    assert fake_runner.called(["srun", ...]) == [step]
    assert f"using job {JOB}, the job this session runs in" in out.err and out.out.splitlines()[-1] == "vm"
    own = get_session().own
    assert own is not None and own.own_job and not own.release_at_exit
    assert own not in get_session().allocations  # a bare %scancel or --all never picks it
    shell.run_line_magic("srun", "hostname")
    assert looked == [1]  # looked for once per session


def test_slurm_names_the_session_s_job_first(shell: Any, monkeypatch: pytest.MonkeyPatch) -> None:
    _inside(monkeypatch, OwnJob(job_id=JOB, evidence="test"))
    status = str(shell.run_line_magic("slurm", "")).splitlines()
    (line,) = [s for s in status if s.startswith("this session:")]
    assert line.startswith(f"this session: job {JOB} on node1, 2 × h100, ")
    assert "never cancels it" in line
    after = status[status.index(line) + 1 :]
    # the walltime warning of a normal panel under it (the recorded job's time is up long since)
    assert after[0].startswith("  Time almost up: ") and after[0].endswith("; this kernel ends with it")
    assert after[1].startswith(f"no allocation of this notebook yet: %srun runs in job {JOB}")


def test_the_session_s_job_is_never_cancelled_by_scancel(
    shell: Any, fake_runner: FakeRunner, monkeypatch: pytest.MonkeyPatch
) -> None:
    _inside(monkeypatch, OwnJob(job_id=JOB, evidence="test"))
    with pytest.raises(UsageError, match=f"job {JOB} is the job this session runs in"):
        shell.run_line_magic("scancel", JOB)
    with pytest.raises(UsageError, match="no live allocation to cancel"):
        shell.run_line_magic("scancel", "")
    assert not fake_runner.called(["scancel", ...])


def test_a_live_allocation_of_the_notebook_comes_first(shell: Any, monkeypatch: pytest.MonkeyPatch) -> None:
    from slurmlab.magics.kernel import resolve_allocation
    from slurmlab.magics.session import get_session

    looked = _inside(monkeypatch, OwnJob(job_id=JOB, evidence="test"))
    other = _Other("30")
    get_session().remember(other)  # type: ignore[arg-type]
    assert resolve_allocation(None) is other  # type: ignore[comparison-overlap]
    assert looked == []  # not even looked for: the notebook's own allocation is the default


def test_outside_a_job_or_unconfirmed_nothing_changes(
    shell: Any, fake_runner: FakeRunner, monkeypatch: pytest.MonkeyPatch
) -> None:
    problem = f"SLURM_JOB_ID={JOB} is set, but job {JOB} is COMPLETED, not running"
    _inside(monkeypatch, OwnJob(problem=problem), monkeypatch_env=False)
    monkeypatch.setenv("SLURM_JOB_ID", JOB)
    with pytest.raises(UsageError, match="no live allocation in this notebook"):
        shell.run_line_magic("srun", "hostname")
    status = str(shell.run_line_magic("slurm", ""))
    assert f"{problem}: slurmlab works as from a login node" in status and "this session:" not in status
    assert not fake_runner.called(["srun", ...])


def test_the_session_s_job_has_a_panel_that_says_so_and_slurm_shows_it_first(
    shell: Any, fake_runner: FakeRunner, monkeypatch: pytest.MonkeyPatch
) -> None:
    pytest.importorskip("ipywidgets")
    from slurmlab.magics import error_display
    from slurmlab.magics.session import get_session
    from slurmlab.widgets.panel import AllocationPanel, header_html, panel_html

    _inside(monkeypatch, OwnJob(job_id=JOB, evidence="test"))
    status = shell.run_line_magic("slurm", "")
    own = get_session().own
    assert own is not None and status.own is own
    shown: list[Any] = []
    monkeypatch.setattr(error_display, "show", lambda obj, raw=False: shown.append(obj))
    status._ipython_display_()
    # the panel first (a widget, and for a saved notebook its dated text), then the status lines
    assert "application/vnd.jupyter.widget-view+json" in shown[0]
    assert "the job this session runs in: slurmlab never cancels it" in shown[0]["text/plain"]
    assert shown[1] == {"text/plain": str(status)}
    assert f"this session: job {JOB}" in header_html(own)
    body = panel_html(own)
    assert "This session:" in body and "not when the kernel ends either" in body
    # no Cancel button: cancelling the job would end this kernel; what the button would do does nothing
    panel = AllocationPanel.for_allocation(own)
    assert panel.cancel_button.layout.display == "none"
    panel.cancel()
    assert not panel._cancelling and not fake_runner.called(["scancel", ...])
