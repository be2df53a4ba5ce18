"""The scontrol text grammar against hostile free text, and bad records isolated from a listing.

Real records to forge into are the project's golden files of every Slurm version (tests/data/slurm)."""

from __future__ import annotations

import time
from datetime import timezone

import pytest
from fake_slurm import GOLDEN_VERSIONS, golden_path, golden_with

from slurmlab.core.slurm.hostlist import MAX_NAMES, count, expand
from slurmlab.core.slurm.parse_json import parse_jobs_json
from slurmlab.core.slurm.parse_text import (
    parse_scontrol_jobs,
    parse_scontrol_nodes,
    parse_scontrol_partitions,
    parse_scontrol_steps,
)
from slurmlab.core.slurm.squeue_brief import parse_squeue_brief
from slurmlab.errors import ParseError

UTC = timezone.utc
FORGED_GRES = "Nodes=node1 CPU_IDs=0 Mem=0 GRES=gpu:h100:8(IDX:0-7)"
HOSTILE_VALUES = [
    "y UserId=root(0)",
    f"c {FORGED_GRES}",
    "n NodeList=n[1-1000]x[1-1001] NumNodes=1000",
    "q\"uo=te's =  JobState=COMPLETED Partition=admin",
]


def _job2(version: str, **change: str) -> str:
    """Job 2 of the recorded output (gpn2: 1 GPU on node1 and 1 on node2, user root) with fields replaced."""
    text = golden_path(version, "s06_scontrol_show_job_d.txt").read_text()
    record = text[text.index("JobId=2 ") : text.index("JobId=3 ")]
    for key, value in change.items():
        if key == "JobName":
            start = record.index("JobName=") + len("JobName=")
        else:
            start = record.index(f"\n   {key}=") + len(f"\n   {key}=")
        end = record.index("\n", start)
        record = record[:start] + value + record[end:]
    return str(record)


@pytest.mark.parametrize("version", GOLDEN_VERSIONS)
@pytest.mark.parametrize("key", ["JobName", "Comment", "WorkDir", "StdOut", "Command"])
@pytest.mark.parametrize("value", HOSTILE_VALUES)
def test_free_text_never_becomes_fields(key: str, value: str, version: str) -> None:
    plain = _job2(version)
    if key == "Comment":
        text = plain.replace("   WorkDir=", f"   Comment={value}\n   WorkDir=")
    elif key == "StdOut":
        # where Slurm prints it: after WorkDir (22.05 prints Power= next, later versions GresEnforceBind=)
        anchor = "   Power=" if "   Power=" in plain else "   GresEnforceBind="
        text = plain.replace(anchor, f"   StdOut={value}\n{anchor}")
    else:
        text = _job2(version, **{key: value})
    assert text != plain
    (job,) = parse_scontrol_jobs(text, tz=UTC)
    assert job.user == "root" and job.state == "RUNNING" and job.partition == "gpu"
    assert job.nodes == ("node1", "node2")
    assert job.gpus_by_node() == {"node1": (4,), "node2": (0,)}
    if key == "JobName":
        assert job.name == value
    if key == "Comment":
        assert job.comment == value


@pytest.mark.parametrize(
    "forged",
    [
        "\n   UserId=evil(0) GroupId=root(0)",  # a key the record holds: twice
        f"\n     {FORGED_GRES}",  # a per-node block where Slurm prints none
        "\n   TresPerJob=gres:gpu:8",  # a key the record lacks, on the line Slurm gives UserId
        "\nJobId=999 JobName=z\n   UserId=root(0)",  # a whole record forged inside this one
        "\n\tJobState=COMPLETED",  # a line not laid out as Slurm lays lines
    ],
)
@pytest.mark.parametrize("version", GOLDEN_VERSIONS)
def test_a_name_holding_a_newline_makes_its_record_bad_and_only_that_one(forged: str, version: str) -> None:
    text = _job2(version, JobName="evil" + forged) + "\n" + _job2(version).replace("JobId=2 ", "JobId=77 ")
    with pytest.raises(ParseError) as info:
        parse_scontrol_jobs(text, tz=UTC)
    problems: list[ParseError] = []
    jobs = parse_scontrol_jobs(text, tz=UTC, problems=problems)
    assert [j.job_id for j in jobs] == [77]
    assert problems and problems[0].record_id in ("2", "999")
    assert info.value.record_id is not None
    for job in jobs:  # never a forged value, whatever was reported
        assert job.user == "root" and job.gpus_by_node() == {"node1": (4,), "node2": (0,)}


@pytest.mark.parametrize("version", GOLDEN_VERSIONS)
def test_a_forged_gres_block_in_a_later_field_is_refused(version: str) -> None:
    text = _job2(version).replace(
        "   WorkDir=/home/user", f"   WorkDir=/tmp/x\n   JOB_GRES=gpu:h100:8\n     {FORGED_GRES}"
    )
    problems: list[ParseError] = []
    assert parse_scontrol_jobs(text, tz=UTC, problems=problems) == []
    assert problems[0].record_id == "2"


