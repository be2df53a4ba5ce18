"""%salloc, %srun, %squeue and %slurm through an IPython shell on recorded Slurm 22.05 output (FakeRunner).

The sandbox twins of these tests are in test_magics_sandbox.py; these run in milliseconds with no Slurm.
"""

from __future__ import annotations

import time
from typing import Any

import pytest
from fake_slurm import JOB, OWNER_UID, SALLOC, cluster, controller_down, job_in, pending_salloc

from slurmlab.testing import FakeRunner


@pytest.fixture
def shell(ip: Any, fake_runner: FakeRunner, monkeypatch: pytest.MonkeyPatch) -> Any:
    """The magics' shell on the recorded cluster, as the uid that recorded it (its jobs are "mine")."""
    from slurmlab.slurm import identity

    monkeypatch.setattr(identity, "current_uid", lambda: OWNER_UID)
    cluster(fake_runner)
    return ip


def test_salloc_returns_at_once_and_srun_runs_once_it_is_granted(
    shell: Any, fake_runner: FakeRunner, capsys: pytest.CaptureFixture[str]
) -> None:
    job_in(fake_runner, "pending")
    fake_runner.on(SALLOC, reply=pending_salloc())
    start = time.monotonic()
    alloc = shell.run_line_magic("salloc", "--gpus=2 -t 10")
    assert time.monotonic() - start < 5
    assert (alloc.job_id, alloc.state) == (JOB, "PENDING")
    salloc = fake_runner.called(SALLOC)[0]
    assert "--gpus=2" in salloc and any(a.startswith("--time=") or a == "-t" for a in salloc)

    job_in(fake_runner, "running")
    fake_runner.release()
    shell.run_line_magic("srun", "hostname")
    out = capsys.readouterr()
    assert out.out.splitlines()[-1] == "vm"
    assert fake_runner.called(["srun", ...]) == [["srun", f"--jobid={JOB}", "--overlap", "hostname"]]
    assert alloc.nodes == ["node1"]


def test_salloc_attach_follows_the_recorded_job(shell: Any, fake_runner: FakeRunner) -> None:
    job_in(fake_runner, "running")
    alloc = shell.run_line_magic("salloc", f"--attach {JOB}")
    alloc.wait(timeout=5)
    assert alloc.job_id == JOB and alloc.nodes == ["node1"]


def test_squeue_shows_my_recorded_jobs_with_their_gpus(shell: Any, fake_runner: FakeRunner) -> None:
    table = shell.run_line_magic("squeue", "")
    text = str(table) + repr(table)
    html = table._repr_html_() if hasattr(table, "_repr_html_") else ""
    assert "gpus2" in text + html and "shard4" in text + html
    assert fake_runner.called(["scontrol", "show", "job", "-d"]) and not fake_runner.unscripted


def test_slurm_status_names_the_version_and_the_notebooks_allocations(
    shell: Any, fake_runner: FakeRunner
) -> None:
    job_in(fake_runner, "running")
    fake_runner.on(["squeue", "-h", "--me", ...], stdout="")  # no job left by an earlier kernel
    shell.run_line_magic("salloc", f"--attach {JOB}").wait(timeout=5)
    status = str(shell.run_line_magic("slurm", ""))
    assert "controller: answering (Slurm 22." in status  # ping joins the version tuple: 22.5.8
    assert f"allocation {JOB}: RUNNING" in status


def test_slurm_status_lists_only_the_allocations_of_the_slurm_it_talks_to(
    shell: Any, fake_runner: FakeRunner
) -> None:
    from slurmlab.slurm.runner import set_runner

    job_in(fake_runner, "running")
    fake_runner.on(["squeue", "-h", "--me", ...], stdout="")
    shell.run_line_magic("salloc", f"--attach {JOB}").wait(timeout=5)
    # `%slurm sandbox up h200-mig` points the kernel at another Slurm (another slurm.conf), whose job ids are
    # its own: job 19 of the first is not a job of the second
    other = FakeRunner()
    cluster(other)
    other.on(["squeue", "-h", "--me", ...], stdout="")
    before = set_runner(other)
    try:
        status = str(shell.run_line_magic("slurm", ""))
    finally:
        set_runner(before)
        other.close()
    assert f"allocation {JOB}" not in status and "no allocation yet" in status
    assert (
        f"not listed: 1 allocation(s) of this notebook on another Slurm ({fake_runner.slurm_conf})" in status
    )
    back = str(shell.run_line_magic("slurm", ""))
    assert f"allocation {JOB}: RUNNING" in back and "not listed" not in back


