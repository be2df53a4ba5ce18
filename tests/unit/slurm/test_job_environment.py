"""Nothing of a surrounding Slurm job reaches the commands slurmlab starts (issue 29, point 3).

The documented input variables of salloc, sbatch and srun come from each version's man pages
(tests/data/slurm_environment/input-<version>.txt: 22.05 as Debian ships it, 24.11 and 26.05 from SchedMD's
tags); the job environments are recorded on the 22.05 sandbox (job-22.05-*.txt: a shell of salloc, a batch
script, a step in it).
"""

from __future__ import annotations

import asyncio
import json
import os
import sys
from pathlib import Path

import pytest

from slurmlab.slurm.job_environment import KEPT, inside_job, job_id_of, login_environment
from slurmlab.slurm.runner import Runner

DATA = Path(__file__).resolve().parents[2] / "data" / "slurm_environment"
VERSIONS = ("22.05", "24.11", "26.05")
COMMANDS = ("salloc", "sbatch", "srun")
RECORDED_JOBS = ("salloc", "batch", "step")
# what every process has, job or not: it must reach the command unchanged
ORDINARY = {"HOME": "/home/ada", "USER": "ada", "LANG": "C.UTF-8", "SLURMLAB_NOTEBOOK": "lesson.ipynb"}


def _lines(path: Path) -> list[str]:
    return [line for line in path.read_text().splitlines() if line and not line.startswith("#")]


def documented(version: str, command: str) -> list[str]:
    names = [line.split()[1] for line in _lines(DATA / f"input-{version}.txt") if line.split()[0] == command]
    assert len(names) > 40, f"input-{version}.txt holds too few of {command}'s variables"
    return names


def recorded_job(kind: str) -> dict[str, str]:
    return dict(line.split("=", 1) for line in _lines(DATA / f"job-22.05-{kind}.txt"))


def _only(monkeypatch: pytest.MonkeyPatch, env: dict[str, str]) -> None:
    """This process's environment is ``env`` (and PATH, which the runner needs)."""
    path = "/usr/bin:/bin"
    for name in list(os.environ):
        monkeypatch.delenv(name)
    for name, value in {**env, "PATH": path}.items():
        monkeypatch.setenv(name, value)


@pytest.mark.parametrize("version", VERSIONS)
@pytest.mark.parametrize("command", COMMANDS)
def test_no_documented_input_variable_reaches_a_command_from_inside_a_job(
    monkeypatch: pytest.MonkeyPatch, version: str, command: str
) -> None:
    names = documented(version, command)
    _only(monkeypatch, {**ORDINARY, "SLURM_JOB_ID": "7", **{n: "2" for n in names}})
    env = Runner().environ()
    leaked = sorted(n for n in names if n in env and n not in KEPT)
    assert not leaked, f"{command} of Slurm {version} would read these of the surrounding job: {leaked}"
    assert {n: env[n] for n in ORDINARY} == ORDINARY
    # what selects the cluster is not the job's: a login node has it too
    assert {n for n in names if n in KEPT} <= set(env)


@pytest.mark.parametrize("kind", RECORDED_JOBS)
def test_a_recorded_job_environment_leaves_only_the_configuration(
    monkeypatch: pytest.MonkeyPatch, kind: str
) -> None:
    job = recorded_job(kind)
    assert job_id_of(job) is not None and "SLURM_GPUS" in job  # the recording is of a job with GPUs
    _only(monkeypatch, {**ORDINARY, **job})
    env = Runner().environ()
    # SLURMLAB_SANDBOX is the sandbox's TaskProlog's mark of its steps, not Slurm's
    assert sorted(n for n in job if n in env) == sorted({"SLURM_CONF", "SLURMLAB_SANDBOX"} & set(job))
    assert {n: env[n] for n in ORDINARY} == ORDINARY


