"""The doctor's evidence: a running job between steps has no steps, whatever words the version uses."""

from __future__ import annotations

import pytest

from slurmlab.errors import SlurmError
from slurmlab.slurm.doctor_evidence import job_steps
from slurmlab.testing import FakeRunner


@pytest.mark.parametrize("said", ["Job step 46. not found", "No job steps in the system"])
def test_a_job_between_steps_has_none(said: str) -> None:
    fake = FakeRunner()
    fake.replay("22.05/00_sinfo_version.txt")
    fake.on(["scontrol", "show", "step", "46"], stderr=said + "\n", returncode=1)
    try:
        assert job_steps("46", fake) == []
    finally:
        fake.close()


def test_another_failure_is_still_an_error() -> None:
    fake = FakeRunner()
    fake.replay("22.05/00_sinfo_version.txt")
    fake.on(
        ["scontrol", "show", "step", "46"],
        stderr="slurm_load_job error: Unable to contact slurm controller\n",
        returncode=1,
    )
    try:
        with pytest.raises(SlurmError):
            job_steps("46", fake)
    finally:
        fake.close()
