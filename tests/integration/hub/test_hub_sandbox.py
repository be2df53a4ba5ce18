"""A real JupyterHub on the sandbox (issue 29 point 1), driven through its REST API with a service token.

JupyterHub, configurable-http-proxy and batchspawner as a site runs them: the hub (root) submits the user's
server as the user's own Slurm job (``runuser``), the server answers through the proxy, and stopping it (or the
hub) ends the job; ``down`` leaves no process, port or job. Runs on every Slurm of the matrix (no browser).
"""

from __future__ import annotations

import os
import pwd
import shutil
import time
from collections.abc import Iterator
from importlib.util import find_spec
from pathlib import Path
from typing import Any

import pytest

from slurmlab.sandbox import processes
from slurmlab.sandbox.ports import is_listening
from slurmlab.testing.other_user import ensure_user

pytestmark = [
    pytest.mark.sandbox,
    pytest.mark.skipif(
        os.geteuid() != 0, reason="the hub runs as root to submit each user's job as that user"
    ),
    pytest.mark.skipif(shutil.which("runuser") is None, reason="needs runuser (util-linux)"),
    pytest.mark.skipif(
        find_spec("jupyterhub") is None or find_spec("batchspawner") is None,
        reason="pip install 'slurmlab[hub]' (make setup installs it)",
    ),
]

HUB_USER = "slurmlabhub"


def _proxy_or_skip() -> None:
    from slurmlab.errors import SlurmlabError
    from slurmlab.hub.control import find_proxy

    try:
        find_proxy()
    except SlurmlabError as exc:
        pytest.skip(str(exc))


@pytest.fixture(scope="module")
def hub(slurm_sandbox: Any, tmp_path_factory: pytest.TempPathFactory) -> Iterator[Any]:
    from slurmlab.hub import Hub

    _proxy_or_skip()
    ensure_user(HUB_USER, home=True)
    folder = tmp_path_factory.mktemp("hub") / "hub"
    started = Hub.up(slurm_sandbox, folder, users=[HUB_USER])
    try:
        yield started
    finally:
        started.down()


def _job(sandbox: Any, job_id: str) -> dict[str, str]:
    out = sandbox.runner().run(["scontrol", "show", "job", "-o", job_id], check=False).stdout
    fields: dict[str, str] = {}
    for word in out.split():
        key, _, value = word.partition("=")
        fields.setdefault(key, value)
    return fields


def _gone(sandbox: Any, job_id: str, timeout: float = 40.0) -> bool:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        state = sandbox.runner().run(["squeue", "-h", "-j", job_id, "-o", "%T"], check=False).stdout.strip()
        if not state:
            return True
        time.sleep(0.5)
    return False


def test_the_hub_spawns_a_gpu_server_as_the_users_own_slurm_job(hub: Any, slurm_sandbox: Any) -> None:
    job_id = hub.start_server(HUB_USER, ngpus=2, runtime="10", partition="gpu")
    assert job_id.isdigit(), job_id
    job = _job(slurm_sandbox, job_id)
    assert job.get("JobState") == "RUNNING", job
    assert job.get("JobName") == "slurmlab-hub", job
    # the user's job, not root's: batchspawner submitted it through runuser
    assert job.get("UserId", "").startswith(f"{HUB_USER}("), job
    assert f"({pwd.getpwnam(HUB_USER).pw_uid})" in job["UserId"], job
    assert "gres/gpu=2" in (job.get("AllocTRES") or job.get("TRES", "")), job  # 24.11 on: AllocTRES
    assert job.get("Partition") == "gpu", job

    # the server answers through the hub's proxy, and runs as the user, in the user's home
    status = hub.request("GET", f"/user/{HUB_USER}/api/status")
    assert "started" in status, status
    probe = Path(pwd.getpwnam(HUB_USER).pw_dir) / "hub-probe.txt"
    probe.unlink(missing_ok=True)
    body = {"type": "file", "format": "text", "content": "written by the server"}
    hub.request("PUT", f"/user/{HUB_USER}/api/contents/hub-probe.txt", body)
    assert probe.stat().st_uid == pwd.getpwnam(HUB_USER).pw_uid
    probe.unlink()

    # stopping the server from the hub ends its job
    hub.stop_server(HUB_USER)
    assert _gone(slurm_sandbox, job_id), f"job {job_id} still in the queue after the hub stopped the server"
    assert hub.jobs() == []


def test_a_form_value_that_is_not_slurms_is_refused_before_any_job(hub: Any, slurm_sandbox: Any) -> None:
    from slurmlab.errors import SlurmlabError

    before = hub.jobs()
    # the REST API's options skip the form: the spawner checks them before anything reaches sbatch
    with pytest.raises(SlurmlabError):
        hub.start_server(
            HUB_USER, ngpus=1, runtime="10\n#SBATCH --nodelist=node9", partition="gpu", timeout=30
        )
    assert hub.jobs() == before == []


def test_down_leaves_no_process_port_or_job(slurm_sandbox: Any, tmp_path: Path) -> None:
    from slurmlab.hub import Hub

    _proxy_or_skip()
    ensure_user(HUB_USER, home=True)
    started = Hub.up(slurm_sandbox, tmp_path / "hub", users=[HUB_USER])
    job_id = started.start_server(HUB_USER, ngpus=1, runtime="5", partition="gpu")
    proxy_pid = int((tmp_path / "hub" / "proxy.pid").read_text().strip())
    ports = [started.settings[k] for k in ("port", "hub_port", "proxy_api_port")]
    assert all(is_listening(p) for p in ports)

    started.down()  # with the server still running: the hub's own stop ends its job

    assert not processes.alive(started.pid)
    assert not processes.alive(proxy_pid)
    assert not any(is_listening(p) for p in ports)
    assert _gone(slurm_sandbox, job_id, timeout=5), f"job {job_id} outlived the hub"
    assert started.jobs() == []
