"""Hostile input at the magics' edge (issue 10, points 3, 4 and 8): refused before any Slurm command.

Each case runs with a runner that records every argv it is given and reaches no Slurm, so "refused
at the edge" is checked directly: the runner saw nothing and the shared poller watches nothing.
"""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

import pytest
from IPython.core.error import UsageError


def _watched(runner: Any) -> list[str]:
    from slurmlab.slurm.poller import get_poller

    return list(get_poller(runner).watched())


BAD_IDS = [
    "-v",
    "0",
    "00",
    "1\n",
    " 7",
    "7 ",
    "7_",
    "_7",
    "+7",
    "０７",
    "²",
    "0x10",
    "-1",
    "12345678901",
    "7,8",
    "7;touch x",
    "$(id)",
    "None",
]


@pytest.mark.parametrize("bad", BAD_IDS)
@pytest.mark.parametrize(
    ("magic", "template"),
    [
        ("srun", "--jobid={} hostname"),
        ("salloc", "--attach={}"),
        ("gpu_isolation", "--jobid={}"),
        ("gpu_timeslice", "--jobid={} --backend cpu"),
    ],
)
def test_a_bad_job_id_is_refused_before_any_slurm_command(
    xip: Any, offline_runner: Any, magic: str, template: str, bad: str
) -> None:
    # run_line_magic takes the line as typed after IPython's expansion; a quoted id keeps its spaces
    line = template.format("'" + bad + "'")
    with pytest.raises(UsageError) as caught:
        xip.run_line_magic(magic, line)
    assert "not a Slurm job id" in str(caught.value)
    assert offline_runner.seen == []
    assert _watched(offline_runner) == []


@pytest.mark.parametrize("bad", ["0", "-v", "7_", "１", "7\n"])
def test_scancel_refuses_a_bad_id_and_cancels_nothing(ip: Any, offline_runner: Any, bad: str) -> None:
    with pytest.raises(UsageError, match="not a job id"):
        ip.run_line_magic("scancel", f"12 '{bad}'")
    assert offline_runner.seen == []


def test_a_good_job_id_goes_to_slurm_as_one_argument(ip: Any, offline_runner: Any) -> None:
    # the id is checked, then asked about (here the controller is "down"): the only call names it alone
    with pytest.raises(UsageError, match="cannot use job 4242"):
        ip.run_line_magic("srun", "--jobid=4242 hostname")
    assert offline_runner.seen and all("4242" in argv for argv in offline_runner.seen)
    assert _watched(offline_runner) == []  # a job that could not be checked is not followed


@pytest.mark.parametrize(
    ("magic", "line", "where"),
    [
        ("squeue", "-u a\x00b", 5),
        ("srun", "echo a\x00b", 7),
        ("salloc", "--dry-run -J x\x00", 15),
        ("scancel", "\x0012", 1),
        ("slurm", "use /tmp/a\x00b", 11),
        ("sinfo", "-p gpu\x1b[31m", 7),
    ],
)
def test_a_nul_or_control_character_is_refused_with_its_position(
    ip: Any, offline_runner: Any, magic: str, line: str, where: int
) -> None:
    with pytest.raises(UsageError) as caught:
        ip.run_line_magic(magic, line)
    text = str(caught.value)
    assert f"at character {where} " in text, text
    assert "NUL" in text if "\x00" in line else "control character" in text
    assert offline_runner.seen == []


def test_a_nul_in_a_srun_cell_is_refused_before_the_step(ip: Any, offline_runner: Any) -> None:
    with pytest.raises(UsageError, match=r"the %%srun cell has a NUL byte .* at character 9 "):
        ip.run_cell_magic("srun", "", "echo hi\n\x00\n")
    # tabs, form feeds and escapes are fine in a script: it does not stop there (no allocation)
    with pytest.raises(UsageError, match="no live allocation"):
        ip.run_cell_magic("srun", "", "printf '\x1b[1m'\n\techo\x0c\n")
    # the only command run is the read-only listing of the user's live jobs that the message names
    assert [argv[:3] for argv in offline_runner.seen] == [["squeue", "-h", "--me"]]


def test_a_lone_surrogate_is_refused_not_a_unicode_error(ip: Any, offline_runner: Any) -> None:
    with pytest.raises(UsageError, match="cannot be encoded"):
        ip.run_line_magic("squeue", "-u a\ud800")


