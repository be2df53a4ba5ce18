"""``%salloc``'s note for a request without a time limit says what the real Slurm then does (issue 28 follow-up).

The h200-mig sandbox's partition ``mig`` has ``MaxTime=1-00:00:00`` and no DefaultTime. Without ``-t`` Slurm gives
the job the partition's MaxTime; ``-t UNLIMITED`` (and ``-t 0``, which salloc and sbatch read as UNLIMITED) is more
than MaxTime, and Slurm does not cut it down to MaxTime: the job waits for ever with reason PartitionTimeLimit
(EnforcePartLimits=NO, Slurm's default and the sandbox's) or is refused at submission (a site with
EnforcePartLimits). Each note is checked against what the same request got from the sandbox.
"""

from __future__ import annotations

from typing import Any

import pytest

from slurmlab.core.request.request import parse_request
from slurmlab.magics.salloc_checks import partition_for, time_limit_note
from slurmlab.slurm.node_queries import list_partitions
from tests.integration.sandbox_jobs import clear_queue, submit, wait_for

pytestmark = pytest.mark.sandbox


def _state(runner: Any, job: str) -> str:
    return str(runner.run(["squeue", "-h", "-t", "all", "-j", job, "-o", "%T|%r|%l"]).stdout.strip())


def test_the_note_for_no_limit_says_what_slurm_does_with_it(sandbox_factory: Any) -> None:
    runner = sandbox_factory("h200-mig").runner()  # the topology tests' sandbox, when they ran first
    clear_queue(runner)
    try:
        _check_notes(runner)
    finally:
        clear_queue(runner)


def _check_notes(runner: Any) -> None:
    partitions = list(list_partitions(runner))
    (mig,) = [p for p in partitions if p.name == "mig"]
    assert mig.max_time == 86400 and mig.default_time is None, mig

    # no -t: the job gets MaxTime, and the note says so
    bare = parse_request(["-p", "mig"])
    assert "MaxTime, 1-00:00:00" in (time_limit_note(bare, partition_for(bare, partitions, None)) or "")
    job = submit(runner, "-p", "mig")
    assert wait_for(lambda: _state(runner, job).split("|")[-1] == "1-00:00:00", 15, "the job's limit"), job

    # -t UNLIMITED and -t 0: Slurm keeps the job waiting (PartitionTimeLimit) with no limit; the note says that
    # and never that it gets MaxTime
    for spelled in ("UNLIMITED", "0"):
        request = parse_request(["-p", "mig", "-t", spelled])
        note = time_limit_note(request, partition_for(request, partitions, None)) or ""
        assert "PartitionTimeLimit" in note and "never starts" in note and "gets" not in note, note
        waiting = submit(runner, "-p", "mig", "-t", spelled)

        def held(job: str = waiting) -> str | None:
            state = _state(runner, job)
            return state if "PartitionTimeLimit" in state else None

        seen = wait_for(held, 15, f"-t {spelled}: reason PartitionTimeLimit")
        assert seen == "PENDING|PartitionTimeLimit|UNLIMITED", seen
