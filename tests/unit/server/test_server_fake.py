"""The REST routes of the server extension on recorded Slurm 22.05 output (FakeRunner as the process-wide
runner). The sandbox twins are in tests/integration/server; these need no Slurm."""

from __future__ import annotations

import json
from typing import Any

import pytest
from fake_slurm import JOB, OWNER_UID, UNKNOWN_JOB, cluster, controller_down, job_in
from tornado.httpclient import HTTPClientError

from slurmlab.testing import FakeRunner

POLL = 0.2


@pytest.fixture
def jp_server_config() -> dict[str, Any]:
    from traitlets.config import Config

    return Config(
        {
            "ServerApp": {
                "jpserver_extensions": {"slurmlab.server": True},
                "tornado_settings": {"slurmlab_poll_interval": POLL, "slurmlab_cluster_poll_interval": POLL},
            }
        }
    )


@pytest.fixture
def recorded_cluster(fake_runner: FakeRunner, monkeypatch: pytest.MonkeyPatch) -> FakeRunner:
    """The recorded cluster, seen by the uid that recorded it (root: its jobs are this server's)."""
    from slurmlab.slurm import identity

    monkeypatch.setattr(identity, "current_uid", lambda: OWNER_UID)
    return cluster(fake_runner)


async def _get(jp_fetch: Any, path: str, **params: str) -> Any:
    return json.loads(
        (await jp_fetch("slurmlab", "api", *path.split("/"), params=params or None)).body.decode()
    )


async def _code(jp_fetch: Any, *parts: str, **kw: Any) -> tuple[int, Any]:
    try:
        res = await jp_fetch(*parts, **kw)
    except HTTPClientError as exc:
        body = exc.response.body.decode() if exc.response is not None and exc.response.body else "{}"
        return int(exc.code), json.loads(body or "{}")
    return int(res.code), json.loads(res.body.decode() or "{}")


async def test_status_nodes_and_queue_come_from_the_recorded_cluster(
    recorded_cluster: FakeRunner, jp_fetch: Any
) -> None:
    status = await _get(jp_fetch, "status")
    assert status["reachable"] is True and status["version"] == "22.05.8"
    nodes = (await _get(jp_fetch, "nodes"))["nodes"]
    assert [n["name"] for n in nodes] == ["node1", "node2"]
    assert all(len(n["gpus"]) == 8 for n in nodes)
    jobs = {j["name"]: j for j in (await _get(jp_fetch, "queue", scope="all"))["jobs"]}
    assert len([g for g in jobs["gpus2"]["gpus"] if g["kind"] == "gpu"]) == 2
    assert {"gpus2", "gpn2", "shard4"} <= set(jobs)
    assert not recorded_cluster.unscripted


async def test_job_detail_and_cancel_of_my_running_job(recorded_cluster: FakeRunner, jp_fetch: Any) -> None:
    job_in(recorded_cluster, "running")
    detail = await _get(jp_fetch, f"jobs/{JOB}")
    assert detail["job_id"] == JOB and detail["state"] == "RUNNING"
    code, answer = await _code(jp_fetch, "slurmlab", "api", "jobs", JOB, "cancel", method="POST", body="{}")
    assert code == 200 and answer["cancelled"] is True
    assert ["scancel", JOB] in recorded_cluster.history


async def test_cancel_of_an_ended_job_is_a_conflict(recorded_cluster: FakeRunner, jp_fetch: Any) -> None:
    job_in(recorded_cluster, "cancelled")
    code, answer = await _code(jp_fetch, "slurmlab", "api", "jobs", JOB, "cancel", method="POST", body="{}")
    assert code == 409 and "CANCELLED" in answer["message"]
    assert ["scancel", JOB] not in recorded_cluster.history


async def test_an_unknown_job_is_404_and_a_bad_id_400(recorded_cluster: FakeRunner, jp_fetch: Any) -> None:
    recorded_cluster.replay("22.05/l17_scontrol_show_job_d_unknown_job.txt")
    code, answer = await _code(jp_fetch, "slurmlab", "api", "jobs", UNKNOWN_JOB)
    assert code == 404 and "Invalid job id specified" in answer["message"]
    code, _ = await _code(jp_fetch, "slurmlab", "api", "jobs", "-v")
    assert code == 400


async def test_a_stopped_controller_is_503_with_slurms_message(
    recorded_cluster: FakeRunner, jp_fetch: Any
) -> None:
    controller_down(recorded_cluster)
    code, answer = await _code(jp_fetch, "slurmlab", "api", "queue")
    assert code == 503 and "Unable to contact slurm controller" in answer["message"]
    status = await _get(jp_fetch, "status")
    assert status["reachable"] is False and "Unable to contact slurm controller" in status["error"]
