"""The REST routes of the server extension against the real Slurm sandbox."""

from __future__ import annotations

import json
import os
import re
import signal
from http.cookies import SimpleCookie
from typing import Any

import pytest
from server_jobs import ensure_other_user, scancel, squeue_state, submit, wait_for
from tornado.httpclient import HTTPClientError

from slurmlab.server.data import current_user

pytestmark = pytest.mark.sandbox

POLL = 1.0


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
def sandbox(slurm_sandbox: Any) -> Any:
    return slurm_sandbox


def _json(response: Any) -> Any:
    return json.loads(response.body.decode())


async def _get(jp_fetch: Any, path: str, **params: str) -> Any:
    return _json(await jp_fetch("slurmlab", "api", path, params=params or None))


async def _status_of(fetch: Any, *parts: str, **kw: Any) -> int:
    try:
        return int((await fetch(*parts, **kw)).code)
    except HTTPClientError as exc:
        return int(exc.code)


async def test_status_says_reachable_with_version_and_interval(sandbox: Any, jp_fetch: Any) -> None:
    status = await _get(jp_fetch, "status")
    assert status["reachable"] is True and status["error"] is None
    major, minor = sandbox.version
    assert re.fullmatch(rf"{major}\.{minor:02d}\.\d+", status["version"]), status["version"]
    assert status["poll_interval_s"] == POLL
    assert status["user"] == current_user()
    # it names the cluster it shows: the sandbox's ClusterName and profile
    assert status["cluster"]["sandbox"] == sandbox.profile_name and status["cluster"]["own"] is True
    assert status["cluster"]["label"] == f"sandbox {sandbox.profile_name}"
    clusters = await _get(jp_fetch, "clusters")
    assert status["cluster"]["id"] in [c["id"] for c in clusters["clusters"]]
    assert clusters["default"] == status["cluster"]["id"]


async def test_nodes_show_every_gpu_of_the_profile(sandbox: Any, jp_fetch: Any) -> None:
    nodes = (await _get(jp_fetch, "nodes"))["nodes"]
    profile = sandbox.profile
    assert [n["name"] for n in nodes] == sorted(sandbox.nodes)
    for node in nodes:
        assert len(node["gpus"]) == len(profile.gpus), node
        assert [g["index"] for g in node["gpus"]] == list(range(len(profile.gpus)))
        for gpu in node["gpus"]:
            if not gpu["mig"] and profile.shards_per_gpu:
                assert gpu["shards_total"] == profile.shards_per_gpu


async def test_a_submitted_job_appears_with_its_gpus_and_detail(sandbox: Any, jp_fetch: Any) -> None:
    job = submit(sandbox, "-N1", "--gpus=2", name="srv-gpus2")
    try:

        async def mine_has_it() -> Any:
            queue = await _get(jp_fetch, "queue", scope="mine")
            return next((j for j in queue["jobs"] if j["job_id"] == job and j["state"] == "RUNNING"), None)

        seen = await wait_for(mine_has_it, 10 * POLL + 10, f"job {job} RUNNING in queue?scope=mine")
        assert seen["user"] == current_user() and seen["name"] == "srv-gpus2"
        gpus = [g for g in seen["gpus"] if g["kind"] == "gpu"]
        assert len(gpus) == 2 and len({g["node"] for g in gpus}) == 1
        assert seen["ends_at"] is not None and seen["time_limit_s"] == 600

        all_jobs = (await _get(jp_fetch, "queue", scope="all"))["jobs"]
        assert job in {j["job_id"] for j in all_jobs}

        nodes = {n["name"]: n for n in (await _get(jp_fetch, "nodes"))["nodes"]}
        held = [g["index"] for g in nodes[gpus[0]["node"]]["gpus"] if job in g["jobs"]]
        assert sorted(held) == sorted(g["index"] for g in gpus)

        first = await jp_fetch("slurmlab", "api", "jobs", job)
        detail = _json(first)
        assert detail["job_id"] == job and detail["user"] == current_user()
        assert detail["detail"]["name"] == "srv-gpus2"
        with pytest.raises(HTTPClientError) as unchanged:
            await jp_fetch("slurmlab", "api", "jobs", job, headers={"If-None-Match": first.headers["ETag"]})
        assert unchanged.value.code == 304
    finally:
        scancel(sandbox, job)


