"""slurmlab acts only on the caller's own jobs, even where Slurm would let root cancel anything."""

from __future__ import annotations

import os
from typing import Any

import pytest

from slurmlab.errors import NotYourJobError
from slurmlab.slurm import queries

pytestmark = pytest.mark.sandbox


@pytest.mark.skipif(os.geteuid() != 0, reason="needs root to submit a job as a second Unix user")
def test_cancelling_another_users_job_is_refused_and_the_job_keeps_running(
    sandbox: Any, server_jobs: Any
) -> None:
    jobs = server_jobs
    other = jobs.ensure_other_user()
    job_id = jobs.submit(sandbox, "--gpus=1", user=other)
    try:
        assert jobs.squeue_state(sandbox, job_id) == "RUNNING"
        with pytest.raises(NotYourJobError) as info:
            queries.cancel_job(job_id, sandbox.runner())
        assert other in str(info.value) and "own jobs" in str(info.value)
        assert jobs.squeue_state(sandbox, job_id) == "RUNNING"
    finally:
        queries.cancel_job(job_id, sandbox.runner(), only_mine=False)
