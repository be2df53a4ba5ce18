"""Every recorded Slurm output parses to the same facts about the recorded workload.

The project's own golden files (``tests/data/slurm/<version>``, scripts/record-golden.py) of 22.05, 24.11 and
26.05, with every JSON layout each version still writes, are the inputs. The shared real-cluster capture
(``../shared/fixtures/slurm``, a different workload: jobs 1-21) is read by the extra tests at the end only,
which skip where it is absent.
"""

from __future__ import annotations

import json
from datetime import timedelta, timezone
from pathlib import Path

import pytest
from fake_slurm import GOLDEN_VERSIONS, golden_outputs, golden_path, golden_with
from shared_paths import list_shared, require_shared

from slurmlab.core.slurm.detect import Parsed, TextRow, detect_and_parse
from slurmlab.core.slurm.models import Job, Node, Partition, Step
from slurmlab.core.slurm.parse_json import parse_jobs_json
from slurmlab.core.slurm.parse_text import parse_scontrol_jobs
from slurmlab.core.slurm.squeue_brief import JobBrief
from slurmlab.errors import ParseError
from slurmlab.testing import recorded

GOLDEN = golden_outputs()
# Outputs of commands whose format detect_and_parse does not claim (one-column lists, srun output, ping), and
# the hand-recorded hostile records: each is refused with a ParseError, never read as something else.
NOT_DETECTED = ("sinfo_node_states", "owner", "srun_", "ping", "sinfo_partitions", "hostile_")
# the one lifecycle job of the l* files, and the state each file shows it in
LIFE_JOB = "slurmlab-0123abcd"
LIFE_STATES = {"pending": "PENDING", "running": "RUNNING", "cancelled": "CANCELLED"}
SUBMITTED = {"w06": 4, "w07": 5, "w08": 6, "w09": 7, "w10": 8, "w11": 9, "w12": 10}


def _id(p: Path) -> str:
    return "/".join(p.parts[-2:])


def _jobs(parsed: Parsed) -> dict[str, Job]:
    jobs = {j.display_id: j for j in parsed.items if isinstance(j, Job)}
    assert len(jobs) == len(parsed.items)
    return jobs


def check_jobs(jobs: dict[str, Job], full: bool) -> None:
    # full: the output includes finished jobs (squeue --json from 24.11 lists only pending/running)
    j1, j2, j3, j4, j5 = (jobs[str(i)] for i in range(1, 6))
    assert j1.state == "RUNNING" and j1.name == "gpus2" and j1.time_limit == 3600
    assert j1.gpus_by_node() == {"node1": (0, 3)}
    assert j1.alloc_on("node1") is not None and j1.alloc_on("node1").gpu_types == {"h100": (0, 3)}  # type: ignore[union-attr]
    assert [(g.name, g.count) for g in j1.tres_per_job] == [("gpu", 2)]
    assert j2.nodes == ("node1", "node2")
    assert j2.gpus_by_node() == {"node1": (4,), "node2": (0,)}
    assert j2.gres_binding_enforced and not j1.gres_binding_enforced
    assert [(g.name, g.type, g.count) for g in j2.tres_per_node] == [("gpu", "h100", 1)]
    (a3,) = j3.gpu_allocs
    assert a3.node == "node1" and a3.gpu_indices == () and a3.shares() == {1: 4} and a3.shard_count == 4
    assert [(g.name, g.count) for g in j3.tres_per_node] == [("shard", 4)]
    assert j4.name == "batchrun" and j4.gpus_by_node() == {"node1": (2,)}  # --gpus-per-task=1
    assert (j5.state, j5.reason, j5.held, j5.time_limit, j5.gpu_allocs) == (
        "PENDING",
        "JobHeldUser",
        True,
        1800,
        (),
    )
    assert [(g.name, g.count) for g in j5.tres_per_job] == [("gpu", 1)]
    assert (jobs["9"].state, jobs["9"].reason) == ("PENDING", "Resources")
    assert [(g.name, g.count) for g in jobs["9"].tres_per_node] == [("gpu", 8)]
    pending_array = jobs["8_[3-5%3]"]
    assert (pending_array.state, pending_array.reason, pending_array.array_tasks) == (
        "PENDING",
        "JobArrayTaskLimit",
        "3-5%3",
    )
    assert pending_array.array_job_id == 8 and pending_array.job_id == 8
    assert jobs["8_0"].gpus_by_node() == {"node1": (6,)} and jobs["8_0"].array_task_id == 0
    assert jobs["8_1"].gpus_by_node() == {"node1": (7,)} and jobs["8_1"].array_task_id == 1
    assert jobs["8_2"].gpus_by_node() == {"node2": (4,)} and jobs["8_2"].array_job_id == 8
    assert jobs["8_0"].job_id == 11
    if full:
        assert jobs["10"].state == "FAILED" and jobs["10"].reason == "NonZeroExitCode"
        assert jobs["10"].exit is not None and (jobs["10"].exit.code, jobs["10"].exit.signal) == (3, 0)
        assert jobs["7"].state == "CANCELLED" and jobs["7"].exit is not None and jobs["7"].exit.signal == 15
        assert jobs["6"].state == "COMPLETED" and jobs["6"].exit is not None and jobs["6"].exit.ok
        assert len(jobs) == 13
    else:
        assert {j.state for j in jobs.values()} == {"RUNNING", "PENDING"} and len(jobs) == 10