def test_slurm_status_says_when_the_controller_is_down(shell: Any, fake_runner: FakeRunner) -> None:
    controller_down(fake_runner)
    status = str(shell.run_line_magic("slurm", ""))
    assert "controller: NOT answering" in status and "DOWN" in status


# What srun 22.05.8 printed (exit code 1) in a sandbox job when its controller or its munged was gone (issue 25,
# point 9: the cell showed these lines and "step exited with code 1", and no next step).
SRUN_CONTROLLER_DOWN = (
    "srun: error: Unable to confirm allocation for job 19: Unable to contact slurm controller "
    "(connect failure)\nsrun: Check SLURM_JOB_ID environment variable. Expired or invalid job 19\n"
)
SRUN_MUNGE_STOPPED = (
    "srun: error: If munged is up, restart with --num-threads=10\n"
    'srun: error: Munge encode failed: Failed to access "/tmp/sb/munge/munged.sock": No such file or directory '
    "(Did you start munged?)\n"
    "srun: error: slurm_send_node_msg: auth_g_create: REQUEST_HET_JOB_ALLOC_INFO has authentication error\n"
    "srun: error: Unable to confirm allocation for job 19: Protocol authentication error\n"
    "srun: Check SLURM_JOB_ID environment variable. Expired or invalid job 19\n"
)


@pytest.mark.parametrize(
    ("said", "reading", "hint"),
    [
        (
            SRUN_CONTROLLER_DOWN,
            "the Slurm controller is not responding",
            "check that slurmctld is up (`scontrol ping`)",
        ),
        (
            SRUN_MUNGE_STOPPED,
            "munge (Slurm's authentication) gave no credential",
            "munged on this machine needs your cluster's",
        ),
    ],
    ids=["controller", "munge"],
)
def test_a_step_srun_could_not_run_shows_slurms_words_then_slurmlabs_reading_and_hint(
    shell: Any,
    fake_runner: FakeRunner,
    capsys: pytest.CaptureFixture[str],
    said: str,
    reading: str,
    hint: str,
) -> None:
    job_in(fake_runner, "running")
    shell.run_line_magic("salloc", f"--attach {JOB}").wait(timeout=5)
    fake_runner.on(["srun", ...], stderr=said, returncode=1)
    capsys.readouterr()
    shell.run_line_magic("srun", "hostname")
    err = capsys.readouterr().err
    assert said.strip() in err  # Slurm's own words first, as they came
    lines = err[err.index(said.strip()) + len(said.strip()) :].strip().splitlines()
    assert lines[0] == f"step exited with code 1: srun failed: {reading}"
    assert lines[1].startswith(f"-> {hint}") and len(lines) == 2


def test_a_program_that_prints_like_srun_and_fails_gets_no_slurm_hint(
    shell: Any,
    fake_runner: FakeRunner,
    capsys: pytest.CaptureFixture[str],
) -> None:
    """Only srun's own lines are read: a task's line (labelled) that quotes Slurm's words is the program's."""
    job_in(fake_runner, "running")
    shell.run_line_magic("salloc", f"--attach {JOB}").wait(timeout=5)
    fake_runner.on(
        ["srun", ...],
        stderr="0: Unable to contact slurm controller (connect failure)\n"
        "srun: error: node1: task 0: Exited with exit code 1\n",
        returncode=1,
    )
    capsys.readouterr()
    shell.run_line_magic("srun", "--label python check.py")
    err = capsys.readouterr().err
    assert err.strip().splitlines()[-1] == "step exited with code 1"
