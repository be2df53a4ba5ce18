"""JSON jobs carry the per-node CPU_IDs and memory of ``scontrol show job -d``'s text, on every layout."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from slurmlab.core.slurm.gres import parse_index_list
from slurmlab.core.slurm.parse_json import parse_jobs_json, parse_nodes_json
from slurmlab.core.slurm.parse_text import parse_scontrol_jobs
from tests.fake_slurm import golden_path, golden_with
from tests.shared_paths import shared_fixtures_dir

DATA = Path(__file__).resolve().parents[3] / "data" / "slurm"


def _allocs(jobs):  # type: ignore[no-untyped-def]
    return {
        j.job_id: [(a.node, a.cpu_ids, a.mem_mb, a.gpu_indices, a.items) for a in j.gpu_allocs] for j in jobs
    }


def _compare(json_path: Path, text_path: Path, nodes_path: Path | None = None) -> int:
    nodes = parse_nodes_json(json.loads(nodes_path.read_text())) if nodes_path else None
    from_json = _allocs(parse_jobs_json(json.loads(json_path.read_text()), nodes=nodes))
    from_text = _allocs(parse_scontrol_jobs(text_path.read_text()))
    compared = 0
    for job_id, allocs in from_json.items():
        assert job_id in from_text, f"{json_path.name}: job {job_id} is not in {text_path.name}"
        assert allocs == from_text[job_id], f"{json_path.name}: job {job_id}"
        compared += sum(1 for a in allocs if a[1] is not None)
    return compared


@pytest.mark.parametrize("version", ["24.11", "26.05"])
@pytest.mark.parametrize("jobs", ["s05_scontrol_json_show_job_d.json", "s01_squeue.json"])
def test_recorded_json_jobs_equal_the_text_form(version: str, jobs: str) -> None:
    assert _compare(DATA / version / jobs, DATA / version / "s06_scontrol_show_job_d.txt") >= 8


@pytest.mark.parametrize("version", ["24.11", "26.05"])
@pytest.mark.parametrize("with_nodes", [False, True])
def test_hyperthreaded_node_counts_every_thread_of_a_core(version: str, with_nodes: bool) -> None:
    folder = DATA / version
    nodes = folder / "x07_scontrol_json_show_node.json" if with_nodes else None
    assert (
        _compare(folder / "x05_scontrol_json_show_job_d.json", folder / "x06_scontrol_show_job_d.txt", nodes)
        == 3
    )
    job = next(
        j
        for j in parse_jobs_json(json.loads((folder / "x05_scontrol_json_show_job_d.json").read_text()))
        if j.name == "sock1"
    )
    # 120 CPUs on 2-thread cores: 60 cores, both threads of each listed (pairs 2k, 2k+1)
    ids = parse_index_list(job.gpu_allocs[0].cpu_ids or "")
    assert len(ids) == 120 and all(i + 1 in ids for i in ids if i % 2 == 0)
    assert job.gpu_allocs[0].mem_mb == 120000


# every older data_parser layout the recorded versions still write (their default one: above)
LAYOUT_JOBS = [
    (version, f"{prefix}{layout}{suffix}")
    for layout in ("v0.0.40", "v0.0.41", "v0.0.42", "v0.0.43", "v0.0.44")
    for prefix, suffix in (("s05_scontrol_json_", "_show_job_d.json"), ("s01_squeue_json_", ".json"))
    for version in golden_with(f"{prefix}{layout}{suffix}", "24.11", "26.05")
]


@pytest.mark.parametrize(("version", "name"), LAYOUT_JOBS, ids=[f"{v}/{n}" for v, n in LAYOUT_JOBS])
def test_older_layout_json_jobs_equal_the_text_form(version: str, name: str) -> None:
    nodes = golden_path(version, "s07_scontrol_json_show_node.json")
    assert (
        _compare(golden_path(version, name), golden_path(version, "s06_scontrol_show_job_d.txt"), nodes) >= 8
    )


def test_22_05_json_jobs_equal_the_text_form_with_the_node_records() -> None:
    text = golden_path("22.05", "s06_scontrol_show_job_d.txt")
    json_path = golden_path("22.05", "s01_squeue.json")
    # the same dgx-h100 node1-2 shapes; 22.05 has no JSON nodes. Job 2's CPUs on node1 are on socket 1,
    # which the 22.05 layout numbers per socket: only the node record turns them into CPU_IDs
    nodes = golden_path("24.11", "s07_scontrol_json_show_node.json")
    assert _compare(json_path, text, nodes) >= 8
    with pytest.raises(AssertionError, match="job 2"):
        _compare(json_path, text)


def _shared(*parts: str) -> Path:
    base = shared_fixtures_dir()
    path = base.joinpath(*parts) if base else None
    if path is None or not path.exists():
        pytest.skip(
            f"shared fixture {'/'.join(parts)} not available (extra test of the real-cluster capture)"
        )
    return path


@pytest.mark.parametrize(
    "name",
    [
        "s05_scontrol_show_job_d.json",
        "s05b_scontrol_json_show_job_d.json",
        "s01_squeue.json",
        "dp/scontrol_show_job_d.v0.0.40.json",
        "dp/scontrol_show_job_d.v0.0.41.json",
        "dp/scontrol_show_job_d.v0.0.42.json",
        "dp/squeue.v0.0.40.json",
        "dp/squeue.v0.0.41.json",
        "dp/squeue.v0.0.42.json",
    ],
)
def test_shared_24_11_json_jobs_equal_the_text_form(name: str) -> None:
    nodes = _shared("slurm", "24.11", "s07_scontrol_show_node.json")
    text = _shared("slurm", "24.11", "s06_scontrol_show_job_d.txt")
    assert _compare(_shared("slurm", "24.11", name), text, nodes) >= 7


def test_shared_22_05_json_jobs_equal_the_text_form_with_the_node_records() -> None:
    text = _shared("slurm", "22.05", "s06_scontrol_show_job_d.txt")
    json_path = _shared("slurm", "22.05", "s01_squeue.json")
    nodes = _shared(
        "slurm", "24.11", "s07_scontrol_show_node.json"
    )  # same node[1-3] shapes; 22.05 has no JSON nodes
    assert _compare(json_path, text, nodes) >= 7


def _old_layout_job(sockets: dict[str, object]) -> dict[str, object]:
    return {
        "jobs": [
            {
                "job_id": 5,
                "job_state": "RUNNING",
                "nodes": "n1",
                "gres_detail": ["gpu:h100:1(IDX:3)"],
                "job_resources": {
                    "allocated_nodes": [{"nodename": "n1", "sockets": sockets, "memory_allocated": 4000}]
                },
            }
        ]
    }


def test_old_layout_past_socket_0_without_node_record_is_unknown_not_guessed() -> None:
    doc = _old_layout_job({"1": {"cores": {"2": "allocated"}}})
    alloc = parse_jobs_json(doc)[0].gpu_allocs[0]
    assert alloc.cpu_ids is None and alloc.mem_mb == 4000
    nodes = parse_nodes_json(
        {"nodes": [{"name": "n1", "state": "IDLE", "sockets": 2, "cores": 8, "threads": 2}]}
    )
    assert parse_jobs_json(doc, nodes=nodes)[0].gpu_allocs[0].cpu_ids == "20-21"


def test_old_layout_on_socket_0_needs_no_node_record() -> None:
    doc = _old_layout_job({"0": {"cores": {"0": "allocated", "1": "allocated", "3": "allocated"}}})
    assert parse_jobs_json(doc)[0].gpu_allocs[0].cpu_ids == "0-1,3"


def test_malformed_allocation_is_a_parse_error_for_that_job() -> None:
    doc = _old_layout_job({"x": {"cores": {"0": "allocated"}}})
    problems: list = []  # type: ignore[type-arg]
    assert parse_jobs_json(doc, problems=problems) == []
    assert problems and "socket index" in str(problems[0])