def check_mig_jobs(jobs: dict[str, Job]) -> None:
    """The h200-mig sandbox (x_* files): MIG instance types as GPU types, CPU_IDs on a 2-thread node."""
    by_name = {j.name: j for j in jobs.values()}
    mig, mig3g, sock1 = by_name["migjob"], by_name["mig3g"], by_name["sock1"]
    assert mig.partition == "mig" and mig.alloc_on("node1").gpu_types == {"1g.18gb": (4, 5)}  # type: ignore[union-attr]
    assert [(g.name, g.type, g.count) for g in mig.tres_per_node] == [("gpu", "1g.18gb", 2)]
    assert mig3g.alloc_on("node1").gpu_types == {"3g.71gb": (13,)}  # type: ignore[union-attr]
    assert mig3g.alloc_on("node1").mem_mb == 8192  # type: ignore[union-attr]
    assert sock1.gpus_by_node() == {"node1": (6,)} and sock1.alloc_on("node1").mem_mb == 120000  # type: ignore[union-attr]


def check_nodes(nodes: dict[str, Node], release: str) -> None:
    n1, n2 = nodes["node1"], nodes["node2"]
    assert set(nodes) == {"node1", "node2"}
    assert n1.partitions == ("gpu",) and n2.partitions == ("gpu",)
    assert (n1.gpu_total, n1.gpu_used, n1.gpu_used_indices()) == (8, 6, {"h100": (0, 2, 3, 4, 6, 7)})
    assert (n2.gpu_total, n2.gpu_used, n2.gpu_used_indices()) == (8, 2, {"h100": (0, 4)})
    assert [g.count for g in n1.gres if g.name == "shard"] == [32]
    assert n1.state == "MIXED" and n1.cpus == 112
    if release == "22.05":
        # 22.05 reports only the GPU the shards sit on (and counts 1 there)
        assert n1.shard_usage() == {1: (1, None)}
        assert n2.shard_usage() == {}
    elif release == "24.11":
        assert n1.shard_usage() == {i: (4 if i == 1 else 0, 4) for i in range(8)}
        assert n2.shard_usage() == {i: (0, 4) for i in range(8)}
    else:
        # 26.05 prints "-" for the shards of a GPU taken whole: their use is unknown, not 0
        assert n1.shard_usage() == {i: (4 if i == 1 else 0 if i == 5 else None, 4) for i in range(8)}
        assert n2.shard_usage() == {i: (None if i in (0, 4) else 0, 4) for i in range(8)}


