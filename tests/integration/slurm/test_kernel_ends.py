"""However a kernel ends, its allocations end with it: 6 real ipykernels per kind of end.

Each kernel makes a real allocation on the sandbox, then ends gracefully (shutdown request), by
SIGTERM, by SIGHUP, by SIGKILL, or by a forced restart (``restart_kernel(now=True)`` kills the
kernel's process group). Afterwards none of its jobs may stay active in Slurm and its guardian
must have exited. Kernels run several at a time so the 30 of them fit in well under a minute.
"""

from __future__ import annotations

import asyncio
import os
import signal
import tempfile
import time
import uuid
from collections import Counter
from pathlib import Path
from typing import Any

import pytest
from kernel_replies import take

pytestmark = [pytest.mark.sandbox, pytest.mark.slow]

jupyter_client = pytest.importorskip("jupyter_client")

TRIES = 6  # per kind of end (the leak this guards against hit 18 of 27 kernels; 30 kernels in all)
PARALLEL = 6  # kernels alive at once: 6 GPUs of the sandbox's 16, and what 2 cores start in time
ACTIVE = ("PENDING", "RUNNING", "CONFIGURING", "SUSPENDED", "REQUEUED", "RESIZING")
RELEASE_WAIT = 30.0  # the guardian's scancel takes well under a second; the bound is a hang guard

ALLOCATE = (
    "from slurmlab.slurm.allocation import Allocation\n"
    "from slurmlab.slurm.guardian import get_guardian\n"
    "a = Allocation.submit(['--gpus=1', '-t', '5'])\n"
    "a.wait(timeout=60)\n"
    "print(a.job_id, get_guardian().pid)\n"
)


async def _run(kc: Any, code: str, timeout: float = 90) -> str:
    msg_id = kc.execute(code)
    out: list[str] = []
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        done = take(await kc.get_iopub_msg(timeout=timeout), msg_id, out)
        if done is not None:
            return done
    raise AssertionError(f"no answer to {code!r}")


async def _ready_client(km: Any) -> Any:
    kc = km.client()
    kc.start_channels()
    await kc.wait_for_ready(timeout=90)
    return kc


async def _allocate(km: Any) -> tuple[str, int]:
    kc = await _ready_client(km)
    try:
        job_id, guardian_pid = (await _run(kc, ALLOCATE)).split()
    finally:
        kc.stop_channels()
    return job_id, int(guardian_pid) if guardian_pid.isdigit() else 0


def _alive(pid: int) -> bool:
    # the guardian is reparented when its kernel dies; a zombie nobody reaps counts as gone
    try:
        state = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()[0]
    except (OSError, IndexError):
        return False
    return state != "Z"


async def _active(runner: Any, job_id: str) -> bool:
    out = (await runner.arun(["squeue", "-h", "-t", "all", "-j", job_id, "-o", "%T"], check=False)).stdout
    return out.strip() in ACTIVE


async def _released(runner: Any, job_id: str, guardian_pid: int) -> tuple[bool, bool]:
    """(job no longer active, guardian gone), waiting up to RELEASE_WAIT for both."""
    deadline = time.monotonic() + RELEASE_WAIT
    while True:
        job_active = await _active(runner, job_id)
        guardian = _alive(guardian_pid)
        if (not job_active and not guardian) or time.monotonic() > deadline:
            return not job_active, not guardian
        await asyncio.sleep(0.3)


async def _end(km: Any, kind: str) -> None:
    if kind == "graceful":
        await km.shutdown_kernel(now=False)  # what JupyterLab's "Shut Down Kernel" does
        return
    if kind == "restart":
        await km.restart_kernel(now=True)  # JupyterLab's "Restart Kernel": kills the process group
        return
    pid = km.provisioner.process.pid
    os.kill(pid, {"sigterm": signal.SIGTERM, "sighup": signal.SIGHUP, "sigkill": signal.SIGKILL}[kind])
    deadline = time.monotonic() + 30
    while await km.is_alive() and time.monotonic() < deadline:
        await asyncio.sleep(0.1)
    await km.shutdown_kernel(now=True)  # frees the manager's ports; the process is already gone


def _manager(sockets: str) -> Any:
    """A kernel manager on its own Unix sockets in ``sockets``: with TCP, kernels started side by side sometimes
    pick the same free port before either binds it ("Address already in use": the kernel dies before kernel_info)."""
    return jupyter_client.AsyncKernelManager(
        kernel_name="python3", transport="ipc", ip=os.path.join(sockets, uuid.uuid4().hex[:12])
    )


async def _trials(
    sandbox: Any, kind: str, count: int, gate: asyncio.Semaphore, sockets: str
) -> list[tuple[str, bool, bool]]:
    """``count`` ends of one kind; forced restarts chain, each new kernel being the next try."""
    runner = sandbox.runner()
    env = {**os.environ, **sandbox.env()}
    results = []
    async with gate:
        km = _manager(sockets)
        await km.start_kernel(env=env)
        try:
            for i in range(count):
                if i and kind != "restart":
                    km = _manager(sockets)
                    await km.start_kernel(env=env)
                job_id, guardian_pid = await _allocate(km)
                await _end(km, kind)
                job_gone, guardian_gone = await _released(runner, job_id, guardian_pid)
                results.append((job_id, job_gone, guardian_gone))
        finally:
            if await km.is_alive():
                await km.shutdown_kernel(now=True)
    return results


def test_no_kernel_end_leaves_an_allocation(sandbox: Any) -> None:
    kinds = ("graceful", "sigterm", "sighup", "sigkill", "restart")
    # a restart's new kernel is the next try, so restarts run in chains; every task shares one gate
    chain = {"restart": 5}
    plan = []
    for kind in kinds:
        full, rest = divmod(TRIES, chain.get(kind, 1))
        plan += [(kind, chain.get(kind, 1))] * full + ([(kind, rest)] if rest else [])

    async def main() -> list[tuple[str, list[tuple[str, bool, bool]]]]:
        gate = asyncio.Semaphore(PARALLEL)
        # short: a Unix socket path has at most 107 bytes
        with tempfile.TemporaryDirectory(prefix="slk-") as sockets:
            done = await asyncio.gather(*(_trials(sandbox, k, n, gate, sockets) for k, n in plan))
        return [(k, r) for (k, _), r in zip(plan, done, strict=True)]

    started = time.monotonic()
    outcome = asyncio.run(main())
    tries: Counter[str] = Counter()
    leaks: Counter[str] = Counter()
    stray_guardians: Counter[str] = Counter()
    leaked_ids = []
    for kind, results in outcome:
        for job_id, job_gone, guardian_gone in results:
            tries[kind] += 1
            leaks[kind] += not job_gone
            stray_guardians[kind] += not guardian_gone
            if not job_gone:
                leaked_ids.append(job_id)
    report = ", ".join(
        f"{k}: {tries[k]} tries, {leaks[k]} leaks, {stray_guardians[k]} guardians left" for k in kinds
    )
    print(f"\nkernel ends ({time.monotonic() - started:.0f} s): {report}")
    assert all(tries[k] == TRIES for k in kinds), report
    assert not leaked_ids, f"jobs left active: {leaked_ids} ({report})"
    assert not sum(stray_guardians.values()), report
