"""Issue 28, points 2 and 7: which allocation a magic means when a notebook holds several, and no silent extra
ones (the same request in another cell, ``-t 0``, a bare ``%scancel`` that leaves one running).

Fast: recorded Slurm 22.05 output (FakeRunner: job 19's life) with stand-ins for the other allocations, which
the recording does not have; the stand-ins hold only what the session and the messages read.
"""

from __future__ import annotations

from typing import Any

import pytest
from fake_slurm import JOB, SALLOC, job_in, pending_salloc
from IPython.core.error import UsageError

from slurmlab.testing import FakeRunner


def _running_job(shell: Any, fake: FakeRunner) -> Any:
    """The recorded job 19, running, followed by this notebook."""
    job_in(fake, "running")
    alloc = shell.run_line_magic("salloc", f"--attach {JOB}")
    alloc.wait(timeout=5)
    return alloc


def _submit(shell: Any, fake: FakeRunner, line: str) -> Any:
    job_in(fake, "pending")
    fake.on(SALLOC, reply=pending_salloc())
    return shell.run_line_magic("salloc", line)


# ---- point 2: %srun goes to the running allocation, not a newer pending one ----------------------------------
def test_srun_runs_in_the_running_allocation_and_names_the_pending_one(
    shell: Any, fake_runner: FakeRunner, capsys: pytest.CaptureFixture[str], stand_in: Any
) -> None:
    from slurmlab.magics.session import get_session

    running = _running_job(shell, fake_runner)
    pending = stand_in("30", "PENDING")
    get_session().remember(pending)  # type: ignore[arg-type]  # the newest: made after job 19
    capsys.readouterr()
    shell.run_line_magic("srun", "hostname")
    out = capsys.readouterr()
    assert pending.waited == 0  # before: "waiting for allocation 30 to start (PENDING)…" until Ctrl-C
    assert fake_runner.called(["srun", ...]) == [["srun", f"--jobid={JOB}", "--overlap", "hostname"]]
    assert out.out.splitlines()[-1] == "vm"
    said = [line for line in out.err.splitlines() if line.startswith("using job")]
    assert said == [f"using job {JOB} (RUNNING); job 30 is still PENDING — --jobid 30 waits for it"]
    assert get_session().default is running
    fake_runner.on(
        ["squeue", "-h", "--me", ...], stdout=""
    )  # no jobs left by earlier kernels: squeue -h says nothing
    status = str(shell.run_line_magic("slurm", "")).splitlines()
    defaults = [line for line in status if "(default for %srun)" in line]
    assert len(defaults) == 1 and f"{JOB}" in defaults[0] and "allocation 30" not in defaults[0]


def test_the_pending_one_is_used_when_none_runs_and_the_wait_is_said(
    shell: Any, fake_runner: FakeRunner, capsys: pytest.CaptureFixture[str], stand_in: Any
) -> None:
    from slurmlab.magics.error_display import StepInterrupted
    from slurmlab.magics.session import get_session

    pending = stand_in("30", "PENDING", interrupt=True)
    get_session().remember(stand_in("29", "COMPLETED"))  # type: ignore[arg-type]
    get_session().remember(pending)  # type: ignore[arg-type]
    with pytest.raises(StepInterrupted, match="stopped waiting; allocation 30 is still pending"):
        shell.run_line_magic("srun", "hostname")
    err = capsys.readouterr().err
    assert pending.waited == 1 and "waiting for allocation 30 to start (PENDING)" in err
    assert "using job" not in err  # nothing was passed over
    assert not fake_runner.called(["srun", ...])


def test_the_chosen_line_names_every_newer_allocation_passed_over(stand_in: Any) -> None:
    from slurmlab.magics.kernel import chosen_message

    running, newer, newest = (
        stand_in("4", "RUNNING"),
        stand_in("5", "CONFIGURING"),
        stand_in(None, "SUBMITTING"),
    )
    assert chosen_message(running, [newest, newer]) == (  # type: ignore[arg-type]
        "using job 4 (RUNNING); newer a request Slurm has not numbered yet (SUBMITTING), job 5 (CONFIGURING) "
        "have not started — --jobid 5 waits for it"
    )


# ---- point 7a: the same request in another cell reuses the live allocation -----------------------------------
def test_the_same_request_in_another_cell_reuses_the_live_allocation_and_says_so(
    shell: Any, fake_runner: FakeRunner, kernel: Any, capsys: pytest.CaptureFixture[str]
) -> None:
    kernel.run("cell-a", "run-1")
    first = _submit(shell, fake_runner, "--gpus=2 -t 10")
    kernel.run("cell-b", "run-2")
    capsys.readouterr()
    again = shell.run_line_magic("salloc", "--time=10 --gpus=2")  # the same request, spelled otherwise
    err = capsys.readouterr().err
    assert again is first and len(fake_runner.called(SALLOC)) == 1  # before: a second identical job
    warning = [line for line in err.splitlines() if line.startswith("warning: this kernel already holds")]
    assert len(warning) == 1, err
    assert f"job {first.job_id} (PENDING), made by another cell with the same request" in warning[0]
    assert "(--time=10 --gpus=2)" in warning[0] and "--new" in warning[0] and "--replace" in warning[0]

    # another request in a third cell is a job of its own
    kernel.run("cell-c", "run-3")
    other = _submit(shell, fake_runner, "--gpus=1 -t 10")
    assert other is not first and len(fake_runner.called(SALLOC)) == 2

    # --new keeps both; --replace cancels the one it would have reused
    kernel.run("cell-d", "run-4")
    second = _submit(shell, fake_runner, "--gpus=2 -t 10 --new")
    assert second is not first and len(fake_runner.called(SALLOC)) == 3
    scancels = len(fake_runner.called(["scancel", ...]))
    kernel.run("cell-e", "run-5")
    capsys.readouterr()
    third = _submit(shell, fake_runner, "--gpus=2 -t 10 --replace")
    assert third is not second and len(fake_runner.called(SALLOC)) == 4
    assert len(fake_runner.called(["scancel", ...])) == scancels + 1
    assert "cancelled the same request's allocation" in capsys.readouterr().err


