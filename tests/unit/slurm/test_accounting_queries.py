"""sacct through the one Runner: recorded answers of a real Slurm (scripts/record_sacct.py), accounting off,
slurmdbd down, sacct missing, and inputs that must never reach an argv."""

from __future__ import annotations

from datetime import datetime
from pathlib import Path

import pytest

from slurmlab.errors import AccountingOffError, RequestError, SlurmNotFoundError
from slurmlab.slurm.accounting_queries import job_records, recent_records, sacct_argv
from slurmlab.slurm.runner import Runner
from slurmlab.testing import FakeRunner, recorded


def test_job_records_are_the_job_and_its_steps_only(fake: FakeRunner) -> None:
    fake.on(sacct_argv("-j", "3"), reply=recorded("22.05/sacct/a01_sacct_jobs.txt"))
    records = job_records(fake, "3")
    assert {r.job_id for r in records} == {"3"}
    assert [r.step for r in records] == [None, "batch", "0", "1"]
    assert job_records(fake, 3) == records  # an int id is the same job


def test_recent_records_ask_since_an_absolute_time_and_keep_the_latest_jobs(fake: FakeRunner) -> None:
    fake.on(["sacct", ...], reply=recorded("22.05/sacct/a02_sacct_recent.txt"))
    records = recent_records(fake, user="root", since_hours=2, limit=3, now=datetime(2026, 12, 1, 12, 0, 0))
    assert fake.history[-1][-4:] == ["-u", "root", "-S", "2026-12-01T10:00:00"]
    assert list(dict.fromkeys(r.job_id for r in records)) == ["7", "8", "9"]
    assert len(recent_records(fake, user="root")) > len(records)


def test_accounting_off_says_how_to_turn_it_on(fake: FakeRunner) -> None:
    fake.on(["sacct", ...], reply=recorded("22.05/sacct/a04_sacct_disabled.txt"))
    with pytest.raises(AccountingOffError) as err:
        job_records(fake, "1")
    assert "accounting is off" in str(err.value) and "--accounting" in str(err.value)
    assert "Slurm accounting storage is disabled" in err.value.stderr


def test_a_silent_slurmdbd_is_named(fake: FakeRunner) -> None:
    fake.on(
        ["sacct", ...],
        returncode=1,
        stderr=(
            "sacct: error: slurm_persist_conn_open_without_init: failed to open persistent connection to host:127.0.0.1:"
            "6819: Connection refused\nsacct: error: Problem talking to the database: Connection refused\n"
        ),
    )
    with pytest.raises(AccountingOffError, match="slurmdbd"):
        recent_records(fake)


def test_sacct_missing_says_where_it_comes_from(tmp_path: Path) -> None:
    runner = Runner(env={"PATH": str(tmp_path)})  # a real runner on a PATH without sacct
    with pytest.raises(SlurmNotFoundError) as err:
        job_records(runner, "1")
    assert "sacct is not installed" in str(err.value) and "slurm-client" in str(err.value)


@pytest.mark.parametrize(
    "call",
    [
        lambda f: job_records(f, "-v"),
        lambda f: job_records(f, "0"),
        lambda f: recent_records(f, user="-x"),
        lambda f: recent_records(f, user="a b"),
        lambda f: recent_records(f, since_hours=0),
        lambda f: recent_records(f, limit=0),
    ],
)
def test_bad_input_never_runs_sacct(fake: FakeRunner, call: object) -> None:
    with pytest.raises(RequestError):
        call(fake)  # type: ignore[operator]
    assert fake.history == []
