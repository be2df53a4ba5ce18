"""Layouts not seen in the recordings: extra fields, missing optional ones, broken values.

The inputs are the project's golden files (tests/data/slurm, every version and JSON layout recorded); the
extra test at the end reads the shared real-cluster capture and skips without it.
"""

from __future__ import annotations

import copy
import json
import re
from datetime import datetime, timezone
from typing import Any

import pytest
from fake_slurm import golden_path, golden_with
from shared_paths import require_shared

from slurmlab.core.slurm.detect import detect_and_parse
from slurmlab.core.slurm.models import ExitStatus, Job
from slurmlab.core.slurm.parse_json import parse_jobs_json, parse_nodes_json
from slurmlab.core.slurm.parse_text import parse_scontrol_jobs, parse_scontrol_nodes, parse_version
from slurmlab.core.slurm.timefmt import format_duration, parse_duration
from slurmlab.errors import ParseError

# every JSON job layout recorded: openapi v0.0.38 (22.05), data_parser v0.0.40-v0.0.45 (24.11, 26.05)
JOB_FILES = [("22.05", "s01_squeue.json")] + [
    (version, name)
    for name in (
        "s05_scontrol_json_show_job_d.json",
        "s01_squeue_json_v0.0.40.json",
        "s01_squeue_json_v0.0.41.json",
        "s05_scontrol_json_v0.0.42_show_job_d.json",
        "s05_scontrol_json_v0.0.43_show_job_d.json",
        "s05_scontrol_json_v0.0.44_show_job_d.json",
    )
    for version in golden_with(name, "24.11", "26.05")
]
OPTIONAL_JOB_FIELDS = [
    "gres_detail",
    "tres_per_node",
    "array_task_string",
    "exit_code",
    "flags",
    "end_time",
    "user_name",
]


def _load(version: str, name: str) -> dict[str, Any]:
    return json.loads(golden_path(version, name).read_text())  # type: ignore[no-any-return]


def _index_of(doc: dict[str, Any], job_id: int) -> int:
    return next(i for i, j in enumerate(doc["jobs"]) if j["job_id"] == job_id)


@pytest.mark.parametrize(("folder", "name"), JOB_FILES)
def test_unknown_fields_are_ignored(folder: str, name: str) -> None:
    doc = _load(folder, name)
    base = parse_jobs_json(doc)
    extra = copy.deepcopy(doc)
    extra["brand_new_top_level"] = {"x": 1}
    for j in extra["jobs"]:
        j["field_from_slurm_27"] = {"set": True, "infinite": False, "number": 5}
    assert parse_jobs_json(extra) == base


@pytest.mark.parametrize(("folder", "name"), JOB_FILES)
@pytest.mark.parametrize("field", OPTIONAL_JOB_FIELDS)
def test_missing_optional_fields_still_parse(folder: str, name: str, field: str) -> None:
    doc = _load(folder, name)
    for j in doc["jobs"]:
        j.pop(field, None)
    jobs = {j.job_id: j for j in parse_jobs_json(doc)}
    assert jobs[2].state == "RUNNING" and jobs[2].nodes == ("node1", "node2")
    if field == "gres_detail":
        assert jobs[2].gpu_allocs == ()
    else:
        assert jobs[2].gpus_by_node() == {"node1": (4,), "node2": (0,)}


@pytest.mark.parametrize(("folder", "name"), JOB_FILES)
def test_missing_required_field_names_it(folder: str, name: str) -> None:
    doc = _load(folder, name)
    del doc["jobs"][3]["job_state"]
    with pytest.raises(ParseError, match="job_state"):
        parse_jobs_json(doc)