def check_mig_node(nodes: dict[str, Node]) -> None:
    (n,) = nodes.values()
    assert (n.name, n.partitions, n.cpus, n.gpu_total, n.gpu_used) == ("node1", ("mig",), 192, 20, 4)
    assert n.gpu_types() == {"h200": 4, "1g.18gb": 9, "3g.71gb": 2, "4g.71gb": 1, "2g.35gb": 3, "1g.35gb": 1}
    assert {t: i for t, i in n.gpu_used_indices().items() if i} == {"1g.18gb": (4, 5, 6), "3g.71gb": (13,)}


def check_partitions(parts: dict[str, Partition]) -> None:
    assert list(parts) == ["gpu"]
    assert parts["gpu"].nodes == ("node1", "node2") and parts["gpu"].max_time is None
    assert parts["gpu"].total_cpus == 224 and parts["gpu"].state == "UP"


def check_steps(steps: dict[str, Step]) -> None:
    s2, s4 = steps["2.0"], steps["4.0"]
    assert (s4.name, s4.nodes, s4.state, s4.num_tasks, s4.job_id) == (
        "stepsleep",
        ("node1",),
        "RUNNING",
        1,
        "4",
    )
    assert (s2.name, s2.nodes, s2.num_tasks, s2.job_id) == ("gpustep", ("node1", "node2"), 2, "2")
    assert [(g.name, g.count) for g in s2.tres_per_node] == [("gpu", 1)]
    assert s2.tres_alloc is not None and (s2.tres_alloc.cpus, s2.tres_alloc.mem_mb) == (4, 4000)
    assert steps["4.batch"].name == "batch" and steps["4.batch"].nodes == ("node1",)
    assert s4.time_limit is None  # UNLIMITED


def check_life(path: Path, jobs: dict[str, Job]) -> None:
    """An l* file: the one allocation slurmlab submitted, in the state its name says."""
    (job,) = jobs.values()
    state = next(s for word, s in LIFE_STATES.items() if word in path.name)
    assert (job.name, job.state, job.partition) == (LIFE_JOB, state, "gpu")
    assert job.comment is not None and job.comment.startswith("slurmlab:")
    if state == "RUNNING":
        assert job.nodes == ("node1",) and len(job.gpu_allocs[0].gpu_indices) == 2