def test_an_argument_too_long_for_a_command_line_is_refused(ip: Any, offline_runner: Any) -> None:
    with pytest.raises(UsageError, match="over 131,071 bytes"):
        ip.run_line_magic("srun", "echo " + "y" * 140_000)
    with pytest.raises(UsageError, match="bytes; a command line takes at most 262,144"):
        ip.run_line_magic("srun", "echo " + "y " * 140_000)
    with pytest.raises(UsageError, match="put the code in a file"):
        ip.run_cell_magic("srun", "", "echo " + "z" * 140_000)
    assert offline_runner.seen == []


def test_the_magics_expand_dollar_names_as_ipython_does(ip: Any, offline_runner: Any) -> None:
    ip.user_ns["ngpu"] = 3
    try:
        dry = ip.run_line_magic("salloc", "--dry-run --gpus=$ngpu --comment=cost$$5")
        assert "--gpus=3" in dry.argv and "--comment=cost$5" in dry.argv
        two = 2  # a local of the calling frame, as in a function that runs a magic
        assert "--gpus=3" in ip.run_line_magic("salloc", "--dry-run --gpus={two+1}").argv
        assert two == 2
        # one unknown $name leaves the whole line as written
        assert "--comment=$nope$ngpu" in ip.run_line_magic("salloc", "--dry-run --comment=$nope$ngpu").argv
    finally:
        ip.user_ns.pop("ngpu", None)


def test_a_long_line_with_dollars_is_refused_instead_of_freezing_the_kernel(
    ip: Any, offline_runner: Any
) -> None:
    # IPython's own expansion of this line runs for about a minute
    with pytest.raises(UsageError, match="IPython expands at most 2,000"):
        ip.run_line_magic("srun", "echo " + "$" * 16_000)
    # without $ or braces nothing needs expanding: the length alone is not refused
    with pytest.raises(UsageError, match="no live allocation"):
        ip.run_line_magic("srun", "echo " + "y" * 16_000)


@pytest.mark.parametrize(
    ("line", "message"),
    [
        ("--local --procs 100000", "--procs must be between 1 and 64"),
        ("--local --duration nan", "--duration must be between"),
        ("--local --duration inf", "--duration must be between"),
        ("--local --duration 1e308", "--duration must be between"),
        ("--local --nice 99", "--nice must be between -20 and 19"),
        ("--local --device -1", "--device must be between"),
    ],
)
def test_experiment_numbers_out_of_range_are_refused(xip: Any, line: str, message: str) -> None:
    with pytest.raises(UsageError, match=message):
        xip.run_line_magic("gpu_timeslice", line)


def test_srun_timeout_must_be_a_finite_positive_number(ip: Any) -> None:
    for bad in ("nan", "inf", "0", "-5"):
        with pytest.raises(UsageError, match="--timeout must be between"):
            ip.run_line_magic("srun", f"--timeout {bad} hostname")


def test_squeue_shows_unreadable_records_as_one_line_instead_of_failing(
    ip: Any, monkeypatch: pytest.MonkeyPatch
) -> None:
    from slurmlab.errors import ParseError
    from slurmlab.slurm import queries

    bad = [
        ParseError("scontrol job record", "JobId=7 JobName=y Nodes=n[1-1000]x[1-1001] " + "x" * 500),
        ParseError("scontrol job record", "JobId=8 ???"),
        ParseError("scontrol job record", "JobId=9 ???"),
    ]
    monkeypatch.setattr(queries, "list_jobs", lambda *a, **k: queries.JobList([], bad))
    table = ip.run_line_magic("squeue", "--all")
    text = table.text()
    assert "(no jobs)" in text
    assert "3 job record(s) could not be read" in text and "JobId=7" in text and "(and 1 more)" in text
    assert max(len(line) for line in text.splitlines()) < 400  # one short line, not the record
    assert "could not be read" in table._repr_html_()
    # and without problems there is no such line
    monkeypatch.setattr(queries, "list_jobs", lambda *a, **k: queries.JobList([], []))
    assert "could not be read" not in ip.run_line_magic("squeue", "--all").text()