@pytest.mark.parametrize(("folder", "name"), JOB_FILES)
def test_bad_gres_detail_is_reported_not_dropped(folder: str, name: str) -> None:
    doc = _load(folder, name)
    two_nodes = _index_of(doc, 2)
    doc["jobs"][two_nodes]["gres_detail"] = ["gpu:h100:1(IDX:2)", "gpu:h100:1(IDX:zz)"]
    with pytest.raises(ParseError, match="IDX:zz"):
        parse_jobs_json(doc)
    doc["jobs"][two_nodes]["gres_detail"] = ["gpu:h100:1(IDX:2)"]  # two nodes, one entry
    with pytest.raises(ParseError, match="2 nodes"):
        parse_jobs_json(doc)


@pytest.mark.parametrize("version", golden_with("s08_scontrol_show_node_d.txt"))
def test_unknown_and_missing_keys_in_text(version: str) -> None:
    text = golden_path(version, "s08_scontrol_show_node_d.txt").read_text()
    changed = re.sub(
        r"   AllocTRES=[^\n]*\n",
        "\n",
        text.replace("GresDrain=N/A", "GresDrain=N/A NewKey2027=whatever"),
        count=1,
    )
    assert "NewKey2027" in changed and changed.count("AllocTRES=") == text.count("AllocTRES=") - 1
    assert [n.gpu_used_indices() for n in parse_scontrol_nodes(changed)] == [
        n.gpu_used_indices() for n in parse_scontrol_nodes(text)
    ]
    broken = text.replace("GresUsed=gpu:h100:6(IDX:0,2-4,6-7)", "GresUsed=gpu:h100:6(IDX:0,2-?)")
    assert broken != text
    with pytest.raises(ParseError, match=r"2-\?"):
        parse_scontrol_nodes(broken)


def test_text_job_without_state_is_an_error() -> None:
    with pytest.raises(ParseError, match="JobState"):
        parse_scontrol_jobs("JobId=5 JobName=x\n   UserId=u(1) GroupId=g(1)\n   Partition=gpu\n")


@pytest.mark.parametrize("version", golden_with("s04_sinfo_nodes.json", "24.11", "26.05"))
def test_sinfo_merges_node_partition_rows_without_losing_any(version: str) -> None:
    doc = _load(version, "s04_sinfo_nodes.json")
    assert len(doc["sinfo"]) == 2  # node1, node2 in the one partition gpu
    assert [(n.name, n.partitions) for n in parse_nodes_json(doc)] == [
        ("node1", ("gpu",)),
        ("node2", ("gpu",)),
    ]
    # node2 also in a second partition, as on a cluster with overlapping partitions: one row more, one node
    extra = copy.deepcopy(next(r for r in doc["sinfo"] if r["nodes"]["nodes"] == ["node2"]))
    extra["partition"]["name"] = "all"
    doc["sinfo"].append(extra)
    nodes = parse_nodes_json(doc)
    assert [(n.name, n.partitions) for n in nodes] == [("node1", ("gpu",)), ("node2", ("gpu", "all"))]
    doc["sinfo"][0]["nodes"]["nodes"] = []
    with pytest.raises(ParseError, match="names no nodes"):
        parse_nodes_json(doc)


def test_shared_sinfo_merges_node_partition_rows_without_losing_any() -> None:
    """Extra: the shared real capture, whose nodes sit in two partitions each."""
    doc = json.loads(require_shared("slurm", "24.11", "s04_sinfo.json").read_text())
    assert len(doc["sinfo"]) == 6
    nodes = parse_nodes_json(doc)
    assert [n.name for n in nodes] == ["node1", "node2", "node3"]
    doc["sinfo"][0]["nodes"]["nodes"] = []
    with pytest.raises(ParseError, match="names no nodes"):
        parse_nodes_json(doc)


@pytest.mark.parametrize(
    ("raw", "code", "signal"), [(0, 0, 0), (768, 3, 0), (15, 0, 15), (9, 0, 9), (256, 1, 0)]
)
def test_exit_status_from_raw_wait_status(raw: int, code: int, signal: int) -> None:
    e = ExitStatus.from_wait_status(raw)
    assert (e.code, e.signal) == (code, signal)