async def test_a_repeated_request_gets_304(sandbox: Any, jp_fetch: Any) -> None:
    for path in ("status", "nodes", "queue"):
        first = await jp_fetch("slurmlab", "api", path)
        etag = first.headers["ETag"]
        assert etag
        # The cluster may change between two requests (other tests' jobs end): retry a few times.
        codes = []
        for _ in range(5):
            try:
                again = await jp_fetch("slurmlab", "api", path, headers={"If-None-Match": etag})
                codes.append(again.code)
                etag = again.headers["ETag"]
            except HTTPClientError as exc:
                codes.append(exc.code)
                if exc.code == 304:
                    break
        assert 304 in codes, (path, codes)


async def test_requests_without_the_token_are_refused(
    sandbox: Any, http_server_client: Any, jp_base_url: str
) -> None:
    for method, path in (
        ("GET", "clusters"),
        ("GET", "status"),
        ("GET", "nodes"),
        ("GET", "queue"),
        ("GET", "nodes?cluster=default"),
        ("POST", "jobs/1/cancel"),
        ("POST", "jobs/1/cancel?cluster=default"),
        ("POST", "jobs/1/hold"),
        ("POST", "jobs/1/release"),
    ):
        res = await http_server_client.fetch(
            f"{jp_base_url}slurmlab/api/{path}",
            method=method,
            body="{}" if method == "POST" else None,
            raise_error=False,
        )
        assert res.code in (401, 403), (method, path, res.code)


async def test_cancel_needs_the_xsrf_token_with_a_cookie(
    sandbox: Any, jp_fetch: Any, http_server_client: Any, jp_base_url: str
) -> None:
    job = submit(sandbox, "--gpus=1", name="srv-xsrf")
    try:
        # A token-authenticated request logs the client in with a cookie, as the browser is.
        login = await jp_fetch("slurmlab", "api", "status")
        cookies = SimpleCookie()
        for header in login.headers.get_list("Set-Cookie"):
            cookies.load(header)
        assert cookies, "the server set no login cookie"
        cookie = "; ".join(f"{k}={m.value}" for k, m in cookies.items())
        url = f"{jp_base_url}slurmlab/api/jobs/{job}/cancel"

        refused = await http_server_client.fetch(
            url, method="POST", body="{}", raise_error=False, headers={"Cookie": cookie}
        )
        assert refused.code == 403
        assert squeue_state(sandbox, job) in ("RUNNING", "PENDING")

        xsrf = "slurmlabtestxsrf"
        ok = await http_server_client.fetch(
            url,
            method="POST",
            body="{}",
            raise_error=False,
            headers={"Cookie": f"{cookie}; _xsrf={xsrf}", "X-XSRFToken": xsrf},
        )
        assert ok.code == 200, ok.body
        assert _json(ok)["cancelled"] is True
        await wait_for(
            _async(lambda: squeue_state(sandbox, job) in (None, "CANCELLED", "COMPLETING")),
            15,
            f"job {job} gone from squeue",
        )
    finally:
        scancel(sandbox, job)


async def _wait_running(sandbox: Any, job: str) -> None:
    states: list[str | None] = []

    def running() -> bool:
        states.append(squeue_state(sandbox, job))
        return states[-1] == "RUNNING"

    try:
        await wait_for(_async(running), 30, f"job {job} running")
    except AssertionError as exc:
        raise AssertionError(f"{exc}; states seen: {sorted(set(map(str, states)))}") from None


def _async(fn: Any) -> Any:
    async def call() -> Any:
        return fn()

    return call


