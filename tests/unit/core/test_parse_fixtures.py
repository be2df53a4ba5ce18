"""Every recorded Slurm output (22.05, 24.11, 24.11 data_parser v0.0.40-42) parses to the same
facts about the recorded workload (jobs 1-21, see commands.txt beside the fixtures)."""

from __future__ import annotations

from datetime import timedelta, timezone
from pathlib import Path

import pytest
from shared_paths import list_shared, require_shared

from slurmlab.core.slurm.detect import Parsed, TextRow, detect_and_parse
from slurmlab.core.slurm.models import Job, Node, Partition, Step
from slurmlab.core.slurm.parse_text import parse_scontrol_jobs
from slurmlab.errors import ParseError

FILES = [
    p
    for p in list_shared("slurm", "22.05")
    + list_shared("slurm", "24.11")
    + list_shared("slurm", "24.11", "dp")
    if p.suffix != ".stderr"
]
NOT_OUTPUT = {"commands.txt", "slurm.conf", "gres.conf"}


def _id(p: Path) -> str:
    return "/".join(p.parts[-3:]) if p.parent.name == "dp" else "/".join(p.parts[-2:])


def _jobs(parsed: Parsed) -> dict[str, Job]:
    jobs = {j.display_id: j for j in parsed.items if isinstance(j, Job)}
    assert len(jobs) == len(parsed.items)
    return jobs


def check_jobs(jobs: dict[str, Job], full: bool) -> None:
    # full: the output includes finished jobs (24.11 squeue --json lists only pending/running)
    j1, j2, j3, j4, j5, j6 = (jobs[str(i)] for i in range(1, 7))
    assert j1.state == "RUNNING" and j1.name == "gpus2" and j1.time_limit == 3600
    assert j1.gpus_by_node() == {"node1": (0, 1)}
    assert j1.alloc_on("node1") is not None and j1.alloc_on("node1").gpu_types == {"h100": (0, 1)}  # type: ignore[union-attr]
    assert j2.nodes == ("node1", "node2")
    assert j2.gpus_by_node() == {"node1": (2,), "node2": (0,)}
    assert j2.gres_binding_enforced and not j1.gres_binding_enforced
    assert [(g.name, g.type, g.count) for g in j2.tres_per_node] == [("gpu", "h100", 1)]
    (a3,) = j3.gpu_allocs
    assert a3.node == "node1" and a3.gpu_indices == () and a3.shares() == {3: 4} and a3.shard_count == 4
    assert j4.partition == "mig" and j4.alloc_on("node3").gpu_types == {"1g.18gb": (0, 1)}  # type: ignore[union-attr]
    assert j5.alloc_on("node3").gpu_types == {"3g.71gb": (4,)}  # type: ignore[union-attr]
    assert j6.gpus_by_node() == {"node2": (1,)}
    j7 = jobs["7"]
    assert (j7.state, j7.reason, j7.held, j7.time_limit, j7.gpu_allocs) == (
        "PENDING",
        "JobHeldUser",
        True,
        1800,
        (),
    )
    assert [(g.name, g.count) for g in j7.tres_per_job] == [("gpu", 1)]
    assert (jobs["11"].state, jobs["11"].reason) == ("PENDING", "Priority")
    pending_array = jobs["10_[2-5%3]"]
    assert (pending_array.state, pending_array.reason, pending_array.array_tasks) == (
        "PENDING",
        "Resources",
        "2-5%3",
    )
    assert pending_array.array_job_id == 10
    assert jobs["10_0"].gpus_by_node() == {"node2": (3,)} and jobs["10_0"].array_task_id == 0
    assert jobs["10_1"].gpus_by_node() == {"node2": (2,)} and jobs["10_1"].array_task_id == 1
    assert jobs["10_0"].job_id == 13
    if full:
        assert jobs["12"].state == "FAILED" and jobs["12"].reason == "NonZeroExitCode"
        assert jobs["12"].exit is not None and (jobs["12"].exit.code, jobs["12"].exit.signal) == (3, 0)
        assert jobs["9"].state == "CANCELLED" and jobs["9"].exit is not None and jobs["9"].exit.signal == 15
        assert jobs["8"].state == "COMPLETED" and jobs["8"].exit is not None and jobs["8"].exit.ok
        assert {jobs[str(i)].state for i in range(17, 22)} == {"FAILED"}
        assert len(jobs) == 21
    else:
        assert {j.state for j in jobs.values()} == {"RUNNING", "PENDING"}