def test_exit_status_text() -> None:
    assert ExitStatus.from_text("3:0") == ExitStatus(3, 0, "ERROR")
    with pytest.raises(ParseError):
        ExitStatus.from_text("3")


@pytest.mark.parametrize(
    ("text", "seconds"),
    [
        ("01:00:00", 3600),
        ("30:00", 1800),
        ("1-00:00:00", 86400),
        ("1-02:03:04", 93784),
        ("5", 300),
        ("UNLIMITED", None),
        ("2-3", 183600),
    ],
)
def test_durations(text: str, seconds: int | None) -> None:
    assert parse_duration(text) == seconds
    assert parse_duration(format_duration(seconds)) == seconds


@pytest.mark.parametrize("bad", ["1:2:3:4", "abc", "-5", "1--2"])
def test_bad_duration(bad: str) -> None:
    with pytest.raises(ParseError):
        parse_duration(bad)


def test_version_text() -> None:
    assert parse_version("slurm 24.11.5\n") == "24.11.5"
    assert parse_version("slurm-wlm 22.05.8") == "22.05.8"
    with pytest.raises(ParseError):
        parse_version("sinfo: command not found")


@pytest.mark.parametrize(
    "garbage", ["hello world\nthis is not slurm", "{not json", "[1, 2]", '{"meta": {}}', "   "]
)
def test_garbage_is_a_clear_parse_error(garbage: str) -> None:
    with pytest.raises(ParseError):
        detect_and_parse(garbage)


def test_time_left_of_a_running_job_without_end_time() -> None:
    start = datetime(2026, 1, 1, tzinfo=timezone.utc)
    job = Job(job_id=1, name="x", state="RUNNING", start_time=start, time_limit=600)
    assert job.time_left(datetime(2026, 1, 1, 0, 4, tzinfo=timezone.utc)) == 360
    assert (
        Job(job_id=1, name="x", state="RUNNING", start_time=start, time_limit=None).time_left(start) is None
    )


def test_node_blocks_without_a_job_gres_line() -> None:
    text = (
        "JobId=7 JobName=x\n   UserId=u(1) GroupId=g(1)\n   JobState=RUNNING Reason=None\n   NodeList=n[1-2] TimeLimit=UNLIMITED\n"
        # older Slurm prints the per-node block with no JOB_GRES line, still right after this one
        "   Socks/Node=* NtasksPerN:B:S:C=0:0:*:* CoreSpec=*\n"
        "     Nodes=n1 CPU_IDs=0-1 Mem=1G GRES=gpu:a100:2(IDX:0,3)\n"
        "     Nodes=n2 CPU_IDs=0 Mem=512 GRES=gpu:a100:1(IDX:1),mps:50\n"
        "   Comment=has spaces and a=b inside\n"
    )
    (job,) = parse_scontrol_jobs(text, tz=timezone.utc)
    assert job.gpus_by_node() == {"n1": (0, 3), "n2": (1,)}
    assert job.alloc_on("n1").mem_mb == 1024  # type: ignore[union-attr]
    assert job.alloc_on("n2").mps_count == 50  # type: ignore[union-attr]
    assert job.time_limit is None and job.reason is None


def test_scontrol_empty_lists_are_no_records_not_errors() -> None:
    # what `scontrol show job -d` prints on an idle cluster (exit 0), and its kin
    from slurmlab.core.slurm.parse_text import (
        parse_scontrol_jobs,
        parse_scontrol_nodes,
        parse_scontrol_partitions,
        parse_scontrol_steps,
    )

    assert parse_scontrol_jobs("No jobs in the system\n") == []
    assert parse_scontrol_steps("No job steps in the system\n") == []
    assert parse_scontrol_nodes("No nodes in the system\n") == []
    assert parse_scontrol_partitions("No partitions in the system\n") == []
    import pytest

    from slurmlab.errors import ParseError

    with pytest.raises(ParseError):
        parse_scontrol_jobs("No jobs here, but garbage\n")
