"""A second Unix user's jobs whose names and comments forge fields (issue 10, point 1).

The other user's job names hold ``UserId=root(0)``, a per-node GPU line, a 10^6-node hostlist
and injected lines (Slurm accepts a newline in a job name); its comment looks like a slurmlab
kernel's tag. None of it may make the job ours, paint GPUs, take a listing down, or let
slurmlab cancel it — through the library or the magics.
"""

from __future__ import annotations

import os
import pwd
from collections.abc import Iterator
from typing import Any

import pytest

from slurmlab.errors import NotYourJobError
from slurmlab.slurm import queries

pytestmark = [
    pytest.mark.sandbox,
    pytest.mark.skipif(os.geteuid() != 0, reason="needs root to submit as a second Unix user"),
]

HOSTILE = [
    ("y UserId=root(0)", "--comment=slurmlab:elsewhere:1:deadbeef"),
    (
        "a\n   UserId=root(0) GroupId=root(0)",
        "--comment=c Nodes=node1 CPU_IDs=0 Mem=0 GRES=gpu:h100:8(IDX:0-7)",
    ),
    ("g\n     Nodes=node2 CPU_IDs=0-3 Mem=0 GRES=gpu:h100:8(IDX:0-7)", None),
    ("n NodeList=n[1-1000]x[1-1001] Nodes=n[1-1000]x[1-1001] CPU_IDs=0 Mem=0", None),
    ("t\n   TresPerJob=gres:gpu:8", None),
]


@pytest.fixture(scope="module")
def hostile_jobs(slurm_sandbox: Any, server_jobs: Any) -> Iterator[tuple[str, list[str]]]:
    """(other user, ids of their running GPU-less hostile jobs)."""
    jobs = server_jobs
    other = jobs.ensure_other_user()
    ids = []
    try:
        for name, extra in HOSTILE:
            args = ["-n1"] + ([extra] if extra else [])
            ids.append(jobs.submit(slurm_sandbox, *args, name=name, user=other))
        yield other, ids
    finally:
        for jid in ids:
            queries.cancel_job(jid, slurm_sandbox.runner(), only_mine=False)


def test_their_jobs_are_theirs_by_uid(slurm_sandbox: Any, hostile_jobs: tuple[str, list[str]]) -> None:
    other, ids = hostile_jobs
    uid = pwd.getpwnam(other).pw_uid
    runner = slurm_sandbox.runner()
    assert {queries.job_owner_uid(j, runner) for j in ids} == {uid}
    owners = queries.job_owners(runner)
    assert all(owners[int(j)] == uid for j in ids)


def test_listings_never_make_them_mine_and_never_fail(
    slurm_sandbox: Any, hostile_jobs: tuple[str, list[str]]
) -> None:
    other, ids = hostile_jobs
    runner = slurm_sandbox.runner()
    mine = queries.list_jobs(runner)
    assert not {str(j.job_id) for j in mine} & set(ids)
    everyone = queries.list_jobs(runner, all_users=True)
    read = {str(j.job_id): j for j in everyone}
    reported = {p.record_id for p in everyone.problems}
    for jid in ids:
        assert jid in read or jid in reported, f"job {jid} neither listed nor reported"
        if jid in read:
            job = read[jid]
            assert job.user == other and job.gpu_allocs == () and len(job.nodes) == 1
    # the kernel's leftovers never include another user's job, whatever its comment says
    from slurmlab.slurm.allocation import find_leftovers

    assert not {str(getattr(j, "job_id", "")) for j in find_leftovers(runner, include_alive=True)} & set(ids)


def test_cancelling_them_is_refused_by_the_library(
    slurm_sandbox: Any, hostile_jobs: tuple[str, list[str]], server_jobs: Any
) -> None:
    other, ids = hostile_jobs
    jobs = server_jobs
    for jid in ids:
        with pytest.raises(NotYourJobError) as info:
            queries.cancel_job(jid, slurm_sandbox.runner())
        assert other in str(info.value)
    assert {jobs.squeue_state(slurm_sandbox, j) for j in ids} == {"RUNNING"}


def test_cancelling_them_is_refused_by_the_magics(
    slurm_sandbox: Any,
    hostile_jobs: tuple[str, list[str]],
    server_jobs: Any,
    capsys: pytest.CaptureFixture[str],
) -> None:
    from IPython.core.error import UsageError
    from IPython.testing.globalipapp import get_ipython

    other, ids = hostile_jobs
    ip = get_ipython()
    ip.run_line_magic("load_ext", "slurmlab.magics")  # the shell is shared: unloaded again below
    try:
        for jid in ids:
            try:
                ip.run_line_magic("scancel", jid)
            except UsageError as exc:
                assert other in str(exc) or "own" in str(exc)
            else:
                shown = capsys.readouterr()
                assert other in shown.out + shown.err
        assert {server_jobs.squeue_state(slurm_sandbox, j) for j in ids} == {"RUNNING"}
        ip.run_line_magic("squeue", "--all")  # lists them (or reports them) without failing
    finally:
        ip.run_line_magic("unload_ext", "slurmlab.magics")


