"""Issue 29 point 2 in the server: the job this Jupyter server runs in (JupyterHub's batchspawner, Open OnDemand)
is the sidebar's "this session" row, and the server never cancels it.

Recorded Slurm 22.05 output (FakeRunner: job 19 running on node1 with 2 H100). Which job the server runs in is
decided by :func:`slurmlab.slurm.own_job.find_own_job` (tests/unit/slurm/test_own_job.py checks it on recorded
squeue answers and a /proc tree); here it names job 19, or no job."""

from __future__ import annotations

import json
from typing import Any

import pytest
from fake_slurm import JOB, OWNER_UID, cluster, job_in
from tornado.httpclient import HTTPClientError

from slurmlab.slurm.own_job import OwnJob
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
    from slurmlab.slurm import identity

    monkeypatch.setattr(identity, "current_uid", lambda: OWNER_UID)
    cluster(fake_runner)
    job_in(fake_runner, "running")
    return fake_runner


def _server_in(monkeypatch: pytest.MonkeyPatch, found: OwnJob) -> list[int]:
    """The server process runs in what ``found`` says; returns the list that counts the look-ups."""
    from slurmlab.server import session

    looked: list[int] = []

    def find(runner: Any = None) -> OwnJob:
        looked.append(1)
        return found

    monkeypatch.setattr(session, "find_own_job", find)
    return looked


async def _get(jp_fetch: Any, path: str, **params: str) -> Any:
    return json.loads(
        (await jp_fetch("slurmlab", "api", *path.split("/"), params=params or None)).body.decode()
    )


def _details(fake: FakeRunner) -> list[list[str]]:
    return [argv for argv in fake.history if argv[:3] == ["scontrol", "show", "job"] and JOB in argv]


async def test_the_session_route_names_the_server_s_job_with_its_node_gpus_and_end(
    recorded_cluster: FakeRunner, jp_fetch: Any, monkeypatch: pytest.MonkeyPatch
) -> None:
    _server_in(monkeypatch, OwnJob(job_id=JOB, evidence="its cgroup is job 19's"))
    answer = await _get(jp_fetch, "session")
    assert answer["job_id"] == JOB and answer["problem"] is None
    job = answer["job"]
    assert job["job_id"] == JOB and job["state"] == "RUNNING" and job["nodes"] == "node1"
    assert [(g["node"], g["kind"]) for g in job["gpus"]] == [("node1", "gpu"), ("node1", "gpu")]
    assert job["ends_at"] and job["mine"] is True
    assert "never cancels it" in answer["words"] and "server is stopped" in answer["words"]
    assert "as_of" in answer


async def test_the_session_costs_slurm_one_look_not_one_per_poll(
    recorded_cluster: FakeRunner, jp_fetch: Any, monkeypatch: pytest.MonkeyPatch
) -> None:
    looked = _server_in(monkeypatch, OwnJob(job_id=JOB, evidence="test"))
    await _get(jp_fetch, "session")
    details = len(_details(recorded_cluster))
    assert details == 1
    for _ in range(3):  # the sidebar's rounds: status, queue, session each time
        await _get(jp_fetch, "status")
        await _get(jp_fetch, "queue", scope="mine")
        await _get(jp_fetch, "session")
    assert looked == [1]
    assert len(_details(recorded_cluster)) == details


async def test_the_server_never_cancels_the_job_it_runs_in(
    recorded_cluster: FakeRunner, jp_fetch: Any, monkeypatch: pytest.MonkeyPatch
) -> None:
    _server_in(monkeypatch, OwnJob(job_id=JOB, evidence="test"))
    with pytest.raises(HTTPClientError) as refused:
        await jp_fetch("slurmlab", "api", "jobs", JOB, "cancel", method="POST", body="{}")
    assert refused.value.code == 409
    body = json.loads(refused.value.response.body.decode())  # type: ignore[union-attr]
    assert "the job this Jupyter server runs in" in body["message"]
    assert "hub's control panel" in body["message"]
    assert ["scancel", JOB] not in recorded_cluster.history


async def test_a_server_outside_any_job_has_no_session_and_asks_slurm_nothing_for_it(
    recorded_cluster: FakeRunner, jp_fetch: Any, monkeypatch: pytest.MonkeyPatch
) -> None:
    for name in ("SLURM_JOB_ID", "SLURM_JOBID"):
        monkeypatch.delenv(name, raising=False)
    answer = await _get(jp_fetch, "session")
    assert answer["job_id"] is None and answer["job"] is None and answer["problem"] is None
    assert not [argv for argv in recorded_cluster.history if argv[:1] == ["squeue"] and "-j" in argv]
    # and a job of the user is cancelled as before
    code = (await jp_fetch("slurmlab", "api", "jobs", JOB, "cancel", method="POST", body="{}")).code
    assert code == 200 and ["scancel", JOB] in recorded_cluster.history


async def test_a_job_slurm_does_not_confirm_is_no_session_and_says_why(
    recorded_cluster: FakeRunner, jp_fetch: Any, monkeypatch: pytest.MonkeyPatch
) -> None:
    why = (
        f"SLURM_JOB_ID={JOB} is set, but this process is not inside job {JOB} (an environment kept from it?)"
    )
    _server_in(monkeypatch, OwnJob(problem=why))
    answer = await _get(jp_fetch, "session")
    assert answer["job_id"] is None and answer["job"] is None and answer["problem"] == why


async def test_a_job_slurm_could_not_confirm_is_asked_again_after_a_while_not_at_every_request() -> None:
    from slurmlab.server.session import RETRY_AFTER_S, ServerSession

    now = [0.0]
    answers = [OwnJob(problem="Slurm could not say what job 19 is: controller down"), OwnJob(job_id=None)]
    looked: list[int] = []

    def find(runner: Any = None) -> OwnJob:
        looked.append(1)
        return answers[min(len(looked), len(answers)) - 1]

    class _Source:
        runner = None

    session = ServerSession(_Source(), find=find, clock=lambda: now[0])
    assert (await session.answer())["problem"] is not None
    now[0] += RETRY_AFTER_S / 2
    await session.answer()
    assert looked == [1]
    now[0] += RETRY_AFTER_S
    assert (await session.answer())["problem"] is None and looked == [1, 1]
    now[0] += 10 * RETRY_AFTER_S  # a settled answer (no job) is never asked again
    await session.answer()
    assert looked == [1, 1]
