"""The parsers' hot paths (issue 14): what is built fast equals what the plain code builds, caches stay bounded
and never keep a failure, and the fast readers refuse what the checked ones refuse."""

from __future__ import annotations

import dataclasses
import json

import pytest

from slurmlab.core.slurm import gres, tres
from slurmlab.core.slurm.json_fields import number, text_or_none
from slurmlab.core.slurm.json_jobs import _build_job, parse_jobs_json
from slurmlab.core.slurm.models import Job, Tres
from slurmlab.errors import ParseError
from slurmlab.testing import golden


@pytest.mark.parametrize("version", ["22.05", "24.11", "26.05"])
def test_fast_built_jobs_equal_plainly_built_ones(version: str) -> None:
    jobs = parse_jobs_json(json.loads(golden(f"{version}/s01_squeue.json")))
    assert jobs
    for job in jobs:
        values = {f.name: getattr(job, f.name) for f in dataclasses.fields(Job)}
        plain = Job(**values)
        assert job == plain and hash(job) == hash(plain) and repr(job) == repr(plain)
        assert job.to_dict() == plain.to_dict()
        with pytest.raises(dataclasses.FrozenInstanceError):
            job.name = "changed"  # type: ignore[misc]


def test_a_missing_field_falls_back_to_the_checked_constructor() -> None:
    with pytest.raises(TypeError):
        _build_job({"job_id": 1})


def test_gres_cache_returns_equal_items_and_stays_bounded() -> None:
    first = gres.parse_gres("gpu:h100:2(IDX:0,3)")
    assert gres.parse_gres("gpu:h100:2(IDX:0,3)") == first
    assert first[0].indices == (0, 3)
    for i in range(gres._CACHE_SIZE + 10):
        gres.parse_gres(f"gpu:h100:1(IDX:{i})")
    assert len(gres._CACHE) <= gres._CACHE_SIZE
    assert gres.parse_gres("gpu:h100:1(IDX:7)")[0].indices == (7,)


@pytest.mark.parametrize("bad", ["gpu:h100:2(IDX:0-)", "gpu::2", "(((", "shard:h100:1(x/4)"])
def test_a_bad_gres_string_fails_every_time(bad: str) -> None:
    for _ in range(2):
        with pytest.raises(ParseError):
            gres.parse_gres(bad)
    assert bad not in gres._CACHE


def test_tres_cache_and_failures() -> None:
    a = Tres.parse("cpu=4,mem=4000M,node=2,billing=4")
    assert a is not None and a.cpus == 4 and a.mem_mb == 4000
    assert Tres.parse("cpu=4,mem=4000M,node=2,billing=4") == a
    assert Tres.parse("(null)") is None and Tres.parse("") is None
    for _ in range(2):
        with pytest.raises(ParseError):
            Tres.parse("cpu=four")
    assert "cpu=four" not in tres._CACHE


@pytest.mark.parametrize(
    ("value", "expected"),
    [
        (5, 5),
        ({"set": True, "infinite": False, "number": 7}, 7),
        ({"set": False, "infinite": False, "number": 7}, None),
        ({"set": True, "infinite": True, "number": 0}, None),
        ({"number": 3}, 3),  # no "set": Slurm's default is set
        (True, 1),
        ("42", 42),
        (None, None),
    ],
)
def test_number_fast_path_agrees_with_the_checked_one(value: object, expected: int | None) -> None:
    assert number(value) == expected


@pytest.mark.parametrize(
    "value",
    [
        2**64,
        -(2**64),
        {"set": True, "infinite": False, "number": 2**70},
        {"set": True, "number": [1]},
        "x1",
        float("nan"),
    ],
)
def test_number_still_refuses_what_is_no_slurm_number(value: object) -> None:
    with pytest.raises(ParseError):
        number(value)


def test_text_fast_path() -> None:
    assert text_or_none("node1") == "node1"
    assert text_or_none(" (null) ") is None and text_or_none("N/A") is None and text_or_none("") is None
    with pytest.raises(ParseError):
        text_or_none({"a": 1})