def test_an_allocation_this_kernel_cancelled_is_not_reused(
    shell: Any, fake_runner: FakeRunner, kernel: Any, capsys: pytest.CaptureFixture[str]
) -> None:
    """Slurm's state says PENDING or RUNNING until the next poll after scancel: the same request right after
    ``%scancel`` (lesson 02 asks for --gpus=1 twice that way) is a new job, and no step goes to the old one."""
    from slurmlab.magics.session import get_session

    kernel.run("cell-a", "run-1")
    first = _submit(shell, fake_runner, "--gpus=1 -t 5")
    kernel.run("cell-b", "run-2")
    shell.run_line_magic("scancel", f"{first.job_id}")
    assert first.released_at is not None and get_session().default is None
    kernel.run("cell-c", "run-3")
    second = _submit(shell, fake_runner, "--gpus=1 -t 5")
    assert second is not first and len(fake_runner.called(SALLOC)) == 2
    assert "already holds" not in capsys.readouterr().err


# ---- point 7b: -t 0 is Slurm's "no limit", refused --------------------------------------------------------
@pytest.mark.parametrize("limit", ["0", "0:00", "0-0"])
def test_time_zero_is_refused_saying_it_means_no_limit(
    shell: Any, fake_runner: FakeRunner, limit: str
) -> None:
    with pytest.raises(UsageError) as info:
        shell.run_line_magic("salloc", f"--gpus=1 -t {limit}")
    message = str(info.value)
    assert "Slurm reads a time limit of zero as no time limit at all" in message
    assert "nothing was submitted" in message and "-t 30" in message and "-t UNLIMITED" in message
    assert not fake_runner.called(SALLOC)  # before: an unlimited job, with only a note


def test_unlimited_written_out_is_submitted_and_a_dry_run_of_zero_warns(
    shell: Any, fake_runner: FakeRunner, capsys: pytest.CaptureFixture[str]
) -> None:
    dry = shell.run_line_magic("salloc", "--dry-run --gpus=1 -t 0")
    assert any("no time limit at all" in w for w in dry.warnings) and not fake_runner.called(SALLOC)
    _submit(shell, fake_runner, "--gpus=1 -t UNLIMITED")
    assert len(fake_runner.called(SALLOC)) == 1
    assert "note: --time=INFINITE" in capsys.readouterr().err


# ---- point 7c: a bare %scancel says what it cancelled and what still lives ----------------------------------
def test_a_bare_scancel_cancels_the_default_and_names_the_ones_still_live(
    shell: Any, fake_runner: FakeRunner, capsys: pytest.CaptureFixture[str], stand_in: Any
) -> None:
    from slurmlab.magics.session import get_session

    older = stand_in("20", "RUNNING")
    get_session().remember(older)  # type: ignore[arg-type]
    _running_job(shell, fake_runner)  # job 19, attached after it: the default
    capsys.readouterr()
    shell.run_line_magic("scancel", "")
    out = capsys.readouterr().out.splitlines()
    assert fake_runner.called(["scancel", JOB]) and older.cancelled == 0
    assert out[0] == f"cancelled job {JOB}"
    # before: nothing more, and job 20 went on holding its GPUs unnoticed
    assert out[1:] == [
        "still live in this notebook: 20 (RUNNING); %scancel 20 cancels it (%scancel --all: every one)"
    ]


def test_scancel_all_cancels_every_live_allocation_of_the_notebook(
    shell: Any, fake_runner: FakeRunner, capsys: pytest.CaptureFixture[str], stand_in: Any
) -> None:
    from slurmlab.magics.session import get_session

    _running_job(shell, fake_runner)
    unnumbered = stand_in(None, "SUBMITTING")  # salloc has not heard back: the request is withdrawn
    get_session().remember(unnumbered)  # type: ignore[arg-type]
    capsys.readouterr()
    shell.run_line_magic("scancel", "--all")
    out = capsys.readouterr().out.splitlines()
    assert unnumbered.cancelled == 1 and fake_runner.called(["scancel", JOB])
    assert out == ["withdrew the pending request", f"cancelled job {JOB}"]
    with pytest.raises(UsageError, match="--all cancels every live allocation of this notebook: give it no"):
        shell.run_line_magic("scancel", f"--all {JOB}")