async def test_cancelling_another_users_job_is_forbidden(sandbox: Any, jp_fetch: Any) -> None:
    other = ensure_other_user()
    job = submit(sandbox, "--gpus=1", name="srv-other", user=other)
    try:
        await _wait_running(sandbox, job)
        with pytest.raises(HTTPClientError) as info:
            await jp_fetch("slurmlab", "api", "jobs", job, "cancel", method="POST", body="{}")
        assert info.value.code == 403
        message = _json(info.value.response)["message"]
        assert other in message and current_user() in message
        assert squeue_state(sandbox, job) == "RUNNING"
        mine = (await _get(jp_fetch, "queue", scope="mine"))["jobs"]
        assert job not in {j["job_id"] for j in mine}
    finally:
        scancel(sandbox, job)


def _reason(sandbox: Any, job: str) -> str:
    return sandbox.runner().run(["squeue", "-h", "-j", job, "-o", "%r"], check=False).stdout.strip()


async def test_hold_and_release_act_on_my_pending_job_only(sandbox: Any, jp_fetch: Any) -> None:
    """The queue view's Hold / Release (issue 28): scontrol uhold/release of my pending job; another user's job,
    a running one, and an unknown id are refused with a clear message, and Slurm is not asked to act."""
    mine = sandbox.runner().run(
        [
            "sbatch",
            "--parsable",
            "-J",
            "srv-hold",
            "-t",
            "10",
            "--gpus=1",
            "--begin=now+3600",
            "-o",
            "/dev/null",
        ]
        + ["--wrap", "sleep 300"]
    )
    job = mine.stdout.strip().split(";")[0]
    other = ensure_other_user()
    theirs = submit(sandbox, "--gpus=1", name="srv-hold-other", user=other)
    running = submit(sandbox, "--gpus=1", name="srv-hold-running")
    try:
        held = _json(await jp_fetch("slurmlab", "api", "jobs", job, "hold", method="POST", body="{}"))
        assert held == {"job_id": job, "action": "hold", "done": True, "user": current_user()}
        # the owner's own hold (uhold), which Release lifts, even where the server's user is an operator
        assert _reason(sandbox, job) == "JobHeldUser"
        await jp_fetch("slurmlab", "api", "jobs", job, "release", method="POST", body="{}")
        assert _reason(sandbox, job) != "JobHeldUser"
        await _wait_running(sandbox, theirs)
        for target, code, words in (
            (theirs, 403, other),
            (running, 409, "only a pending job"),
            ("987654", 404, ""),
        ):
            with pytest.raises(HTTPClientError) as info:
                await jp_fetch("slurmlab", "api", "jobs", target, "hold", method="POST", body="{}")
            assert info.value.code == code, (target, info.value.code)
            assert words in _json(info.value.response)["message"]
        assert squeue_state(sandbox, theirs) == "RUNNING" and _reason(sandbox, theirs) != "JobHeldUser"
    finally:
        for j in (job, theirs, running):
            scancel(sandbox, j)


async def test_bad_requests_get_clear_errors(sandbox: Any, jp_fetch: Any) -> None:
    cases = [
        (("queue",), {"params": {"scope": "everyone"}}, 400),
        (("jobs", "abc"), {}, 400),
        (("jobs", "987654"), {}, 404),
        (("jobs", "987654", "cancel"), {"method": "POST", "body": "{}"}, 404),
    ]
    for parts, kw, code in cases:
        with pytest.raises(HTTPClientError) as info:
            await jp_fetch("slurmlab", "api", *parts, **kw)
        assert info.value.code == code, (parts, info.value.code)
        assert _json(info.value.response)["message"], parts


async def test_a_stopped_controller_gives_503_then_recovers(sandbox: Any, jp_fetch: Any) -> None:
    assert (await jp_fetch("slurmlab", "api", "nodes")).code == 200
    pid = sandbox.pids["slurmctld"]
    os.kill(pid, signal.SIGSTOP)
    try:

        async def unavailable() -> Any:
            try:
                await jp_fetch("slurmlab", "api", "nodes")
            except HTTPClientError as exc:
                if exc.code == 503:
                    return _json(exc.response)
                raise
            return None

        body = await wait_for(unavailable, 90, "503 while slurmctld is stopped", step=1)
        assert "controller" in body["message"].lower() or "timed out" in body["message"].lower(), body
        status = await _get(jp_fetch, "status")
        assert status["reachable"] is False and status["error"]
    finally:
        os.kill(pid, signal.SIGCONT)

    async def back() -> bool:
        return await _status_of(jp_fetch, "slurmlab", "api", "nodes") == 200

    await wait_for(back, 90, "recovery after SIGCONT", step=1)
    assert (await _get(jp_fetch, "status"))["reachable"] is True