def test_core_status_fast_path_refuses_a_bad_status() -> None:
    doc = json.loads(golden("24.11/s01_squeue.json"))
    job = next(j for j in doc["jobs"] if j.get("gres_detail"))
    core = job["job_resources"]["nodes"]["allocation"][0]["sockets"][0]["cores"][0]
    core["status"] = {"not": "a status"}
    problems: list[ParseError] = []
    parsed = parse_jobs_json(doc, problems=problems)
    assert len(problems) == 1 and "status" in str(problems[0])
    assert len(parsed) == len(doc["jobs"]) - 1


def _old_layout_job(job_id: int, node: str, cores: object, **more: object) -> dict[str, object]:
    """A 22.05 (openapi v0.0.38) running job holding one GPU and ``cores`` of socket 0 on ``node``."""
    return {
        "job_id": job_id,
        "job_state": "RUNNING",
        "nodes": node,
        "gres_detail": ["gpu:h100:1(IDX:0)"],
        "job_resources": {
            "allocated_nodes": [
                {"nodename": node, "memory_allocated": 1000, "sockets": {"0": {"cores": cores}}}
            ]
        },
        **more,
    }


def test_the_collector_is_switched_back_as_it_was_even_after_a_failure() -> None:
    import gc

    doc = {"jobs": [_old_layout_job(1, "node1", {"0": "allocated"})]}
    assert gc.isenabled()
    parse_jobs_json(doc)
    assert gc.isenabled()
    with pytest.raises(ParseError):
        parse_jobs_json({"jobs": [{"job_id": "x", "job_state": "RUNNING"}]})
    assert gc.isenabled()
    gc.disable()
    try:
        parse_jobs_json(doc)
        assert not gc.isenabled()  # a caller that turned it off keeps it off
    finally:
        gc.enable()


def test_memoised_core_sets_follow_each_nodes_shape_and_never_hide_a_corrupt_one() -> None:
    from slurmlab.core.slurm.json_job_resources import NodeShape

    cores = {"0": "allocated", "1": "allocated"}
    doc = {
        "jobs": [
            _old_layout_job(1, "node1", cores),
            _old_layout_job(2, "node2", dict(cores)),
            _old_layout_job(3, "node1", dict(cores)),
        ]
    }
    shapes = {"node1": NodeShape(56, 1), "node2": NodeShape(56, 2)}  # node2 has two threads per core
    jobs = parse_jobs_json(doc, nodes=shapes)
    assert [j.gpu_allocs[0].cpu_ids for j in jobs] == ["0-1", "0-3", "0-1"]
    for bad in ({"0": "allocated", "1": 7}, {"0": ["allocated", {}]}, {"x": "allocated"}, ["allocated"]):
        problems: list[ParseError] = []
        found = parse_jobs_json(
            {"jobs": [*doc["jobs"], _old_layout_job(4, "node1", bad)]}, nodes=shapes, problems=problems
        )
        assert [j.job_id for j in found] == [1, 2, 3], bad
        assert len(problems) == 1 and problems[0].record_id == "4", bad


def test_shared_text_fields_are_read_once_and_a_hostile_one_is_still_reported() -> None:
    base = {
        "user_name": "alice",
        "partition": "gpu",
        "tres_req_str": "cpu=4,mem=8G,node=1,gres/gpu=1",
        "tres_per_node": "gres:gpu:1",
    }
    doc = {"jobs": [_old_layout_job(k, "node1", {"0": "allocated"}, **base) for k in (1, 2)]}
    one, two = parse_jobs_json(doc)
    assert one.tres_req is two.tres_req and one.tres_per_node is two.tres_per_node
    assert one.user == "alice" and one.tres_req is not None and one.tres_req.cpus == 4
    for hostile in ({"user_name": ["a", "b"]}, {"tres_req_str": {"x": 1}}, {"partition": 10**30}):
        problems: list[ParseError] = []
        found = parse_jobs_json(
            {"jobs": [*doc["jobs"], _old_layout_job(3, "node1", {"0": "allocated"}, **{**base, **hostile})]},
            problems=problems,
        )
        assert [j.job_id for j in found] == [1, 2] and len(problems) == 1, hostile
