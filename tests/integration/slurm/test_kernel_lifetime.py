"""An allocation lives as long as the kernel: released on shutdown, found again after a crash."""

from __future__ import annotations

import os
import time
from typing import Any

import pytest

pytestmark = pytest.mark.sandbox

jupyter_client = pytest.importorskip("jupyter_client")


def _run(kc: Any, code: str, timeout: float = 60) -> str:
    msg_id = kc.execute(code)
    out: list[str] = []
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        msg = kc.get_iopub_msg(timeout=timeout)
        if msg["parent_header"].get("msg_id") != msg_id:
            continue
        kind, content = msg["msg_type"], msg["content"]
        if kind == "stream":
            out.append(content["text"])
        elif kind == "error":
            raise AssertionError("\n".join(content["traceback"]))
        elif kind == "status" and content["execution_state"] == "idle":
            return "".join(out)
    raise AssertionError(f"no answer to {code!r}")


def _kernel(sandbox: Any) -> tuple[Any, Any]:
    km = jupyter_client.KernelManager(kernel_name="python3")
    km.start_kernel(env={**os.environ, **sandbox.env()})
    kc = km.client()
    kc.start_channels()
    kc.wait_for_ready(timeout=60)
    return km, kc


def _state(sandbox: Any, job_id: str) -> str:
    return sandbox.runner().run(["squeue", "-h", "-t", "all", "-j", job_id, "-o", "%T"]).stdout.strip()


ALLOCATE = (
    "from slurmlab.slurm.allocation import Allocation, find_leftovers\n"
    "a = Allocation.submit(['--gpus=1', '-t', '5'])\n"
    "a.wait(timeout=30)\n"
    "print(a.job_id)\n"
)


def test_kernel_shutdown_releases_its_allocation(sandbox: Any) -> None:
    km, kc = _kernel(sandbox)
    try:
        job_id = _run(kc, ALLOCATE).strip()
        assert _state(sandbox, job_id) == "RUNNING"
    finally:
        kc.stop_channels()
        km.shutdown_kernel(now=False)  # what JupyterLab's "Shut Down Kernel" does
    deadline = time.monotonic() + 15
    while _state(sandbox, job_id) == "RUNNING" and time.monotonic() < deadline:
        time.sleep(0.3)
    assert _state(sandbox, job_id) in ("CANCELLED", "COMPLETING", "")


def test_a_new_kernel_finds_and_cancels_what_a_crashed_one_left(sandbox: Any) -> None:
    km, kc = _kernel(sandbox)
    job_id = _run(kc, ALLOCATE).strip()
    kc.stop_channels()
    km.shutdown_kernel(now=True)  # killed: no chance to release
    time.sleep(1)
    assert _state(sandbox, job_id) == "RUNNING"
    km2, kc2 = _kernel(sandbox)
    try:
        found = _run(kc2, "from slurmlab.slurm.allocation import find_leftovers\n"
                          "print(*[j.job_id for j in find_leftovers()])\n").split()
        assert job_id in found
        _run(kc2, f"from slurmlab.slurm.allocation import Allocation\nAllocation.attach({job_id}).cancel()\n")
    finally:
        kc2.stop_channels()
        km2.shutdown_kernel(now=True)
    deadline = time.monotonic() + 15
    while _state(sandbox, job_id) == "RUNNING" and time.monotonic() < deadline:
        time.sleep(0.3)
    assert _state(sandbox, job_id) in ("CANCELLED", "COMPLETING", "")
