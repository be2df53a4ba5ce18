"""The routes on two clusters at once: the server's own (recorded Slurm 22.05) and a running sandbox of this
user (recorded 24.11), chosen per request with ``cluster=``; pending jobs in plain words. No Slurm needed."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest
from cluster_files import make_sandbox
from fake_slurm import OWNER_UID, cluster, my_queue, node_brief
from tornado.httpclient import HTTPClientError

from slurmlab.core.slurm.reasons import explain_reason
from slurmlab.server import hub
from slurmlab.testing import FakeRunner

POLL = 0.2
ROUTES = ("status", "nodes", "queue", "jobs/19")


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
def two_clusters(
    fake_runner: FakeRunner, base: Path, slurmctld: int, monkeypatch: pytest.MonkeyPatch
) -> FakeRunner:
    """The recorded 22.05 cluster as the server's own, and a running h200-mig sandbox answering as the
    recorded 24.11 one; the sandbox's runner, which the test returns."""
    from slurmlab.slurm import identity

    monkeypatch.setattr(identity, "current_uid", lambda: OWNER_UID)
    cluster(fake_runner)
    make_sandbox(base, "h200-mig", slurmctld, cluster="mig-lab")
    other = FakeRunner()
    other.replay_cluster("24.11")
    node_brief(other, "24.11")
    my_queue(other, "24.11")
    asked: list[str] = []

    def runner_for(view: Any) -> Any:
        asked.append(view["id"])
        return None if view["own"] else other

    monkeypatch.setattr(hub, "runner_for", runner_for)
    other.asked = asked  # type: ignore[attr-defined]
    return other


async def _get(jp_fetch: Any, path: str, **params: str) -> Any:
    return json.loads(
        (await jp_fetch("slurmlab", "api", *path.split("/"), params=params or None)).body.decode()
    )


async def _error(jp_fetch: Any, path: str, **kw: Any) -> tuple[int, Any]:
    with pytest.raises(HTTPClientError) as info:
        await jp_fetch("slurmlab", "api", *path.split("/"), **kw)
    assert info.value.response is not None
    return int(info.value.code), json.loads(info.value.response.body.decode())


async def test_the_clusters_route_lists_the_own_cluster_and_the_sandbox(
    two_clusters: FakeRunner, jp_fetch: Any
) -> None:
    answer = await _get(jp_fetch, "clusters")
    assert answer["default"] == "default"
    ids = [c["id"] for c in answer["clusters"]]
    assert ids == ["default", "sandbox-h200-mig"]
    sandbox = answer["clusters"][1]
    assert (sandbox["label"], sandbox["sandbox"], sandbox["own"]) == (
        "mig-lab · sandbox h200-mig",
        "h200-mig",
        False,
    )


async def test_each_route_shows_the_cluster_it_is_asked_for(two_clusters: FakeRunner, jp_fetch: Any) -> None:
    own = await _get(jp_fetch, "status")
    picked = await _get(jp_fetch, "status", cluster="sandbox-h200-mig")
    assert own["version"] == "22.05.8" and own["cluster"]["own"] is True
    assert picked["version"].startswith("24.11.") and picked["cluster"]["id"] == "sandbox-h200-mig"
    assert picked["cluster"]["label"] == "mig-lab · sandbox h200-mig"
    own_jobs = {j["job_id"] for j in (await _get(jp_fetch, "queue", scope="all"))["jobs"]}
    sandbox_jobs = {
        j["job_id"] for j in (await _get(jp_fetch, "queue", scope="all", cluster="sandbox-h200-mig"))["jobs"]
    }
    assert own_jobs and sandbox_jobs
    assert any(cmd[0] == "squeue" for cmd in two_clusters.history), "the sandbox's runner was never asked"
    # the same id asked again is the same poller: one runner made per cluster
    await _get(jp_fetch, "nodes", cluster="sandbox-h200-mig")
    assert two_clusters.asked.count("sandbox-h200-mig") == 1  # type: ignore[attr-defined]


async def test_an_unknown_cluster_is_a_400_naming_the_known_ones(
    two_clusters: FakeRunner, jp_fetch: Any
) -> None:
    for path in ROUTES:
        code, body = await _error(jp_fetch, path, params={"cluster": "sandbox-dgx-h100"})
        assert code == 400, path
        assert "unknown cluster 'sandbox-dgx-h100'" in body["message"], (path, body)
        assert "sandbox-h200-mig (mig-lab · sandbox h200-mig)" in body["message"], (path, body)
        assert body["reason"] == "Unknown cluster"
    code, body = await _error(
        jp_fetch, "jobs/19/cancel", method="POST", body="{}", params={"cluster": "nope"}
    )
    assert code == 400 and "unknown cluster 'nope'" in body["message"]
    assert ["scancel", "19"] not in two_clusters.history


async def test_pending_jobs_come_with_their_reason_in_words(two_clusters: FakeRunner, jp_fetch: Any) -> None:
    jobs = (await _get(jp_fetch, "queue", scope="all"))["jobs"]
    pending = [j for j in jobs if j["state"] == "PENDING"]
    assert pending, [(j["job_id"], j["state"]) for j in jobs]
    for job in pending:
        explained = explain_reason(job["reason"])
        assert explained is not None and job["reason_words"] == explained.words, job
        assert job["reason_hint"] == (explained.hint or None)
        assert job["submit_time"], job
    held = [j for j in pending if j["reason"] == "JobHeldUser"]
    assert held and held[0]["reason_hint"] and "scontrol release" in held[0]["reason_hint"]
    running = [j for j in jobs if j["state"] == "RUNNING"]
    assert running and all(j["reason_words"] is None and j["expected_start"] is None for j in running)


async def test_every_route_needs_the_token(
    two_clusters: FakeRunner, http_server_client: Any, jp_base_url: str
) -> None:
    for method, path in (
        ("GET", "clusters"),
        ("GET", "status?cluster=sandbox-h200-mig"),
        ("GET", "nodes?cluster=default"),
        ("GET", "queue?cluster=sandbox-h200-mig"),
        ("GET", "jobs/19?cluster=sandbox-h200-mig"),
        ("POST", "jobs/19/cancel?cluster=sandbox-h200-mig"),
    ):
        res = await http_server_client.fetch(
            f"{jp_base_url}slurmlab/api/{path}",
            method=method,
            body="{}" if method == "POST" else None,
            raise_error=False,
        )
        assert res.code in (401, 403), (method, path, res.code)
    assert not any(cmd[0] == "scancel" for cmd in two_clusters.history)
