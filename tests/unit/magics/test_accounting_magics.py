"""%sacct and %sshare through an IPython shell on recorded sacct/sshare output (FakeRunner), and their errors."""

from __future__ import annotations

import json
from datetime import datetime, timedelta
from typing import Any

import pytest
from IPython.core.error import UsageError

from slurmlab.core.slurm.sacct import parse_sacct
from slurmlab.errors import AccountingOffError
from slurmlab.magics.accounting import parse_since
from slurmlab.slurm.share_queries import my_shares
from slurmlab.testing import FakeRunner, recorded

SACCT = recorded("22.05/sacct/a02_sacct_recent.txt").stdout
SSHARE = recorded("24.11/sshare/a01_sshare_mine.txt").stdout
OFF = recorded("22.05/sacct/a04_sacct_disabled.txt").stderr


def _owner() -> int:
    return next(r.uid for r in parse_sacct(SACCT) if r.is_job and r.uid is not None)


@pytest.fixture
def shell(ip: Any, fake_runner: FakeRunner, monkeypatch: pytest.MonkeyPatch) -> Any:
    from slurmlab.slurm import identity

    monkeypatch.setattr(identity, "current_uid", _owner)
    monkeypatch.setattr(identity, "current_user", lambda: "root")
    return ip


def test_sacct_lists_my_recent_jobs_in_plain_words_with_efficiency(
    shell: Any, fake_runner: FakeRunner
) -> None:
    fake_runner.on(["sacct", ...], stdout=SACCT)
    table = shell.run_line_magic("sacct", "")
    jobs = [r for r in parse_sacct(SACCT) if r.is_job and r.start is not None]
    assert [row["job"] for row in table.rows] == [r.job_id for r in jobs][-20:]
    text, html = table.text(), table._repr_html_()
    by_state = {r.state: r.job_id for r in jobs}
    rows = {row["job"]: row for row in table.rows}
    if "TIMEOUT" in by_state:
        assert "stopped at its time limit" in rows[by_state["TIMEOUT"]]["state"]
    if "OUT_OF_MEMORY" in by_state:
        assert "more memory" in rows[by_state["OUT_OF_MEMORY"]]["state"]
    assert all(" of " in row["elapsed"] for row in table.rows)  # elapsed vs the limit
    assert all("CPU" in row["efficiency"] for row in table.rows)
    assert "<table" in html and "EFFICIENCY" in text
    argv = fake_runner.called(["sacct", ...])[0]
    assert argv[argv.index("-u") + 1] == "root" and "-S" in argv
    start = datetime.fromisoformat(argv[argv.index("-S") + 1])
    assert timedelta(hours=23.9) < datetime.now() - start < timedelta(hours=24.1)
    data = table.to_json()
    assert json.loads(table.json()) == json.loads(json.dumps(data, default=str))
    assert [j["job_id"] for j in data["jobs"]] == [row["job"] for row in table.rows]


def test_sacct_hides_jobs_that_never_started_unless_asked(shell: Any, fake_runner: FakeRunner) -> None:
    never = "99|{uid}|root|research|debug|normal|CANCELLED by {uid}|0:0|00:00:00|00:05:00|{t}|None|{t}|None assigned|0|||||| waited"
    t = datetime.now().strftime("%Y-%m-%dT%H:%M:%S")
    fake_runner.on(["sacct", ...], stdout=SACCT + never.format(uid=_owner(), t=t) + "\n")
    shown = shell.run_line_magic("sacct", "")
    assert "99" not in [r["job"] for r in shown.rows] and "never started" in shown.text()
    everything = shell.run_line_magic("sacct", "--all-states")
    row = next(r for r in everything.rows if r["job"] == "99")
    assert row["state"].startswith("CANCELLED: cancelled by ") and row["efficiency"] == ""


def test_sacct_keeps_only_jobs_of_my_uid(shell: Any, fake_runner: FakeRunner) -> None:
    other = _owner() + 1000
    t = datetime.now().strftime("%Y-%m-%dT%H:%M:%S")
    # same user NAME, another uid: a name is never proof of ownership
    fake_runner.on(
        ["sacct", ...],
        stdout=SACCT + f"77|{other}|root|research|debug|normal|COMPLETED|0:0|00:00:01|"
        f"00:05:00|{t}|{t}|{t}|node1|1|cpu=1|1000M||00:00.003||imposter\n",
    )
    assert "77" not in [r["job"] for r in shell.run_line_magic("sacct", "").rows]


def test_sacct_one_job_shows_its_steps_and_efficiency_line(shell: Any, fake_runner: FakeRunner) -> None:
    records = parse_sacct(SACCT)
    job = next(r.job_id for r in records if not r.is_job and r.step not in ("batch", "extern"))
    fake_runner.on(
        ["sacct", ..., "-j", job],
        stdout="\n".join(line for line in SACCT.splitlines() if line.split("|")[0].split(".")[0] == job)
        + "\n",
    )
    table = shell.run_line_magic("sacct", job)
    steps = [r.step or "(job)" for r in records if r.job_id == job]
    assert [row["step"] for row in table.rows] == steps
    assert table.notes and table.notes[-1].startswith(f"Efficiency of job {job}: ")
    assert "COMPLETED" in table.notes[0]  # how it ended, above the efficiency
    assert fake_runner.called(["sacct", ..., "-j", job])


