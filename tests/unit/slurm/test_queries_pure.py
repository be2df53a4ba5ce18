"""The pure pieces of the Slurm queries: owner lines, sinfo's default mark, which JSON needs node records."""

from __future__ import annotations

import pytest

from slurmlab.errors import ParseError
from slurmlab.slurm import job_queries, node_queries, owners, queries
from slurmlab.slurm.runner import RunResult


def _result(stdout: str, argv: tuple[str, ...] = ("squeue",)) -> RunResult:
    return RunResult(argv, 0, stdout, "", 0.0)


def test_owner_lines_are_numbers_only() -> None:
    assert owners.parse_owners(_result("12|1001\n13|0\n\n")) == {12: 1001, 13: 0}
    for bad in ("12|root", "12", "x|0", "12|0|1", "12|²"):
        with pytest.raises(ParseError):
            owners.parse_owners(_result(bad))


def test_the_default_partition_is_the_one_sinfo_stars() -> None:
    assert node_queries._parse_sinfo_default(_result("gpu*\nmig\ndebug\n")) == "gpu"
    assert node_queries._parse_sinfo_default(_result("gpu\nmig\n")) is None
    assert node_queries._parse_sinfo_default(_result("*\n")) is None


@pytest.mark.parametrize(
    ("version", "needs"),
    [
        ((22, 5, 8), False),
        ((23, 2, 0), True),
        ((23, 11, 10), True),
        ((24, 5, 1), False),
        ((24, 11, 5), False),
        ((26, 5, 5), False),
    ],
)
def test_only_the_json_layouts_without_node_shapes_fetch_the_nodes(
    version: tuple[int, ...], needs: bool
) -> None:
    assert job_queries._needs_nodes(version) is needs


def test_a_listing_keeps_its_problems_through_filtering() -> None:
    from slurmlab.core.slurm.models import Job

    bad = ParseError("scontrol job record", "JobId=9 …", record_id="9")
    jobs = queries.JobList(
        [Job(job_id=1, name="a", state="RUNNING"), Job(job_id=2, name="b", state="COMPLETED")], [bad]
    )
    mine = job_queries._filter_jobs(jobs, {1: 5, 2: 5}, 5, active_only=True)
    assert [j.job_id for j in mine] == [1] and mine.problems == [bad]
    theirs = job_queries._filter_jobs(jobs, {1: 5, 2: 5}, 6, active_only=False)
    assert list(theirs) == [] and theirs.problems == [bad]
