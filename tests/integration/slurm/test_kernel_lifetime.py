"""An allocation lives as long as the kernel: released on shutdown, found again after a crash."""

from __future__ import annotations

import os
import re
import signal
import time
from typing import Any

import pytest
from kernel_replies import take

pytestmark = pytest.mark.sandbox

jupyter_client = pytest.importorskip("jupyter_client")


def _run(kc: Any, code: str, timeout: float = 60) -> str:
    msg_id = kc.execute(code)
    out: list[str] = []
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        done = take(kc.get_iopub_msg(timeout=timeout), msg_id, out)
        if done is not None:
            return done
    raise AssertionError(f"no answer to {code!r}")


def _kernel(sandbox: Any) -> tuple[Any, Any]:
    km = jupyter_client.KernelManager(kernel_name="python3")
    km.start_kernel(env={**os.environ, **sandbox.env()})
    kc = km.client()
    kc.start_channels()
    kc.wait_for_ready(timeout=60)
    return km, kc


def _zombie(pid: str) -> bool | None:
    try:
        with open(f"/proc/{pid}/stat") as f:
            return f.read().rsplit(")", 1)[1].split()[0] == "Z"
    except OSError:
        return None


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
    guardian = int(_run(kc, "from slurmlab.slurm.guardian import get_guardian\nprint(get_guardian().pid)\n"))
    salloc = int(
        _run(kc, "print(a._salloc.pid)\n")
    )  # the salloc that holds the job (it lives with the kernel)
    kc.stop_channels()
    # the kernel, its guardian and its salloc all killed (as by a machine's OOM killer): nothing can release
    os.kill(guardian, signal.SIGKILL)
    os.killpg(salloc, signal.SIGKILL)  # salloc and its held command: SIGKILL leaves salloc no time to release
    km.shutdown_kernel(now=True)
    time.sleep(1)
    assert _state(sandbox, job_id) == "RUNNING"
    km2, kc2 = _kernel(sandbox)
    try:
        found = _run(
            kc2,
            "from slurmlab.slurm.allocation import find_leftovers\n"
            "print(*[j.job_id for j in find_leftovers()])\n",
        ).split()
        assert job_id in found
        _run(kc2, f"from slurmlab.slurm.allocation import Allocation\nAllocation.attach({job_id}).cancel()\n")
    finally:
        kc2.stop_channels()
        km2.shutdown_kernel(now=True)
    deadline = time.monotonic() + 15
    while _state(sandbox, job_id) == "RUNNING" and time.monotonic() < deadline:
        time.sleep(0.3)
    assert _state(sandbox, job_id) in ("CANCELLED", "COMPLETING", "")


def test_the_guardian_cancels_only_what_its_kernel_gave_it(sandbox: Any) -> None:
    """A kernel's SIGKILL ends its own allocation; a detached one and a look-alike of another job live."""
    runner = sandbox.runner()
    km, kc = _kernel(sandbox)
    try:
        mine, name, tag, guardian = _run(
            kc,
            ALLOCATE + "from slurmlab.slurm.guardian import get_guardian\n"
            "print(a.name, a.tag, get_guardian().pid)\n",
        ).split()
        kept = _run(
            kc,
            "b = Allocation.submit(['--gpus=1', '-t', '5'])\nb.wait(timeout=30)\nb.detach()\n"
            "print(b.job_id)\n",
        ).strip()
        # the same user's job with the very name and tag of the kernel's allocation
        twin = runner.run(
            ["salloc", "--no-shell", f"--job-name={name}", f"--comment={tag}", "-n1", "-t", "5"]
        )
        twin_id = re.search(r"allocation (\d+)", twin.stderr).group(1)  # type: ignore[union-attr]
        os.killpg(km.provisioner.process.pid, signal.SIGKILL)  # as a forced restart does
    finally:
        kc.stop_channels()
        km.shutdown_kernel(now=True)
    deadline = time.monotonic() + 20
    while _state(sandbox, mine) in ("RUNNING", "PENDING") and time.monotonic() < deadline:
        time.sleep(0.3)
    # released by the guardian (CANCELLED) or by its salloc, whose pipe closed with the kernel (COMPLETED)
    assert _state(sandbox, mine) in ("CANCELLED", "COMPLETED", "COMPLETING", "")
    while os.path.exists(f"/proc/{guardian}") and _zombie(guardian) is False and time.monotonic() < deadline:
        time.sleep(0.2)  # once it has exited it can have touched nothing more
    assert _state(sandbox, kept) == "RUNNING"
    assert _state(sandbox, twin_id) == "RUNNING"
