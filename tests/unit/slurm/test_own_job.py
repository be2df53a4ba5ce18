"""The job this process runs in (issue 29, point 2): found from SLURM_JOB_ID, taken only when Slurm says it is this
uid's and RUNNING and /proc shows this process inside it; followed as an allocation the process never cancels.

The squeue answers are recorded on the 22.05 sandbox (tests/data/slurm_environment/squeue-own-*: the job of a
salloc shell while it ran, the same query after a job completed, and Slurm's words for an unknown id); /proc is a
tree written here, in the layout Linux gives it.
"""

from __future__ import annotations

import time
from pathlib import Path

import pytest
from fake_slurm import JOB, cluster, job_in, rec

from slurmlab.errors import AllocationError, ParseError
from slurmlab.slurm import own_job
from slurmlab.slurm.allocation import Allocation
from slurmlab.slurm.own_job import find_own_job, inside_evidence, parse_own_job
from slurmlab.slurm.poller import JobPoller
from slurmlab.slurm.runner import RunResult
from slurmlab.testing import FakeRunner

DATA = Path(__file__).resolve().parents[2] / "data" / "slurm_environment"
RUNNING = (DATA / "squeue-own-running.txt").read_text()  # job 18, uid 0, AllocSID 4916
ENDED = (DATA / "squeue-own-ended.txt").read_text()  # job 17, COMPLETED
UNKNOWN = (DATA / "squeue-own-unknown.stderr").read_text()
QUERY = ["squeue", "-h", "-t", "all", "-j", "18", "-O", "JobID:|,UserID:|,State:|,AllocSID:|"]
ME = 1234  # this process's pid in the /proc written here


def _result(stdout: str) -> RunResult:
    return RunResult(tuple(QUERY), 0, stdout, "", 0.0)


def test_the_recorded_answers_parse() -> None:
    running = parse_own_job(_result(RUNNING))
    assert running is not None
    assert (running.job_id, running.uid, running.state, running.alloc_sid) == ("18", 0, "RUNNING", 4916)
    ended = parse_own_job(_result(ENDED))
    assert ended is not None and ended.state == "COMPLETED"
    assert parse_own_job(_result("")) is None


@pytest.mark.parametrize("line", ["18|root|RUNNING|4916|", "18", "x|0|RUNNING|1|", "１８|0|RUNNING|1|"])
def test_a_line_that_is_not_the_query_s_is_refused(line: str) -> None:
    with pytest.raises(ParseError, match="JOBID\\|UID"):
        parse_own_job(_result(line + "\n"))


# ---- /proc ---------------------------------------------------------------------------------------
def _process(
    proc: Path, pid: int, comm: str, ppid: int, sid: int, *, cmdline: str = "", cgroup: str = ""
) -> None:
    folder = proc / str(pid)
    folder.mkdir(parents=True)
    # the fields Linux writes; a comm may hold spaces and parentheses, so it is read up to the last ")"
    (folder / "stat").write_text(f"{pid} ({comm}) S {ppid} {sid} {sid} 0 -1 4194560 0 0 0 0\n")
    (folder / "cmdline").write_bytes((cmdline or comm).replace(" ", "\0").encode() + b"\0")
    (folder / "cgroup").write_text(cgroup or "0::/user.slice/user-1000.slice/session-3.scope\n")