def test_the_command_itself_runs_without_the_job(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    """What the started process sees, not only what environ() says: sync, background and async alike."""
    conf = tmp_path / "slurm.conf"  # the recording's sandbox is gone; the runner refuses a missing slurm.conf
    conf.write_text("ClusterName=test\n")
    job = {**recorded_job("step"), "SLURM_CONF": str(conf)}
    _only(monkeypatch, {**ORDINARY, **job})
    runner = Runner(munge_probe_after=0)
    probe = [sys.executable, "-c", "import os, json; print(json.dumps(sorted(os.environ)))"]
    sync = runner.run(probe).stdout
    with runner.popen(probe) as proc:
        background = proc.communicate(timeout=30)[0]
    asynchronous = asyncio.run(runner.arun(probe)).stdout
    for seen in (sync, background, asynchronous):
        names = set(json.loads(seen))
        assert "SLURM_GPUS" not in names and "CUDA_VISIBLE_DEVICES" not in names
        assert "SLURM_JOB_ID" not in names and "SLURM_CPUS_PER_TASK" not in names
        assert {"HOME", "SLURM_CONF"} <= names


def test_outside_a_job_the_users_own_settings_stay(monkeypatch: pytest.MonkeyPatch) -> None:
    """A login node's SBATCH_ACCOUNT or SALLOC_PARTITION is the user's choice, honoured as before."""
    mine = {"SBATCH_ACCOUNT": "physics", "SALLOC_PARTITION": "gpu", "SLURM_DEBUG": "1"}
    _only(monkeypatch, {**ORDINARY, **mine})
    env = Runner().environ()
    assert {n: env[n] for n in mine} == mine


@pytest.mark.parametrize("in_job", [False, True])
def test_what_shapes_the_output_slurmlab_reads_never_reaches_a_command(
    monkeypatch: pytest.MonkeyPatch, in_job: bool
) -> None:
    # from a shell's profile: times as "Tomorr 09:00", another user's jobs only, running jobs hidden, a cancel
    # that skips a running job, array ids cut short; each documented in squeue/sinfo/sacct/scontrol/scancel(1)
    shaping = {
        "SLURM_TIME_FORMAT": "relative",
        "SLURM_BITSTR_LEN": "8",
        "SQUEUE_USERS": "someone_else",
        "SQUEUE_STATES": "PD",
        "SQUEUE_FORMAT2": "JobID:5",
        "SINFO_PARTITION": "debug",
        "SACCT_LOCAL": "1",
        "SCONTROL_FUTURE": "1",
        "SCANCEL_STATE": "PENDING",
        "SCANCEL_INTERACTIVE": "1",
        "SPRIO_FORMAT": "%i",
    }
    job = {"SLURM_JOB_ID": "7"} if in_job else {}
    _only(monkeypatch, {**ORDINARY, **job, **shaping})
    for env in (Runner().environ(), Runner(in_own_job=True).environ() if in_job else {}):
        assert not set(shaping) & set(env), set(shaping) & set(env)


def test_the_runners_own_settings_and_a_step_in_the_own_job(monkeypatch: pytest.MonkeyPatch) -> None:
    job = recorded_job("batch")
    _only(monkeypatch, {**ORDINARY, **job})
    # what the runner was told (its env, cluster, configuration, a command's extra) is never taken away
    told = Runner(slurm_conf="/etc/slurm/slurm.conf", cluster="blue", env={"SLURM_DEBUG": "1"}).environ(
        {"SLURM_EXPORT_ENV": "ALL"}
    )
    assert told["SLURM_CONF"] == "/etc/slurm/slurm.conf" and told["SLURM_CLUSTERS"] == "blue"
    assert told["SLURM_DEBUG"] == "1" and told["SLURM_EXPORT_ENV"] == "ALL" and "SLURM_GPUS" not in told
    # a step in the job this process runs in sees that job, as an srun typed in its shell would
    own = Runner(in_own_job=True).environ()
    assert {n: own[n] for n in job} == job


@pytest.mark.parametrize(
    ("env", "job_id", "inside"),
    [
        ({"SLURM_JOB_ID": "42"}, "42", True),
        ({"SLURM_JOBID": "42"}, "42", True),  # the old spelling alone
        ({"SLURM_JOB_ID": ""}, None, False),
        # not an id: no job is named, yet the job's variables go
        ({"SLURM_JOB_ID": "42; rm -rf"}, None, True),
        ({"SLURM_JOB_ID": "４２"}, None, True),  # full-width digits are not a job id
        ({}, None, False),
    ],
)
def test_job_id_and_inside(env: dict[str, str], job_id: str | None, inside: bool) -> None:
    assert job_id_of(env) == job_id
    assert inside_job(env) is inside
    cleaned = login_environment({**env, "SLURM_GPUS": "2", "HOME": "/h"})
    assert ("SLURM_GPUS" in cleaned) is not inside and cleaned["HOME"] == "/h"