def check_nodes(nodes: dict[str, Node], newer: bool) -> None:
    n1, n2, n3 = nodes["node1"], nodes["node2"], nodes["node3"]
    assert n1.partitions == ("gpu", "all") and n3.partitions == ("mig", "all")
    assert (n1.gpu_total, n1.gpu_used, n1.gpu_used_indices()) == (4, 3, {"h100": (0, 1, 2)})
    assert (n2.gpu_total, n2.gpu_used, n2.gpu_used_indices()) == (4, 4, {"h100": (0, 1, 2, 3)})
    assert (n3.gpu_total, n3.gpu_used) == (5, 3)
    assert n3.gpu_types() == {"1g.18gb": 4, "3g.71gb": 1}
    assert n3.gpu_used_indices() == {"1g.18gb": (0, 1), "3g.71gb": (4,)}
    assert [g.count for g in n1.gres if g.name == "shard"] == [16]
    assert n1.state == "MIXED" and n1.cpus == 48 and n3.cpus == 32
    if newer:
        assert n1.shard_usage() == {0: (0, 4), 1: (0, 4), 2: (0, 4), 3: (4, 4)}
        assert n2.shard_usage() == {0: (0, 4), 1: (0, 4), 2: (0, 4), 3: (0, 4)}
    else:
        # 22.05 reports only the GPU the shards sit on (and counts 1 there)
        assert n1.shard_usage() == {3: (1, None)}
        assert n2.shard_usage() == {}


def check_partitions(parts: dict[str, Partition]) -> None:
    assert parts["gpu"].nodes == ("node1", "node2")
    assert parts["mig"].nodes == ("node3",) and parts["mig"].max_time == 86400
    assert parts["all"].nodes == ("node1", "node2", "node3") and parts["all"].max_time is None
    assert parts["gpu"].total_cpus == 96 and parts["gpu"].state == "UP"


def check_steps(steps: dict[str, Step]) -> None:
    s1, s2 = steps["1.0"], steps["2.0"]
    assert (s1.name, s1.nodes, s1.state, s1.num_tasks) == ("stepsleep", ("node1",), "RUNNING", 1)
    assert (s2.name, s2.nodes, s2.num_tasks, s2.job_id) == ("gpustep", ("node1", "node2"), 2, "2")
    assert [(g.name, g.count) for g in s2.tres_per_node] == [("gpu", 1)]
    assert s2.tres_alloc is not None and (s2.tres_alloc.cpus, s2.tres_alloc.mem_mb) == (4, 4000)
    assert steps["6.batch"].name == "batch" and steps["6.batch"].nodes == ("node2",)
    assert s1.time_limit is None  # UNLIMITED


