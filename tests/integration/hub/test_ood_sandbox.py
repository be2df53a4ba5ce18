"""The Open OnDemand shape (issue 29 point 1): a batch script that starts ``jupyter lab`` inside the user's job.

Submitted as the user (``runuser``), the job picks its port and token on the node and writes them where only the
user (and the portal, root) can read them; its lab answers on loopback with that token only, and ends with its
job. Needs JupyterLab, not JupyterHub: runs on every Slurm of the matrix.
"""

from __future__ import annotations

import os
import pwd
import shutil
import time
import urllib.error
import urllib.request
from pathlib import Path
from typing import Any

import pytest

from slurmlab.testing.other_user import ensure_user

pytestmark = [
    pytest.mark.sandbox,
    pytest.mark.skipif(os.geteuid() != 0, reason="submits the session as another Unix user (runuser)"),
    pytest.mark.skipif(shutil.which("runuser") is None, reason="needs runuser (util-linux)"),
]

HUB_USER = "slurmlabhub"


def _job(sandbox: Any, job_id: str) -> dict[str, str]:
    out = sandbox.runner().run(["scontrol", "show", "job", "-o", job_id], check=False).stdout
    fields: dict[str, str] = {}
    for word in out.split():
        key, _, value = word.partition("=")
        fields.setdefault(key, value)
    return fields


def _gone(sandbox: Any, job_id: str, timeout: float) -> bool:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        state = sandbox.runner().run(["squeue", "-h", "-j", job_id, "-o", "%T"], check=False).stdout.strip()
        if not state:
            return True
        time.sleep(0.5)
    return False


def test_the_open_ondemand_shape_runs_jupyter_lab_in_the_users_job(slurm_sandbox: Any) -> None:
    from slurmlab.hub import ood

    ensure_user(HUB_USER, home=True)
    session = ood.launch(slurm_sandbox, HUB_USER, gpus=1, runtime="5", partition="gpu")
    try:
        job = _job(slurm_sandbox, session.job_id)
        assert job.get("JobState") == "RUNNING", job
        assert job.get("UserId", "").startswith(f"{HUB_USER}("), job
        assert "gres/gpu=1" in (job.get("AllocTRES") or job.get("TRES", "")), job  # 24.11 on: AllocTRES
        # the lab answers on loopback with the token the job chose, and refuses without it
        req = urllib.request.Request(
            f"http://127.0.0.1:{session.port}/api/me", headers={"Authorization": f"token {session.token}"}
        )
        with urllib.request.urlopen(req, timeout=10) as answer:
            assert answer.status == 200
        with pytest.raises(urllib.error.HTTPError) as refused:
            urllib.request.urlopen(f"http://127.0.0.1:{session.port}/api/me", timeout=10)
        assert refused.value.code == 403
        # the connection file is the user's alone
        connection = Path(session.folder) / "connection.json"
        assert connection.stat().st_mode & 0o077 == 0
        assert connection.stat().st_uid == pwd.getpwnam(HUB_USER).pw_uid
    finally:
        ood.stop(slurm_sandbox, session)
    assert _gone(slurm_sandbox, session.job_id, timeout=5)