@pytest.mark.parametrize("path", GOLDEN, ids=_id)
def test_every_golden_file(path: Path) -> None:
    text = path.read_text()
    release = path.parent.name
    if path.name.startswith(NOT_DETECTED) or any(k in path.name for k in NOT_DETECTED):
        with pytest.raises(ParseError):
            detect_and_parse(text)
        return
    if path.suffix == ".yaml":
        with pytest.raises(ParseError, match="--json"):
            detect_and_parse(text)
        return
    parsed = detect_and_parse(text, tz=timezone.utc)
    if parsed.version is not None:
        assert parsed.version.startswith(release)
    name = path.name
    if "controller_down" in name:
        # 24.11's `scontrol --json show job` prints an empty job list (exit 0) while slurmctld is down
        assert parsed.kind == "version" or (parsed.kind == "jobs" and not parsed.items), _id(path)
        return
    assert parsed.items, "every recorded output holds something"
    assert parsed.to_dict()["items"]
    if parsed.kind == "jobs" and name.startswith("l"):
        check_life(path, _jobs(parsed))
    elif parsed.kind == "jobs" and name.startswith("x"):
        check_mig_jobs(_jobs(parsed))
    elif parsed.kind == "jobs":
        squeue_newer = release != "22.05" and "squeue" in name
        check_jobs(_jobs(parsed), full=not squeue_newer)
    elif parsed.kind == "brief":
        rows = {r.display_id: r for r in parsed.items if isinstance(r, JobBrief)}
        assert len(rows) == len(parsed.items)
        if name.startswith("s21"):
            assert len(rows) == 13 and rows["8_[3-5%3]"].state == "PENDING" and rows["10"].state == "FAILED"
        else:
            (row,) = rows.values()
            assert row.state in ("PENDING", "RUNNING", "CANCELLED") and row.partition == "gpu"
    elif parsed.kind == "nodes" and name.startswith("x"):
        check_mig_node({n.name: n for n in parsed.items if isinstance(n, Node)})
    elif parsed.kind == "nodes":
        check_nodes({n.name: n for n in parsed.items if isinstance(n, Node)}, release)
    elif parsed.kind == "partitions":
        check_partitions({p.name: p for p in parsed.items if isinstance(p, Partition)})
    elif parsed.kind == "steps":
        check_steps({s.step_id: s for s in parsed.items if isinstance(s, Step)})
    elif parsed.kind == "version":
        assert parsed.version == {"22.05": "22.05.8", "24.11": "24.11.5", "26.05": "26.05.5"}[release]
    elif parsed.kind == "submitted":
        assert isinstance(parsed.items[0], TextRow)
        if name[:3] in SUBMITTED:
            assert parsed.items[0].cells[0] == str(SUBMITTED[name[:3]])
        else:  # e11: a version that accepts more nodes than the partition has (left pending)
            assert name.startswith("e11") and recorded(f"{release}/{name}").returncode == 0
    elif parsed.kind == "config":
        keys = {r.cells[0]: r.cells[1] for r in parsed.items if isinstance(r, TextRow)}
        assert "AccountingStorageTRES" in keys and keys["GresTypes"].startswith("gpu")
    elif parsed.kind == "hostnames":
        assert [r.cells[0] for r in parsed.items if isinstance(r, TextRow)] == ["node1", "node2"]
    else:
        assert parsed.kind == "table", f"{_id(path)}: unexpected kind {parsed.kind}"
        lines = [ln for ln in text.splitlines() if ln.strip()]
        has_date = parsed.notes and parsed.notes[0].startswith("report time")
        expected_rows = len(lines) - (1 if parsed.layout == "table" else 0) - (1 if has_date else 0)
        assert len(parsed.items) == expected_rows  # no row dropped
        cells = [c for r in parsed.items if isinstance(r, TextRow) for c in r.cells]
        assert "node1" in cells or "gpu*" in cells or "2.0" in cells or "1" in cells


@pytest.mark.parametrize("version", GOLDEN_VERSIONS)
def test_every_version_holds_the_whole_workload(version: str) -> None:
    """The kinds the parametrised test checks are all there (a recording that lost a file fails here)."""
    names = {p.name for p in golden_outputs(version)}
    for name in (
        "s06_scontrol_show_job_d.txt",
        "s08_scontrol_show_node_d.txt",
        "s13b_scontrol_show_steps.txt",
        "s16_scontrol_show_partition.txt",
        "s21_squeue_brief.txt",
        "s01_squeue.json",
        "x06_scontrol_show_job_d.txt",
        "w06_sbatch_running.txt",
        "00_slurmd_version.txt",
    ):
        assert name in names, f"{version} lacks {name}"
    if version != "22.05":  # scontrol --json exists from 23.02
        for name in (
            "s05_scontrol_json_show_job_d.json",
            "s07_scontrol_json_show_node.json",
            "s09_scontrol_json_show_partition.json",
            "s13_scontrol_json_show_steps.json",
            "x05_scontrol_json_show_job_d.json",
            "x07_scontrol_json_show_node.json",
        ):
            assert name in names, f"{version} lacks {name}"


def _text_and_json(version: str) -> tuple[Path, Path]:
    json_name = "s01_squeue.json" if version == "22.05" else "s05_scontrol_json_show_job_d.json"
    return golden_path(version, "s06_scontrol_show_job_d.txt"), golden_path(version, json_name)


@pytest.mark.parametrize("version", GOLDEN_VERSIONS)
def test_same_job_facts_from_text_and_json(version: str) -> None:
    text_path, json_path = _text_and_json(version)
    text_jobs = {j.job_id: j for j in parse_scontrol_jobs(text_path.read_text(), tz=timezone.utc)}
    json_jobs = {j.job_id: j for j in parse_jobs_json(json.loads(json_path.read_text()))}
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


