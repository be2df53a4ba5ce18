"""benchmarks/scale.py: the scaled Slurm output parses cleanly, agrees with itself, and the runner filters."""

from __future__ import annotations

import json
import sys
from collections import Counter
from pathlib import Path

import pytest

sys.path.insert(0, str(Path(__file__).resolve().parents[3]))

from benchmarks.scale import VERSIONS, scale_inputs
from slurmlab.core.slurm.json_jobs import parse_jobs_json
from slurmlab.core.slurm.json_nodes import parse_nodes_json
from slurmlab.core.slurm.parse_text import (
    parse_scontrol_jobs,
    parse_scontrol_nodes,
    parse_scontrol_partitions,
)
from slurmlab.core.slurm.squeue_brief import BRIEF_FORMAT, parse_squeue_brief
from slurmlab.errors import ParseError

NODES, JOBS = 40, 300


@pytest.fixture(scope="module", params=VERSIONS)
def inputs(request: pytest.FixtureRequest):  # type: ignore[no-untyped-def]
    return scale_inputs(NODES, JOBS, request.param, cache=None)


def _gpus_by_node(jobs) -> dict[str, set[int]]:  # type: ignore[no-untyped-def]
    held: dict[str, set[int]] = {}
    for job in jobs:
        for alloc in job.gpu_allocs:
            for item in alloc.items:
                if item.name == "gpu":
                    taken = set(item.indices or ())
                    assert not held.get(alloc.node, set()) & taken, f"GPU given twice on {alloc.node}"
                    held.setdefault(alloc.node, set()).update(taken)
    return held


def test_every_listing_parses_without_a_problem(inputs) -> None:  # type: ignore[no-untyped-def]
    problems: list[ParseError] = []
    jobs = parse_jobs_json(json.loads(inputs.text("squeue_json")), problems=problems)
    text_jobs = parse_scontrol_jobs(inputs.text("scontrol_job_text"), problems=problems)
    nodes = parse_nodes_json(json.loads(inputs.text("sinfo_json")), problems=problems)
    text_nodes = parse_scontrol_nodes(inputs.text("scontrol_node_text"), problems=problems)
    assert problems == []
    assert len(jobs) == len(text_jobs) == len(parse_squeue_brief(inputs.text("squeue_brief"))) == JOBS
    assert sorted(n.name for n in nodes) == sorted(n.name for n in text_nodes)
    assert len(nodes) == NODES and nodes[0].name == "node0001"
    [part] = parse_scontrol_partitions(inputs.text("scontrol_partition_text"))
    assert part.nodelist == f"node[0001-{NODES:04d}]"


def test_realistic_variety(inputs) -> None:  # type: ignore[no-untyped-def]
    jobs = parse_scontrol_jobs(inputs.text("scontrol_job_text"))
    states = Counter(j.state for j in jobs)
    assert states["RUNNING"] > JOBS // 10 and states["PENDING"] > JOBS // 10
    assert len({j.user for j in jobs}) >= 5
    running = [j for j in jobs if j.state == "RUNNING"]
    assert any(len(j.nodes) > 1 for j in running), "no multi-node job"
    assert any(i.name == "shard" for j in running for a in j.gpu_allocs for i in a.items), "no shard job"
    counts = {
        sum(len(i.indices or ()) for a in j.gpu_allocs for i in a.items if i.name == "gpu") for j in running
    }
    assert {1, 2, 4, 8} <= counts


def test_job_gpu_indices_agree_with_node_gres_used(inputs) -> None:  # type: ignore[no-untyped-def]
    held = _gpus_by_node(parse_scontrol_jobs(inputs.text("scontrol_job_text")))
    held_json = _gpus_by_node(parse_jobs_json(json.loads(inputs.text("squeue_json"))))
    assert held == held_json
    for node in parse_scontrol_nodes(inputs.text("scontrol_node_text")):
        used = {i for item in node.gres_used if item.name == "gpu" for i in (item.indices or ())}
        assert used == held.get(node.name, set()), node.name


def test_the_runner_answers_and_filters_as_slurm_does(inputs) -> None:  # type: ignore[no-untyped-def]
    runner = inputs.runner()
    try:
        assert runner.run(["sinfo", "--version"]).stdout.split()[-1].startswith(inputs.version)
        brief = runner.run(["squeue", "-h", "-t", "all", "-j", "1001,1003", "-o", BRIEF_FORMAT]).stdout
        assert [b.job_id for b in parse_squeue_brief(brief)] == [1001, 1003]
        one = parse_scontrol_jobs(runner.run(["scontrol", "show", "job", "-d", "1002"]).stdout)
        assert [j.job_id for j in one] == [1002]
        node = parse_scontrol_nodes(runner.run(["scontrol", "show", "node", "-d", "node0002"]).stdout)
        assert [n.name for n in node] == ["node0002"]
        if "scontrol_job_json" in inputs.texts:
            doc = json.loads(runner.run(["scontrol", "--json", "show", "job", "-d", "1002"]).stdout)
            assert "meta" in doc and [j.job_id for j in parse_jobs_json(doc)] == [1002]
        assert runner.run(["squeue", "--json"]).stdout == inputs.text("squeue_json")
    finally:
        runner.close()


def test_cached_on_disk_and_read_back_the_same(tmp_path: Path) -> None:
    first = scale_inputs(5, 20, "22.05", cache=tmp_path)
    again = scale_inputs(5, 20, "22.05", cache=tmp_path)
    assert first.path is not None and (first.path / "done").exists()
    assert again.texts == first.texts


def test_unknown_version_is_refused() -> None:
    with pytest.raises(ValueError, match="24.11"):
        scale_inputs(5, 5, "17.02", cache=None)