@pytest.mark.parametrize("version", GOLDEN_VERSIONS)
def test_a_record_printed_twice_is_reported_not_trusted(version: str) -> None:
    text = _job2(version) + "\n" + _job2(version)
    problems: list[ParseError] = []
    assert parse_scontrol_jobs(text, tz=UTC, problems=problems) == []
    assert [p.record_id for p in problems] == ["2", "2"]


@pytest.mark.parametrize("version", GOLDEN_VERSIONS)
def test_a_hostlist_bomb_in_a_nodelist_is_one_bad_record_at_once(version: str) -> None:
    bomb = _job2(version, NodeList="n[1-1000]x[1-1000]y[1-1000]")
    text = bomb + "\n" + _job2(version).replace("JobId=2 ", "JobId=78 ")
    problems: list[ParseError] = []
    started = time.perf_counter()
    jobs = parse_scontrol_jobs(text, tz=UTC, problems=problems)
    assert [j.job_id for j in jobs] == [78] and problems[0].record_id == "2"
    assert "hosts" in str(problems[0])
    assert time.perf_counter() - started < 30  # a hang guard only: it used to run for minutes


def test_hostlist_counts_before_it_expands() -> None:
    assert count("node[1-3,7],gpu-a[01-04]") == len(expand("node[1-3,7],gpu-a[01-04]")) == 8
    assert count("n[1-1000]x[1-1000]y[1-1000]") == 10**9
    with pytest.raises(ParseError, match="1,000,000,000"):
        expand("n[1-1000]x[1-1000]y[1-1000]")
    with pytest.raises(ParseError):
        expand("n[1-1000]x[1-1001]")  # the 1,001,000 names
    assert len(expand(f"n[1-{MAX_NAMES}]")) == MAX_NAMES
    with pytest.raises(ParseError):
        expand(f"n[1-{MAX_NAMES}],x1")
    with pytest.raises(ParseError):
        expand("n[1-" + "9" * 30 + "]")
    with pytest.raises(ParseError):
        expand("n\x001")


@pytest.mark.parametrize("version", golden_with("s08_scontrol_show_node_d.txt"))
def test_node_reason_and_os_with_keys_stay_text(version: str) -> None:
    text = golden_path(version, "s08_scontrol_show_node_d.txt").read_text()
    first = text[: text.index("NodeName=node2")]
    hostile = first.replace(
        "   OS=Linux", "   Reason=maint State=IDLE Gres=gpu:h100:99 [root@2026-11-29T15:00:00]\n   OS=Linux"
    )
    assert hostile != first
    (node,) = parse_scontrol_nodes(hostile)
    (plain,) = parse_scontrol_nodes(first)
    assert node.state == plain.state and node.gres == plain.gres
    assert node.reason is not None and node.reason.startswith("maint State=IDLE")


@pytest.mark.parametrize("version", GOLDEN_VERSIONS)
def test_step_names_and_partitions_are_checked_too(version: str) -> None:
    steps = golden_path(version, "s13b_scontrol_show_steps.txt").read_text()
    hostile = steps.replace("Name=stepsleep", "Name=a b Network=x State=COMPLETED", 1)
    assert hostile != steps
    renamed = next(s for s in parse_scontrol_steps(hostile, tz=UTC) if s.step_id == "4.0")
    assert renamed.name == "a b Network=x State=COMPLETED" and renamed.state == "RUNNING"
    forged = steps.replace("Name=stepsleep", "Name=s\n   UserId=0", 1)
    problems: list[ParseError] = []
    assert (
        len(parse_scontrol_steps(forged, tz=UTC, problems=problems)) == len(parse_scontrol_steps(steps)) - 1
    )
    parts = golden_path(version, "s16_scontrol_show_partition.txt").read_text()
    twice = parts.replace("   Nodes=node[1-2]", "   Nodes=node[1-2]\n   Nodes=node[1-9]", 1)
    problems = []
    good = parse_scontrol_partitions(twice, problems=problems)
    assert problems[0].record_id == "gpu" and "gpu" not in [p.name for p in good]


@pytest.mark.parametrize("version", GOLDEN_VERSIONS)
def test_json_and_brief_lists_isolate_a_bad_record(version: str) -> None:
    import json

    doc = json.loads(golden_path(version, "s01_squeue.json").read_text())
    n = len(doc["jobs"])
    doc["jobs"][0]["nodes"] = "n[1-1000]x[1-1001]"
    doc["jobs"][1]["job_state"] = ["RUNNING", 3]
    doc["jobs"][2]["time_limit"] = "soon"
    problems: list[ParseError] = []
    assert len(parse_jobs_json(doc, problems=problems)) == n - 3
    assert len(problems) == 3 and all(p.record_id for p in problems)
    with pytest.raises(ParseError):
        parse_jobs_json(doc)
    brief = (
        "2|2|2|N/A|RUNNING|None|2026-11-29T15:04:03|N/A|1:00:00|58:10|1:50|2|node[1-2]|gpu|root|N/A\n"
        "3|3|3|N/A|RUNNING|None|N/A|N/A|1:00:00|58:10|1:50|2|n[1-1000]x[1-1001]|gpu|root|N/A\n"
    )
    problems = []
    assert [b.job_id for b in parse_squeue_brief(brief, tz=UTC, problems=problems)] == [2]
    assert problems[0].record_id == "3"