@pytest.mark.parametrize("version", golden_with("s05_scontrol_json_show_job_d.json"))
def test_time_left_counts_down_from_the_end_time(version: str) -> None:
    doc = json.loads(golden_path(version, "s05_scontrol_json_show_job_d.json").read_text())
    jobs = {j.display_id: j for j in parse_jobs_json(doc)}
    j1 = jobs["1"]
    assert j1.start_time is not None and j1.end_time == j1.start_time + timedelta(hours=1)
    assert j1.time_left(j1.start_time + timedelta(minutes=10)) == 3000
    assert j1.time_left(j1.start_time + timedelta(hours=2)) == 0
    assert jobs["5"].time_left(j1.start_time) is None  # pending: the clock has not started
    assert jobs["9"].expected_start is not None or jobs["9"].start_time is None


# ---- extra: the shared real-cluster capture (skipped without ../shared) -----------------------------------
# Its workload differs (three nodes and partitions in one cluster, jobs 1-21, failed submissions 17-21); the
# parser behaviour each check covers is also checked on the golden files above.
SHARED_FILES = [
    p
    for p in list_shared("slurm", "22.05")
    + list_shared("slurm", "24.11")
    + list_shared("slurm", "24.11", "dp")
    if p.suffix != ".stderr"
]
NOT_OUTPUT = {"commands.txt", "slurm.conf", "gres.conf"}


def _shared_id(p: Path) -> str:
    return "/".join(p.parts[-3:]) if p.parent.name == "dp" else "/".join(p.parts[-2:])


def check_shared_jobs(jobs: dict[str, Job], full: bool) -> None:
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


def check_shared_nodes(nodes: dict[str, Node], newer: bool) -> None:
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
        assert n1.shard_usage() == {3: (1, None)}
        assert n2.shard_usage() == {}


def check_shared_partitions(parts: dict[str, Partition]) -> None:
    assert parts["gpu"].nodes == ("node1", "node2")
    assert parts["mig"].nodes == ("node3",) and parts["mig"].max_time == 86400
    assert parts["all"].nodes == ("node1", "node2", "node3") and parts["all"].max_time is None
    assert parts["gpu"].total_cpus == 96 and parts["gpu"].state == "UP"


def check_shared_steps(steps: dict[str, Step]) -> None:
    s1, s2 = steps["1.0"], steps["2.0"]
    assert (s1.name, s1.nodes, s1.state, s1.num_tasks) == ("stepsleep", ("node1",), "RUNNING", 1)
    assert (s2.name, s2.nodes, s2.num_tasks, s2.job_id) == ("gpustep", ("node1", "node2"), 2, "2")
    assert [(g.name, g.count) for g in s2.tres_per_node] == [("gpu", 1)]
    assert s2.tres_alloc is not None and (s2.tres_alloc.cpus, s2.tres_alloc.mem_mb) == (4, 4000)
    assert steps["6.batch"].name == "batch" and steps["6.batch"].nodes == ("node2",)
    assert s1.time_limit is None  # UNLIMITED


@pytest.mark.parametrize("path", SHARED_FILES, ids=_shared_id)
def test_every_shared_fixture_file(path: Path) -> None:
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
        check_shared_jobs(_jobs(parsed), full=not squeue_newer)
    elif parsed.kind == "nodes":
        check_shared_nodes({n.name: n for n in parsed.items if isinstance(n, Node)}, newer=release == "24.11")
    elif parsed.kind == "partitions":
        check_shared_partitions({p.name: p for p in parsed.items if isinstance(p, Partition)})
    elif parsed.kind == "steps":
        check_shared_steps({s.step_id: s for s in parsed.items if isinstance(s, Step)})
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


def test_shared_time_left_of_the_24_11_capture() -> None:
    doc = json.loads(require_shared("slurm", "24.11", "s05_scontrol_show_job_d.json").read_text())
    jobs = {j.display_id: j for j in parse_jobs_json(doc)}
    j1 = jobs["1"]
    assert j1.start_time is not None and j1.end_time == j1.start_time + timedelta(hours=1)
    assert j1.time_left(j1.start_time + timedelta(minutes=10)) == 3000
    assert jobs["7"].time_left(j1.start_time) is None
