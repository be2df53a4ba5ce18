"""Helpers of the provisioner's sandbox tests: a kernel spec in the test's JUPYTER_PATH, a job's state."""

from __future__ import annotations

import json
import time
from typing import Any


def install_spec(home: dict[str, Any], name: str, **request: object) -> str:
    """A kernel spec of the provisioner in the test's JUPYTER_PATH."""
    from slurmlab.provisioner import kernel_spec, request_from_config

    folder = home["share"] / "kernels" / name
    folder.mkdir(parents=True)
    spec = kernel_spec(request_from_config(request))
    (folder / "kernel.json").write_text(json.dumps(spec))
    return name


def squeue_state(runner: Any, job_id: str) -> str:
    """The job's state as squeue says it ("" once squeue no longer lists it)."""
    return str(runner.run(["squeue", "-h", "-j", job_id, "-o", "%T"], check=False).stdout).strip()


def wait_job_gone(runner: Any, job_id: str, timeout: float = 60.0) -> str:
    """Wait until the job is neither pending nor running; its last state seen."""
    deadline = time.monotonic() + timeout
    state = squeue_state(runner, job_id)
    while state in ("PENDING", "RUNNING", "CONFIGURING") and time.monotonic() < deadline:
        time.sleep(0.5)
        state = squeue_state(runner, job_id)
    return state
