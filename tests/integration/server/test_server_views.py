"""The server's views of Slurm models and its ETag cache (no Slurm needed).

The GRES strings are as Slurm 22.05 / 24.11 print them (see shared fixtures: scontrol show node -d,
scontrol show job -d of the three-node fixture cluster).
"""

from __future__ import annotations

import json
from datetime import datetime, timedelta, timezone

import pytest

from slurmlab.core.slurm.gres import parse_gres
from slurmlab.core.slurm.models import GresAlloc, Job, Node
from slurmlab.server.cache import ResponseCache, etag_matches
from slurmlab.server.views import job_view, node_view

T0 = datetime(2026, 11, 29, 15, 0, tzinfo=timezone.utc)


def _job(job_id: int, node: str, gres: str, *, user: str = "alice", state: str = "RUNNING") -> Job:
    return Job(
        job_id=job_id,
        name=f"j{job_id}",
        state=state,
        user=user,
        nodelist=node,
        nodes=(node,),
        start_time=T0,
        time_limit=3600,
        gpu_allocs=(GresAlloc(node=node, items=parse_gres(gres)),),
    )


def test_node_view_2411_gpus_and_shards_per_gpu() -> None:
    node = Node(
        name="node1",
        state="MIXED",
        partitions=("gpu",),
        gres=parse_gres("gpu:h100:4(S:0-1),shard:h100:16(S:0-1)"),
        gres_used=parse_gres("gpu:h100:3(IDX:0-2),shard:h100:4(0/4,0/4,0/4,4/4)"),
    )
    jobs = [
        _job(1, "node1", "gpu:h100:2(IDX:0-1)"),
        _job(2, "node1", "gpu:h100:1(IDX:2)"),
        _job(3, "node1", "shard:h100:4(0/4,0/4,0/4,4/4)"),
    ]
    view = node_view(node, jobs)
    gpus = view["gpus"]
    assert [g["index"] for g in gpus] == [0, 1, 2, 3]
    assert [g["jobs"] for g in gpus] == [["1"], ["1"], ["2"], ["3"]]
    assert [g["whole"] for g in gpus] == [True, True, True, False]
    assert (gpus[3]["shards_used"], gpus[3]["shards_total"]) == (4, 4)
    assert all(g["type"] == "h100" and not g["mig"] for g in gpus)


def test_node_view_2205_shards_counted_from_jobs() -> None:
    # 22.05 node output: shard:h100:1(IDX:3) while job 3 holds 4 shards there (fixture s04/s08)
    node = Node(
        name="node1",
        state="MIXED",
        gres=parse_gres("gpu:h100:4,shard:h100:16"),
        gres_used=parse_gres("gpu:h100:3(IDX:0-2),shard:h100:1(IDX:3),mps:0"),
    )
    view = node_view(node, [_job(3, "node1", "shard:h100:4(IDX:3)")])
    gpu3 = view["gpus"][3]
    assert (gpu3["shards_used"], gpu3["shards_total"], gpu3["jobs"], gpu3["whole"]) == (4, 4, ["3"], False)
    assert [g["whole"] for g in view["gpus"][:3]] == [True, True, True]


def test_node_view_mig_types_in_gres_conf_order() -> None:
    node = Node(
        name="node3",
        state="MIXED",
        gres=parse_gres("gpu:1g.18gb:4(S:0),gpu:3g.71gb:1(S:1)"),
        gres_used=parse_gres("gpu:1g.18gb:2(IDX:0-1),gpu:3g.71gb:1(IDX:4)"),
    )
    jobs = [_job(4, "node3", "gpu:1g.18gb:2(IDX:0-1)"), _job(5, "node3", "gpu:3g.71gb:1(IDX:4)")]
    gpus = node_view(node, jobs)["gpus"]
    assert [(g["index"], g["type"], g["mig"]) for g in gpus] == [
        (0, "1g.18gb", True),
        (1, "1g.18gb", True),
        (2, "1g.18gb", True),
        (3, "1g.18gb", True),
        (4, "3g.71gb", True),
    ]
    assert [g["jobs"] for g in gpus] == [["4"], ["4"], [], [], ["5"]]


def test_finished_jobs_do_not_occupy_gpus() -> None:
    node = Node(name="node1", state="IDLE", gres=parse_gres("gpu:h100:4"))
    view = node_view(node, [_job(9, "node1", "gpu:h100:1(IDX:0)", state="CANCELLED")])
    assert view["gpus"][0]["jobs"] == [] and not view["gpus"][0]["whole"]


def test_job_view_counts_down_to_the_limit_and_lists_gpus() -> None:
    job = _job(2, "node2", "gpu:h100:1(IDX:3),shard:h100:2(0/4,0/4,2/4,0/4)")
    view = job_view(job)
    assert view["job_id"] == "2" and view["user"] == "alice" and view["mine"] is False
    # the owner comes from squeue's uid when known, whatever the record says
    owned = job_view(job, {2: 0}, me=0)
    assert owned["user"] == "root" and owned["mine"] is True
    assert job_view(job, {2: 0}, me=1000)["mine"] is False
    assert datetime.fromisoformat(view["ends_at"]) == T0 + timedelta(hours=1)
    assert [(g["node"], g["index"], g["kind"], g["count"]) for g in view["gpus"]] == [
        ("node2", 2, "shard", 2),
        ("node2", 3, "gpu", 1),
    ]
    json.dumps(view)  # JSON-ready
    pending = job_view(Job(job_id=7, name="held", state="PENDING", reason="JobHeldUser", time_limit=1800))
    assert pending["ends_at"] is None and pending["reason"] == "JobHeldUser"


def test_cache_keeps_the_etag_while_the_payload_is_the_same() -> None:
    cache = ResponseCache()
    assert cache.put("nodes", {"nodes": [{"name": "node1"}], "x": 1})
    first = cache.get("nodes")
    assert first is not None
    # same content in another key order: same bytes, same ETag, reported unchanged
    assert not cache.put("nodes", {"x": 1, "nodes": [{"name": "node1"}]})
    again = cache.get("nodes")
    assert again is not None and again.etag == first.etag and again.changed_at == first.changed_at
    assert cache.put("nodes", {"nodes": [{"name": "node2"}], "x": 1})
    changed = cache.get("nodes")
    assert changed is not None and changed.etag != first.etag


@pytest.mark.parametrize(
    ("header", "match"),
    [
        (None, False),
        ("", False),
        ('"abc"', True),
        ('W/"abc"', True),
        ('"x", "abc"', True),
        ("*", True),
        ('"abd"', False),
    ],
)
def test_if_none_match_forms(header: str | None, match: bool) -> None:
    assert etag_matches(header, '"abc"') is match
