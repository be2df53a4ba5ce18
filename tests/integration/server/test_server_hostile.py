"""The server's routes against a second Unix user's jobs whose names forge fields (issue 10, point 1),
job ids that are not job ids (points 3, 4), and stale data (point 7)."""

from __future__ import annotations

import json
import os
from typing import Any

import pytest
from server_jobs import ensure_other_user, scancel, squeue_state, submit
from tornado.httpclient import HTTPClientError

pytestmark = [
    pytest.mark.sandbox,
    pytest.mark.skipif(os.geteuid() != 0, reason="needs root to submit as a second Unix user"),
]

POLL = 1.0
NAMES = [
    "y UserId=root(0)",
    "g\n     Nodes=node1 CPU_IDs=0-3 Mem=0 GRES=gpu:h100:8(IDX:0-7)",
    "n NodeList=n[1-1000]x[1-1001] Nodes=n[1-1000]x[1-1001] CPU_IDs=0 Mem=0",
]


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


def _json(response: Any) -> Any:
    return json.loads(response.body.decode())


async def _code(jp_fetch: Any, *parts: str, **kw: Any) -> int:
    try:
        return int((await jp_fetch("slurmlab", "api", *parts, **kw)).code)
    except HTTPClientError as exc:
        return int(exc.code)


async def test_forged_names_change_no_owner_gpu_or_answer(slurm_sandbox: Any, jp_fetch: Any) -> None:
    other = ensure_other_user()
    ids = [submit(slurm_sandbox, "-n1", name=n, user=other) for n in NAMES]
    try:
        everyone = _json(await jp_fetch("slurmlab", "api", "queue", params={"scope": "all"}))
        listed = {j["job_id"]: j for j in everyone["jobs"]}
        reported = {p["record"] for p in everyone["problems"]}
        for jid in ids:
            assert jid in listed or jid in reported
            if jid in listed:
                assert listed[jid]["user"] == other and listed[jid]["mine"] is False
                assert listed[jid]["gpus"] == []
        assert "as_of" in everyone and everyone["age_s"] >= 0
        mine = _json(await jp_fetch("slurmlab", "api", "queue", params={"scope": "mine"}))
        assert not {j["job_id"] for j in mine["jobs"]} & set(ids)
        nodes = _json(await jp_fetch("slurmlab", "api", "nodes"))["nodes"]
        holders = {job for n in nodes for g in n["gpus"] for job in g["jobs"]}
        assert not holders & set(ids), "a GPU-less job was painted over GPUs"
        for jid in ids:
            assert await _code(jp_fetch, "jobs", jid, "cancel", method="POST", body="{}") == 403
        assert {squeue_state(slurm_sandbox, j) for j in ids} == {"RUNNING"}
    finally:
        for jid in ids:
            scancel(slurm_sandbox, jid)


async def test_ids_that_are_not_job_ids_are_refused_before_slurm(slurm_sandbox: Any, jp_fetch: Any) -> None:
    for bad in ("0", "00", "-v", "1%0A", "1%20", "1_", "_1", "99999999999"):
        assert await _code(jp_fetch, "jobs", bad) == 400, bad
        assert await _code(jp_fetch, "jobs", bad, "cancel", method="POST", body="{}") == 400, bad
    # an id Slurm does not know is not found — never another job's record
    assert await _code(jp_fetch, "jobs", "987654") == 404


async def test_stale_data_is_refreshed_before_it_is_served(
    slurm_sandbox: Any, jp_fetch: Any, jp_serverapp: Any
) -> None:
    import time

    await jp_fetch("slurmlab", "api", "queue", params={"scope": "mine"})
    poller = jp_serverapp.web_app.settings["slurmlab_poller"]
    job = submit(slurm_sandbox, "-n1", name="stale-check")
    try:
        # as after an idle pause: the timer stopped and the last poll is long past
        poller.stop()
        poller.last_poll = time.monotonic() - 1000
        answer = _json(await jp_fetch("slurmlab", "api", "queue", params={"scope": "mine"}))
        assert job in {j["job_id"] for j in answer["jobs"]}, "served the snapshot from before the job"
        assert answer["age_s"] < 5 * POLL
    finally:
        scancel(slurm_sandbox, job)
