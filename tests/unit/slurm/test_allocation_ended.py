"""``outcome()``: sacct first (recorded answers of a real 22.05), the controller's record when accounting is off."""

from __future__ import annotations

import pytest

from slurmlab.errors import AllocationError
from slurmlab.slurm.accounting_queries import sacct_argv
from slurmlab.slurm.allocation.how_ended import outcome
from slurmlab.testing import FakeRunner, recorded


def test_outcome_reads_sacct_and_keeps_the_request_for_the_advice(fake: FakeRunner) -> None:
    fake.on(sacct_argv("-j", "6"), reply=recorded("22.05/sacct/a01_sacct_jobs.txt"))
    end = outcome("6", fake, argv=["--gpus=1", "-t", "1"], settle=0)
    assert end.state == "TIMEOUT" and end.source == "sacct" and end.job_id == "6"
    assert end.advice[0].endswith("%salloc --gpus=1 -t 2")


def test_accounting_off_falls_back_to_the_controller_and_says_sacct_would_say_more(fake: FakeRunner) -> None:
    fake.on(["sacct", ...], reply=recorded("22.05/sacct/a04_sacct_disabled.txt"))
    fake.replay("22.05/00_sinfo_version.txt")
    fake.on(
        ["scontrol", "show", "job", "-d", "6"],
        reply=recorded("22.05/sacct/a03_scontrol_show_job_timeout.txt"),
    )
    end = outcome("6", fake, settle=0)
    assert end.state == "TIMEOUT" and end.source == "scontrol"
    assert "accounting is off" in end.note and "sacct would add" in end.note and "--accounting" in end.note


def test_an_allocation_without_a_job_id_has_no_end_to_explain(fake: FakeRunner) -> None:
    from slurmlab.slurm.allocation import Allocation

    alloc = Allocation(runner=fake, release_at_exit=False)
    with pytest.raises(AllocationError, match="never got a job id"):
        alloc.outcome()