def test_sinfo_shows_unreadable_node_records(ip: Any, monkeypatch: pytest.MonkeyPatch) -> None:
    from slurmlab.errors import ParseError
    from slurmlab.slurm import queries

    monkeypatch.setattr(
        queries,
        "list_nodes",
        lambda *a, **k: queries.Listing([], [ParseError("scontrol node record", "NodeName=?")]),
    )
    assert "1 node record(s) could not be read" in ip.run_line_magic("sinfo", "").text()


# ---- against the real sandbox: another user's job, hostile ids next to a real allocation ---------------
FOREIGN_NAME = "y UserId=root(0) Nodes=node1 GRES=gpu:h100:8(IDX:0-7)"


@pytest.fixture
def foreign_job(slurm_sandbox: Any) -> Iterator[str]:
    """A held job of a second Unix user whose name pretends to be root's and to hold 8 GPUs."""
    from slurmlab.testing import other_user

    # submitted by that user for real: `--uid` is gone from salloc since 24.11 and 26.05's sbatch refuses nobody
    jid = (
        other_user.submit_as(
            slurm_sandbox,
            other_user.OTHER_USER,
            [
                "sbatch",
                "--parsable",
                "--hold",
                "-D",
                "/tmp",
                "-o",
                "/dev/null",
                "-J",
                FOREIGN_NAME,
                "--comment",
                "UserId=root(0)",
                "-t",
                "2",
                "--wrap",
                "sleep 60",
            ],
        )
        .stdout.strip()
        .split(";")[0]
    )
    try:
        yield jid
    finally:
        slurm_sandbox.runner().run(["scancel", jid], check=False)


def _state(slurm_sandbox: Any, jid: str) -> str:
    return str(
        slurm_sandbox.runner().run(["squeue", "-h", "-t", "all", "-j", jid, "-o", "%T"]).stdout.strip()
    )


@pytest.mark.sandbox
def test_another_users_job_is_never_mine_whatever_its_name_says(
    sandbox_ip: Any, slurm_sandbox: Any, foreign_job: str
) -> None:
    from slurmlab.magics import session
    from slurmlab.slurm.poller import get_poller
    from slurmlab.testing import other_user

    mine = sandbox_ip.run_line_magic("squeue", "")
    assert foreign_job not in {r["job"] for r in mine.rows}, mine.text()
    everyone = sandbox_ip.run_line_magic("squeue", "--all")
    row = next(r for r in everyone.rows if r["job"] == foreign_job)
    other = other_user.OTHER_USER
    assert row["user"] == other and row["name"] == FOREIGN_NAME

    with pytest.raises(UsageError, match=f"job {foreign_job} belongs to {other}"):
        sandbox_ip.run_line_magic("scancel", foreign_job)
    for magic, line in [("srun", f"--jobid={foreign_job} hostname"), ("salloc", f"--attach {foreign_job}")]:
        with pytest.raises(UsageError, match=f"belongs to {other}"):
            sandbox_ip.run_line_magic(magic, line)
    assert session.get_session().allocations == []
    assert foreign_job not in get_poller().watched()
    assert _state(slurm_sandbox, foreign_job) == "PENDING"  # still there: nothing was cancelled


@pytest.mark.sandbox
def test_a_hostile_id_next_to_a_real_allocation_leaves_it_working(
    sandbox_ip: Any, slurm_sandbox: Any, capsys: pytest.CaptureFixture[str]
) -> None:
    from slurmlab.slurm.poller import get_poller

    alloc = sandbox_ip.run_line_magic("salloc", "--no-gpu -n1 -t 5")
    alloc.wait("RUNNING", timeout=60)
    for magic, line in [
        ("srun", "--jobid=-v hostname"),
        ("salloc", "--attach 0"),
        ("scancel", "0"),
        ("srun", "--jobid='1\n' hostname"),
    ]:
        with pytest.raises(UsageError, match="not a (Slurm )?job id"):
            sandbox_ip.run_line_magic(magic, line)
    assert set(get_poller().watched()) == {str(alloc.job_id)}
    capsys.readouterr()
    sandbox_ip.run_line_magic("srun", "bash -c 'echo job=$SLURM_JOB_ID'")
    assert f"job={alloc.job_id}" in capsys.readouterr().out
    assert alloc.state == "RUNNING"
