"""Job names and comments are free text their submitter chose: recorded real output of jobs whose
names forge fields (tests/data/slurm/22.05/commands.txt) never yields a forged owner, node or GPU."""

from __future__ import annotations

from pathlib import Path

from slurmlab.core.slurm.parse_text import parse_scontrol_jobs
from slurmlab.errors import ParseError

HOSTILE = Path(__file__).resolve().parents[3] / "data" / "slurm" / "22.05" / "hostile_scontrol_show_job_d.txt"


def _read() -> tuple[dict[int, object], list[ParseError]]:
    problems: list[ParseError] = []
    jobs = parse_scontrol_jobs(HOSTILE.read_text(), problems=problems)
    return {j.job_id: j for j in jobs}, problems


def test_no_record_of_the_hostile_listing_yields_a_forged_owner_or_gpu() -> None:
    jobs, problems = _read()
    # every record is either read right or reported, none is dropped silently
    assert sorted([*jobs, *(int(p.record_id) for p in problems if p.record_id)]) == [1, 2, 3, 4, 5]
    for job in jobs.values():
        assert job.user == "slurmlabother"  # type: ignore[attr-defined]
        assert job.gpu_allocs == ()  # type: ignore[attr-defined]  # every job here holds no GPU
        assert job.nodes in (("node1",), ("node2",))  # type: ignore[attr-defined]


def test_a_name_with_spaces_and_keys_on_its_own_line_is_kept_whole() -> None:
    jobs, _ = _read()
    job2 = jobs[2]
    assert job2.name == "y UserId=root(0)"  # type: ignore[attr-defined]
    assert job2.comment == "c Nodes=node1 CPU_IDs=0 Mem=0 GRES=gpu:h100:8(IDX:0-7)"  # type: ignore[attr-defined]
    job4 = jobs.get(4)
    if job4 is not None:  # a name holding a 10^6-node hostlist is text, never expanded
        assert job4.name.startswith("n NodeList=n[1-1000]x[1-1001]")  # type: ignore[attr-defined]


def test_names_that_inject_lines_make_their_own_record_bad_not_the_listing() -> None:
    jobs, problems = _read()
    bad = {p.record_id for p in problems}
    # job 1 injects a second UserId= line, job 3 a per-node GRES line: reported, with their ids
    assert {"1", "3"} <= bad
    # job 5 injects a TresPerJob= line where Slurm prints none: reported, or read without it
    assert "5" in bad or jobs[5].tres_per_job == ()  # type: ignore[attr-defined]
    # the honest-looking records around them are still read
    assert 2 in jobs and 4 in jobs