def test_sacct_when_accounting_is_off_says_how_to_turn_it_on(shell: Any, fake_runner: FakeRunner) -> None:
    fake_runner.on(["sacct", ...], stderr=OFF, returncode=1)
    with pytest.raises(UsageError) as info:
        shell.run_line_magic("sacct", "")
    message = str(info.value)
    assert "accounting is off" in message and "--accounting" in message and "Traceback" not in message


@pytest.mark.parametrize(
    ("line", "words"),
    [
        ("--since yesterday", "give a span"),
        ("-n 0", "1 to 1000"),
        ("-n 5000", "1 to 1000"),
        ("12 --since 3d", "drop --since"),
        ("12x", "job"),
        ("--since 3000d", "a year"),
        ("--bogus", "--bogus"),
    ],
)
def test_sacct_usage_errors(shell: Any, fake_runner: FakeRunner, line: str, words: str) -> None:
    with pytest.raises(UsageError, match=words):
        shell.run_line_magic("sacct", line)
    assert not fake_runner.history


def test_parse_since() -> None:
    now = datetime(2026, 12, 1, 12, 0)
    assert parse_since("90m") == pytest.approx(1.5)
    assert parse_since("3d") == 72 and parse_since("1w") == 168 and parse_since("6") == 6
    assert parse_since("2026-11-30", now) == 36
    with pytest.raises(UsageError, match="future"):
        parse_since("2026-12-02", now)


def test_sshare_explains_each_of_my_accounts(shell: Any, fake_runner: FakeRunner) -> None:
    fake_runner.on(["sshare", ...], stdout=SSHARE)
    table = shell.run_line_magic("sshare", "")
    assert [row["account"] for row in table.rows] == ["root", "research", "teaching"]
    research = next(r for r in table.rows if r["account"] == "research")
    assert research["standing"] != "unused" and research["gpu_minutes"] not in ("-", "0")
    text = table.text()
    assert "teaching: you have not used account teaching lately" in text
    assert "fair-share factor: 0 to 1" in text and "<table" in table._repr_html_()
    assert {s["account"] for s in table.to_json()["shares"]} == {"root", "research", "teaching"}


def test_sshare_with_accounting_off_is_one_clear_line(shell: Any, fake_runner: FakeRunner) -> None:
    fake_runner.on(["sshare", ...], stdout=recorded("22.05/sshare/a07_sshare_accounting_off.txt").stdout)
    with pytest.raises(UsageError) as info:
        shell.run_line_magic("sshare", "")
    assert "accounting" in str(info.value) and "--accounting" in str(info.value)
    fake_runner.on(
        ["sshare", ...],
        stderr="sshare: error: You are not running a supported priority plugin\n(priority/basic).\n",
        returncode=1,
    )
    with pytest.raises(AccountingOffError, match="accounting is off"):
        my_shares()


def test_sshare_takes_no_arguments(shell: Any, fake_runner: FakeRunner) -> None:
    with pytest.raises(UsageError, match="no arguments"):
        shell.run_line_magic("sshare", "-A research")


def test_sshare_of_a_user_with_no_association(
    fake_runner: FakeRunner, monkeypatch: pytest.MonkeyPatch
) -> None:
    from slurmlab.slurm import identity

    monkeypatch.setattr(identity, "current_user", lambda: "nobody-here")
    fake_runner.on(["sshare", ...], stdout=SSHARE)
    with pytest.raises(AccountingOffError, match="no association for user 'nobody-here'"):
        my_shares()


JOBS = recorded("22.05/sacct/a01_sacct_jobs.txt").stdout


def _only(job: str) -> str:
    return "\n".join(line for line in JOBS.splitlines() if line.split("|")[0].split(".")[0] == job) + "\n"


def _job_of(state: str) -> str:
    return next(r.job_id for r in parse_sacct(JOBS) if r.is_job and r.state == state)


def test_sacct_one_ended_job_says_how_it_ended_and_what_to_change(
    shell: Any, fake_runner: FakeRunner
) -> None:
    job = _job_of("TIMEOUT")
    fake_runner.on(["sacct", ..., "-j", job], stdout=_only(job))
    table = shell.run_line_magic("sacct", job)
    assert "TIMEOUT" in table.notes[0] and any(n.startswith("-> more time") for n in table.notes)
    assert table.notes[-1].startswith(f"Efficiency of job {job}")


def test_sacct_one_job_with_a_hostile_name_stays_one_line_per_record(
    shell: Any, fake_runner: FakeRunner
) -> None:
    records = parse_sacct(JOBS)
    job = next(r for r in records if r.is_job and ("\n" in r.name or "|" in r.name))
    fake_runner.on(
        ["sacct", ..., "-j", job.job_id],
        stdout=_only(job.job_id)
        + "\n".join(line for line in JOBS.splitlines() if not line.split("|")[0][:1].isdigit()),
    )  # the name's own lines
    table = shell.run_line_magic("sacct", job.job_id)
    rows = [r for r in records if r.job_id == job.job_id]
    assert len(table.rows) == len(rows)
    assert "\n" not in table.rows[0]["name"] and "|" in table.rows[0]["name"]