@pytest.mark.parametrize("path", FILES, ids=_id)
def test_every_fixture_file(path: Path) -> None:
    text = path.read_text()
    if path.name in NOT_OUTPUT or path.suffix == ".yaml":
        with pytest.raises(ParseError) as info:
            detect_and_parse(text)
        if path.suffix == ".yaml":
            assert "--json" in str(info.value)
        return
    parsed = detect_and_parse(text, tz=timezone.utc)
    release = "22.05" if "22.05" in path.parts else "24.11"
    if parsed.version is not None:
        assert parsed.version.startswith(release)
    assert parsed.items, "every recorded output holds something"
    assert parsed.to_dict()["items"]
    if parsed.kind == "jobs":
        squeue_newer = release == "24.11" and "squeue" in path.name
        check_jobs(_jobs(parsed), full=not squeue_newer)
    elif parsed.kind == "nodes":
        check_nodes({n.name: n for n in parsed.items if isinstance(n, Node)}, newer=release == "24.11")
    elif parsed.kind == "partitions":
        check_partitions({p.name: p for p in parsed.items if isinstance(p, Partition)})
    elif parsed.kind == "steps":
        check_steps({s.step_id: s for s in parsed.items if isinstance(s, Step)})
    elif parsed.kind == "version":
        assert parsed.version in ("22.05.8", "24.11.5")
    elif parsed.kind == "submitted":
        expected = {"w06": "6", "w07": "7", "w08": "8", "w09": "9", "w10": "10", "w11": "11", "w12": "12"}
        assert isinstance(parsed.items[0], TextRow) and parsed.items[0].cells[0] == expected[path.name[:3]]
    elif parsed.kind == "config":
        keys = {r.cells[0]: r.cells[1] for r in parsed.items if isinstance(r, TextRow)}
        assert "AccountingStorageTRES" in keys
    elif parsed.kind == "hostnames":
        assert [r.cells[0] for r in parsed.items if isinstance(r, TextRow)] == ["node1", "node2", "node3"]
    else:
        assert parsed.kind == "table"
        lines = [ln for ln in text.splitlines() if ln.strip()]
        has_date = parsed.notes and parsed.notes[0].startswith("report time")
        expected_rows = len(lines) - (1 if parsed.layout == "table" else 0) - (1 if has_date else 0)
        assert len(parsed.items) == expected_rows  # no row dropped
        cells = [c for r in parsed.items if isinstance(r, TextRow) for c in r.cells]
        assert "node1" in cells or "gpu*" in cells or "1.0" in cells or "1" in cells


def test_same_job_facts_from_22_05_text_and_json() -> None:
    import json

    from slurmlab.core.slurm.parse_json import parse_jobs_json

    base = require_shared("slurm", "22.05")
    text_jobs = {
        j.job_id: j
        for j in parse_scontrol_jobs((base / "s06_scontrol_show_job_d.txt").read_text(), tz=timezone.utc)
    }
    json_jobs = {j.job_id: j for j in parse_jobs_json(json.loads((base / "s01_squeue.json").read_text()))}
    assert text_jobs.keys() == json_jobs.keys()
    for job_id, tj in text_jobs.items():
        jj = json_jobs[job_id]
        assert (tj.state, tj.reason, tj.nodes, tj.time_limit) == (
            jj.state,
            jj.reason,
            jj.nodes,
            jj.time_limit,
        ), job_id
        assert tj.gpu_allocs == jj.gpu_allocs or [a.items for a in tj.gpu_allocs] == [
            a.items for a in jj.gpu_allocs
        ]
        assert tj.exit == jj.exit, job_id
        # the sandbox ran in UTC, so text times read as UTC match the JSON epochs
        assert tj.submit_time == jj.submit_time and tj.start_time == jj.start_time, job_id


def test_time_left_counts_down_from_the_end_time() -> None:
    import json

    from slurmlab.core.slurm.parse_json import parse_jobs_json

    doc = json.loads(require_shared("slurm", "24.11", "s05_scontrol_show_job_d.json").read_text())
    jobs = {j.display_id: j for j in parse_jobs_json(doc)}
    j1 = jobs["1"]
    assert j1.start_time is not None and j1.end_time == j1.start_time + timedelta(hours=1)
    assert j1.time_left(j1.start_time + timedelta(minutes=10)) == 3000
    assert j1.time_left(j1.start_time + timedelta(hours=2)) == 0
    assert jobs["7"].time_left(j1.start_time) is None  # pending: the clock has not started
    assert jobs["11"].expected_start is not None or jobs["11"].start_time is None