def test_job_detail_answers_only_for_the_id_asked(
    slurm_sandbox: Any, hostile_jobs: tuple[str, list[str]]
) -> None:
    from slurmlab.errors import JobNotFoundError, RequestError

    runner = slurm_sandbox.runner()
    for bad in ("0", "-v", "1\n", "1 2"):
        with pytest.raises(RequestError):
            queries.job_detail(bad, runner)
    with pytest.raises(JobNotFoundError):
        queries.job_detail("987654", runner)


def test_every_free_text_field_of_a_batch_job_stays_text(slurm_sandbox: Any) -> None:
    """Output paths, work dir, mail user and comment of held batch jobs of the other user hold forged keys:
    the job is read with its real owner, its own text and no GPU; one whose error path holds a newline and a
    forged line is reported as unreadable where Slurm prints text — never read with the forged values."""
    import tempfile

    from slurmlab.testing.other_user import OTHER_USER, submit_as

    forged = "UserId=root(0) Nodes=node1 CPU_IDs=0 Mem=0 GRES=gpu:h100:8(IDX:0-7)"
    workdir = tempfile.mkdtemp(prefix="w UserId=root(0) ", dir="/tmp")
    os.chmod(workdir, 0o755)
    common = [
        "sbatch",
        "--parsable",
        "-H",
        "-n1",
        "-t",
        "5",
        f"--chdir={workdir}",
        "--mail-type=END",
        f"--mail-user=m {forged}",
        f"--comment=c {forged}",
        "--wrap",
        "sleep 60",
    ]
    spaced, injected = (
        submit_as(slurm_sandbox, OTHER_USER, [*common, "-J", f"b {forged}", "-o", f"/tmp/o {forged}"])
        .stdout.strip()
        .split(";")[0],
        submit_as(slurm_sandbox, OTHER_USER, [*common, "-J", "i", "-e", "/tmp/e\n   UserId=root(0)"])
        .stdout.strip()
        .split(";")[0],
    )
    runner = slurm_sandbox.runner()
    try:
        uid = pwd.getpwnam(OTHER_USER).pw_uid
        assert queries.job_owner_uid(spaced, runner) == uid == queries.job_owner_uid(injected, runner)
        everyone = queries.list_jobs(runner, all_users=True)
        read = {str(j.job_id): j for j in everyone}
        job = read[spaced]
        assert (job.user, job.name, job.comment, job.gpu_allocs) == (
            OTHER_USER,
            f"b {forged}",
            f"c {forged}",
            (),
        )
        # the text form (22.05) shows the forged line and reports the record; JSON (23.02+) keeps it a string
        if injected in read:
            assert (read[injected].user, read[injected].gpu_allocs) == (OTHER_USER, ())
        else:
            assert injected in {p.record_id for p in everyone.problems}
        assert not {spaced, injected} & {str(j.job_id) for j in queries.list_jobs(runner)}
        for jid in (spaced, injected):
            with pytest.raises(NotYourJobError):
                queries.cancel_job(jid, runner)
    finally:
        for jid in (spaced, injected):
            queries.cancel_job(jid, runner, only_mine=False)
        os.rmdir(workdir)


def test_forged_record_starts_neither_hide_nor_invent_jobs(slurm_sandbox: Any, server_jobs: Any) -> None:
    """Issue 25, points 1 and 2: another user's held jobs named ``a\\nJobId=<my job> …``, ``a\\nJobId=<no such
    job> …`` and ``bad\\xff`` (a byte that is not UTF-8). My job stays listed as mine, with its own name, no
    job is invented, and the listings (library and ``%squeue``) answer."""
    from slurmlab.testing.other_user import OTHER_USER, submit_as

    runner = slurm_sandbox.runner()
    mine = server_jobs.submit(slurm_sandbox, "-n1", name="victim")
    invented = "987650"
    names = [f"a\nJobId={mine} JobName=x", f"a\nJobId={invented} JobName=fake", "bad\udcff"]
    held = [
        submit_as(
            slurm_sandbox,
            OTHER_USER,
            ["sbatch", "--parsable", "-H", "-n1", "-t", "5", "-J", name, "--wrap", "sleep 60"],
        )
        .stdout.strip()
        .split(";")[0]
        for name in names
    ]
    try:
        for listing in (queries.list_jobs(runner), queries.list_jobs(runner, all_users=True)):
            read = {str(j.job_id): j for j in listing}
            assert mine in read, f"my job {mine} is hidden: {listing.problems}"
            assert read[mine].name == "victim" and read[mine].user != OTHER_USER
            assert invented not in read
        everyone = queries.list_jobs(runner, all_users=True)
        read = {str(j.job_id): j for j in everyone}
        assert read[held[2]].name == "bad\ufffd" and read[held[2]].user == OTHER_USER
        shown = {str(j.job_id) for j in everyone} | {p.record_id for p in everyone.problems}
        assert set(held) <= shown, "another user's job is neither listed nor reported"
        from IPython.testing.globalipapp import get_ipython

        ip = get_ipython()
        ip.run_line_magic("load_ext", "slurmlab.magics")
        try:
            ip.run_line_magic("squeue", "--all")  # raises (UnicodeDecodeError) on the old runner
        finally:
            ip.run_line_magic("unload_ext", "slurmlab.magics")
    finally:
        for jid in [mine, *held]:
            queries.cancel_job(jid, runner, only_mine=False)