@pytest.fixture
def proc(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    monkeypatch.setattr(own_job, "PROC", str(tmp_path))
    return tmp_path


def test_a_kernel_started_by_salloc_is_inside_through_salloc_s_session(proc: Path) -> None:
    _process(proc, 700, "bash", 1, 4916)
    _process(proc, 800, "salloc", 700, 4916, cmdline="salloc -N1 --gpus=2 jupyter lab")
    _process(proc, 900, "jupyter-lab", 800, 4916)
    _process(proc, ME, "python3", 900, ME)  # jupyter starts each kernel in a session of its own
    assert "salloc of job 18 (pid 800)" in (inside_evidence("18", 4916, ME) or "")
    # another salloc (another session), or none recorded by Slurm: not this job's
    assert inside_evidence("18", 5000, ME) is None
    assert inside_evidence("18", None, ME) is None


def test_a_batch_kernel_is_inside_through_its_slurmstepd(proc: Path) -> None:
    _process(proc, 500, "slurmstepd", 1, 500, cmdline="slurmstepd: [18.batch]")
    _process(proc, 600, "bash", 500, 600)
    _process(proc, ME, "python3", 600, ME)
    assert "job 18's slurmstepd (pid 500)" in (inside_evidence("18", 4916, ME) or "")
    # job 118's step is not job 18's, though its title starts alike
    assert inside_evidence("1", 4916, ME) is None


@pytest.mark.parametrize(
    ("cgroup", "inside"),
    [
        ("0::/system.slice/slurmstepd.scope/job_18/step_batch/user/task_0\n", True),  # cgroup v2
        ("4:memory:/slurm/uid_0/job_18/step_0/task_0\n3:cpuset:/slurm/uid_0/job_18/step_0\n", True),  # v1
        ("0::/system.slice/slurmstepd.scope/job_118/step_0/user/task_0\n", False),
        ("0::/system.slice/slurmstepd.scope/job_7/step_0/user/task_0\n", False),  # another job of this user
    ],
)
def test_the_cgroup_names_the_job(proc: Path, cgroup: str, inside: bool) -> None:
    # an ancestor salloc of the right session does not outweigh a cgroup that names another job
    _process(proc, 800, "salloc", 1, 4916)
    _process(proc, ME, "python3", 800, 4916, cgroup=cgroup)
    assert (inside_evidence("18", 4916, ME) is not None) is inside


def test_a_process_that_only_kept_the_environment_is_not_inside(proc: Path) -> None:
    _process(proc, 700, "bash", 1, 4916)
    _process(proc, ME, "python3", 700, 4916)
    assert inside_evidence("18", 4916, ME) is None


def test_a_parent_loop_or_unreadable_proc_ends_the_walk(proc: Path) -> None:
    _process(proc, ME, "python3", 77, ME)
    _process(proc, 77, "weird) name (x", ME, ME)  # a loop, and a comm with parentheses
    assert inside_evidence("18", ME, ME) is None
    assert inside_evidence("18", 4916, 4242) is None  # no such process


# ---- find_own_job: one squeue, then /proc -----------------------------------------------------------
@pytest.fixture
def salloc_tree(proc: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    _process(proc, 800, "salloc", 1, 4916)
    _process(proc, ME, "python3", 800, 4916)
    return proc


def test_the_job_of_a_salloc_kernel_is_found(
    fake: FakeRunner, salloc_tree: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr("slurmlab.slurm.identity.current_uid", lambda: 0)
    fake.on(QUERY, stdout=RUNNING)
    found = find_own_job(fake, {"SLURM_JOB_ID": "18", "SLURM_GPUS": "2"}, ME)
    assert found and found.job_id == "18" and found.problem is None
    assert fake.called(["squeue", ...]) == [QUERY]


def test_outside_a_job_nothing_is_asked(fake: FakeRunner) -> None:
    assert not find_own_job(fake, {"HOME": "/h"})
    assert find_own_job(fake, {"HOME": "/h"}).problem is None
    assert "not a job id" in (find_own_job(fake, {"SLURM_JOB_ID": "18;x"}).problem or "")
    assert fake.history == []


@pytest.mark.parametrize(
    ("uid", "stdout", "stderr", "rc", "problem"),
    [
        (1000, RUNNING, "", 0, "job 18 is not yours"),
        (0, ENDED.replace("17|", "18|"), "", 0, "job 18 is COMPLETED, not running"),
        (0, "", UNKNOWN, 1, "Slurm does not know job 18"),
    ],
)
def test_a_job_slurm_does_not_confirm_is_not_taken(
    fake: FakeRunner,
    salloc_tree: Path,
    monkeypatch: pytest.MonkeyPatch,
    uid: int,
    stdout: str,
    stderr: str,
    rc: int,
    problem: str,
) -> None:
    monkeypatch.setattr("slurmlab.slurm.identity.current_uid", lambda: uid)
    fake.on(QUERY, stdout=stdout, stderr=stderr, returncode=rc)
    found = find_own_job(fake, {"SLURM_JOB_ID": "18"}, ME)
    assert not found and problem in (found.problem or "")


def test_a_kept_environment_is_not_taken(
    fake: FakeRunner, proc: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A shell that kept SLURM_JOB_ID of a job of this user that still runs elsewhere."""
    _process(proc, 700, "bash", 1, 4916)
    _process(proc, ME, "python3", 700, 4916)
    monkeypatch.setattr("slurmlab.slurm.identity.current_uid", lambda: 0)
    fake.on(QUERY, stdout=RUNNING)
    found = find_own_job(fake, {"SLURM_JOB_ID": "18"}, ME)
    assert not found and "not inside job 18" in (found.problem or "")


# ---- the allocation of the own job ---------------------------------------------------------------
def test_the_own_allocation_is_followed_but_never_cancelled(fake: FakeRunner, poller: JobPoller) -> None:
    cluster(fake)
    job_in(fake, "running")
    alloc = Allocation.own(JOB, runner=fake, poller=poller)
    alloc.wait(timeout=5)
    assert alloc.own_job and not alloc.release_at_exit and alloc.nodes == ["node1"]
    # its steps (and only its) run with the job's own environment
    assert alloc.runner.in_own_job and not fake.in_own_job
    with pytest.raises(AllocationError, match="the job this session runs in"):
        alloc.cancel()
    time.sleep(0.05)
    assert not fake.called(["scancel", ...])
    # a step shares the job's memory (--mem=0): the step the kernel runs in (batchspawner's srun) holds all of it;
    # what the step prints is job 19's recorded hostname step
    step = ["srun", f"--jobid={JOB}", "--overlap", "--mem=0", "hostname"]
    fake.on(step, reply=rec("l09_srun_overlap_hostname.txt"))
    result = alloc.srun(["hostname"], on_output=lambda stream, line: None)
    assert result.returncode == 0 and result.stdout == ["vm"]
    assert fake.called(["srun", ...]) == [step]
    own_memory = [
        "srun",
        f"--jobid={JOB}",
        "--overlap",
        "--mem=2G",
        "hostname",
    ]  # the user's memory option wins
    fake.on(own_memory, reply=rec("l09_srun_overlap_hostname.txt"))
    alloc.srun(["hostname"], args=["--mem=2G"], on_output=lambda stream, line: None)
    assert fake.called(["srun", ...])[-1] == own_memory
    alloc.forget()