async def test_shards_show_as_a_fraction_of_one_gpu(sandbox: Any, jp_fetch: Any) -> None:
    per_gpu = sandbox.profile.shards_per_gpu
    if not per_gpu:
        pytest.skip(f"profile {sandbox.profile_name} has no shards")
    job = submit(sandbox, "-N1", "--gres=shard:2", name="srv-shard")
    try:

        async def shard_gpu() -> Any:
            for node in (await _get(jp_fetch, "nodes"))["nodes"]:
                for gpu in node["gpus"]:
                    if job in gpu["jobs"]:
                        return node["name"], gpu
            return None

        node, gpu = await wait_for(shard_gpu, 10 * POLL + 10, f"shard job {job} on a GPU of the map")
        assert (gpu["shards_used"], gpu["shards_total"], gpu["whole"]) == (2, per_gpu, False)
        view = await _get(jp_fetch, f"jobs/{job}")
        assert [(g["node"], g["index"], g["kind"], g["count"]) for g in view["gpus"]] == [
            (node, gpu["index"], "shard", 2)
        ]
    finally:
        scancel(sandbox, job)


async def test_one_poll_serves_many_clients(sandbox: Any, jp_fetch: Any, jp_serverapp: Any) -> None:
    import asyncio

    poller = jp_serverapp.web_app.settings["slurmlab_poller"]
    assert poller.polls == 0  # nothing asks Slurm before a client does
    answers = await asyncio.gather(
        *[jp_fetch("slurmlab", "api", "nodes") for _ in range(8)],
        *[jp_fetch("slurmlab", "api", "queue") for _ in range(8)],
    )
    assert all(a.code == 200 for a in answers)
    assert len({a.headers["ETag"] for a in answers[:8]}) == 1
    # 16 answers from the one cache: the first poll, plus at most a timer tick meanwhile
    assert 1 <= poller.polls <= 2, poller.polls


async def test_a_held_job_shows_its_gpus_once_released_and_goes_once_cancelled(
    sandbox: Any, jp_fetch: Any
) -> None:
    """Later polls ask Slurm only for the brief queue: a job the server already knows must still get its
    GPUs when it starts (its detail asked for again) and leave the list when it ends."""
    res = sandbox.runner().run(
        [
            "sbatch",
            "--parsable",
            "-H",
            "-J",
            "srv-held",
            "-t",
            "10",
            "-N1",
            "--gpus=1",
            "-o",
            "/dev/null",
            "--wrap",
            "sleep 300",
        ]
    )
    job = res.stdout.strip().split(";")[0]
    try:

        async def listed(state: str) -> Any:
            queue = await _get(jp_fetch, "queue", scope="all")
            return next((j for j in queue["jobs"] if j["job_id"] == job and j["state"] == state), None)

        pending = await wait_for(lambda: listed("PENDING"), 10 * POLL + 10, f"job {job} PENDING")
        assert pending["gpus"] == [] and pending["name"] == "srv-held"
        sandbox.runner().run(["scontrol", "release", job])
        running = await wait_for(
            lambda: listed("RUNNING"), 10 * POLL + 20, f"job {job} RUNNING after release"
        )
        assert [g["kind"] for g in running["gpus"]] == ["gpu"] and running["name"] == "srv-held"
        nodes = {n["name"]: n for n in (await _get(jp_fetch, "nodes"))["nodes"]}
        assert any(job in g["jobs"] for g in nodes[running["gpus"][0]["node"]]["gpus"])
    finally:
        scancel(sandbox, job)

    async def gone() -> bool:
        queue = await _get(jp_fetch, "queue", scope="all")
        return job not in {j["job_id"] for j in queue["jobs"] if j["state"] not in ("COMPLETING",)}

    await wait_for(gone, 10 * POLL + 20, f"job {job} gone from the queue after scancel")
