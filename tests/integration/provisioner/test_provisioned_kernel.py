"""A kernel that runs as a step inside a Slurm allocation, started by jupyter_client on the real sandbox."""

from __future__ import annotations

import asyncio
import json
import logging
import os
import re
import signal
import subprocess
import sys
import textwrap
import time
from typing import Any

import pytest
from provisioner_kernels import install_spec, squeue_state, wait_job_gone

pytestmark = pytest.mark.sandbox

REPORT = (
    "import json, os\n"
    "print(json.dumps({k: os.environ.get(k) for k in ('SLURM_JOB_ID', 'SLURM_STEP_ID', 'SLURMD_NODENAME',"
    " 'CUDA_VISIBLE_DEVICES', 'SLURM_STEP_GPUS', 'SLURM_CPU_BIND_LIST')} | {'mask': sorted(os.sched_getaffinity(0))}))"
)
OWN_JOB = (
    "from slurmlab.slurm.own_job import find_own_job\n"
    "from slurmlab.slurm.allocation import Allocation\n"
    "own = find_own_job()\n"
    "alloc = Allocation.own(own.job_id)\n"
    "print(own.job_id, alloc.own_job, alloc.wait(timeout=30).state, sorted(alloc.gpus.items()))\n"
)


async def _run(km: Any, code: str, timeout: float = 60.0) -> tuple[str, dict[str, Any]]:
    """Execute ``code`` in the kernel: what it printed and its reply's content."""
    client = km.client()
    client.start_channels()
    try:
        await client.wait_for_ready(timeout=timeout)
        printed: list[str] = []

        def output(msg: dict[str, Any]) -> None:
            if msg["msg_type"] == "stream":
                printed.append(msg["content"]["text"])
            elif msg["msg_type"] in ("display_data", "execute_result"):
                printed.append(msg["content"]["data"].get("text/plain", ""))

        reply = await client.execute_interactive(code, output_hook=output, timeout=timeout)
        return "".join(printed), reply["content"]
    finally:
        client.stop_channels()


def _job_detail(runner: Any, job_id: str) -> str:
    return str(runner.run(["scontrol", "show", "job", "-d", job_id]).stdout)


def _cpu_ids(detail: str, node: str) -> list[int]:
    """The CPUs Slurm gave the job on ``node`` (``CPU_IDs=0-3,8``)."""
    found = re.search(rf"Nodes={node} CPU_IDs=(\S+)", detail)
    assert found, detail
    cpus: list[int] = []
    for part in found.group(1).split(","):
        first, _, last = part.partition("-")
        cpus.extend(range(int(first), int(last or first) + 1))
    return cpus


def _gpu_idx(detail: str, node: str) -> str:
    found = re.search(rf"Nodes={node} .*GRES=gpu:\w+:\d+\(IDX:([^)]+)\)", detail)
    assert found, detail
    return found.group(1)


async def _sleeping(km: Any, seconds: int) -> tuple[Any, str]:
    """A client whose cell sleeps ``seconds``, once the cell runs (it says so first): (client, msg_id)."""
    client = km.client()
    client.start_channels()
    await client.wait_for_ready(timeout=60)
    msg_id = client.execute(f"import time; print('sleeping', flush=True); time.sleep({seconds})")
    deadline = time.monotonic() + 60
    while True:
        msg = await client.get_iopub_msg(timeout=max(0.1, deadline - time.monotonic()))
        if msg["parent_header"].get("msg_id") == msg_id and msg["msg_type"] == "stream":
            return client, msg_id


async def _reply_of(client: Any, msg_id: str, timeout: float) -> dict[str, Any]:
    deadline = time.monotonic() + timeout
    while True:
        msg = await client.get_shell_msg(timeout=max(0.1, deadline - time.monotonic()))
        if msg["parent_header"].get("msg_id") == msg_id:
            return dict(msg["content"])


async def _sees_its_job(km: Any, runner: Any) -> str:
    """What a cell sees is what Slurm says of the kernel's job: its id and step, its GPUs, its CPUs; and
    slurmlab inside the kernel knows the job as its own (which it never cancels). Returns the job id."""
    status = km.provisioner.status
    job = status.job_id
    assert status.phase == "running" and job, status
    assert squeue_state(runner, job) == "RUNNING"
    printed, reply = await _run(km, REPORT)
    assert reply["status"] == "ok", reply
    seen = json.loads(printed)
    detail = _job_detail(runner, job)
    node = seen["SLURMD_NODENAME"]
    assert seen["SLURM_JOB_ID"] == job and seen["SLURM_STEP_ID"] == status.step.split(".")[1]
    assert status.nodes == (node,)
    assert seen["CUDA_VISIBLE_DEVICES"] == seen["SLURM_STEP_GPUS"] == _gpu_idx(detail, node)
    assert len(seen["CUDA_VISIBLE_DEVICES"].split(",")) == 2
    assert seen["mask"] == _cpu_ids(detail, node), (seen, detail)
    printed, reply = await _run(km, OWN_JOB)
    assert reply["status"] == "ok", reply
    own_id, own_flag, own_state, _gpus = printed.split(" ", 3)
    assert (own_id, own_flag, own_state) == (job, "True", "RUNNING"), printed
    printed, reply = await _run(km, "%load_ext slurmlab\n%slurm")
    assert reply["status"] == "ok", reply
    assert f"this session: job {job} on {node}" in printed, printed
    return str(job)


async def _interrupted(km: Any) -> None:
    """A cell sleeping on the node ends in KeyboardInterrupt when the kernel is interrupted."""
    client, msg_id = await _sleeping(km, 120)
    try:
        await km.interrupt_kernel()
        reply = await _reply_of(client, msg_id, timeout=60)
        assert reply["status"] == "error" and reply["ename"] == "KeyboardInterrupt", reply
    finally:
        client.stop_channels()


def test_kernel_runs_in_a_step_of_its_allocation_and_lives_with_it(kernel_home: dict[str, Any]) -> None:
    """Start: a step of the kernel's own job with the job's GPUs and CPUs; inside, slurmlab knows its job;
    interrupt reaches the kernel on the node; restart is a new step of the same job; shutdown ends the job."""
    from jupyter_client.manager import AsyncKernelManager

    runner = kernel_home["runner"]
    name = install_spec(kernel_home, "slurmlab-gpu", gpus=2, time=10)

    async def life() -> str:
        km: Any = AsyncKernelManager(kernel_name=name)
        await km.start_kernel()
        provisioner = km.provisioner
        try:
            job = await _sees_its_job(km, runner)
            await _interrupted(km)
            assert squeue_state(runner, job) == "RUNNING" and await km.is_alive()
            first_step = provisioner.status.step
            await km.restart_kernel()
            status = km.provisioner.status
            assert status.job_id == job and status.step != first_step, (status, first_step)
            printed, _ = await _run(km, REPORT)
            assert json.loads(printed)["SLURM_JOB_ID"] == job
            assert squeue_state(runner, job) == "RUNNING"
        finally:
            await km.shutdown_kernel()
        assert provisioner.status.phase == "released", provisioner.status
        return job

    job = asyncio.run(life())
    assert wait_job_gone(runner, job, timeout=30) in ("", "COMPLETING", "CANCELLED")
    ended = runner.run(["scontrol", "show", "job", job], check=False).stdout
    assert not ended or "JobState=CANCELLED" in ended or "JobState=COMPLETING" in ended, ended


def _fill_the_cluster(runner: Any) -> str:
    """A job of every GPU of the sandbox's two nodes: a kernel's job must wait (Resources)."""
    said = runner.run(
        ["salloc", "--no-shell", "-J", "fill", "-t", "10", "-N2", "--gpus-per-node=8"], timeout=30
    ).stderr
    found = re.search(r"Granted job allocation (\d+)", said)
    assert found, said
    return found.group(1)


async def _until_pending(km: Any, start: asyncio.Future[None]) -> Any:
    """The provisioner's status once it says the kernel's job is pending."""
    deadline = time.monotonic() + 60
    while (km.provisioner is None or km.provisioner.status.phase != "pending") and not start.done():
        assert time.monotonic() < deadline, "the kernel's job never said it was pending"
        await asyncio.sleep(0.2)
    return km.provisioner.status


class _Lines(logging.Handler):
    def __init__(self) -> None:
        super().__init__(logging.INFO)
        self.lines: list[str] = []

    def emit(self, record: logging.LogRecord) -> None:
        self.lines.append(record.getMessage())


def test_pending_kernel_says_why_then_starts_with_its_own_request(kernel_home: dict[str, Any]) -> None:
    """A full cluster: the start waits, the status and the log say Slurm's reason in plain words; once the
    cluster frees up the kernel starts, with the GPUs its environment asked for instead of the spec's."""
    from jupyter_client.manager import AsyncKernelManager

    runner = kernel_home["runner"]
    name = install_spec(kernel_home, "slurmlab-gpu", gpus=2, time=10)
    filler = _fill_the_cluster(runner)

    async def wait_then_start() -> None:
        km: Any = AsyncKernelManager(kernel_name=name)
        lines = _Lines()
        km.log.addHandler(lines)
        km.log.setLevel(logging.INFO)
        env = {**os.environ, "SLURMLAB_KERNEL_REQUEST": '{"gpus": 1}'}
        start = asyncio.ensure_future(km.start_kernel(env=env))
        try:
            status = await _until_pending(km, start)
            assert status.reason in ("Resources", "Priority"), status
            assert status.why and status.reason in status.why, status
            assert f"job {status.job_id} is pending: {status.why}" in status.message
            assert status.to_dict()["phase"] == "pending"
            assert any(status.message in line for line in lines.lines), lines.lines
            assert squeue_state(runner, status.job_id) == "PENDING"
            assert not start.done()
            runner.run(["scancel", filler])
            await asyncio.wait_for(start, timeout=90)
            status = km.provisioner.status
            assert status.phase == "running", status
            assert "gres/gpu=1" in _job_detail(runner, status.job_id)
            printed, _ = await _run(km, REPORT)
            assert len(json.loads(printed)["CUDA_VISIBLE_DEVICES"].split(",")) == 1
        finally:
            if not start.done():
                start.cancel()
            await km.shutdown_kernel(now=True)

    asyncio.run(wait_then_start())


def test_a_start_given_up_while_pending_leaves_no_job(kernel_home: dict[str, Any]) -> None:
    from jupyter_client.manager import AsyncKernelManager

    runner = kernel_home["runner"]
    name = install_spec(kernel_home, "slurmlab-gpu", gpus=1, time=10)
    filler = _fill_the_cluster(runner)

    async def given_up() -> str:
        km: Any = AsyncKernelManager(kernel_name=name)
        start = asyncio.ensure_future(km.start_kernel())
        status = await _until_pending(km, start)
        start.cancel()
        with pytest.raises(asyncio.CancelledError):
            await start
        return str(status.job_id)

    job = asyncio.run(given_up())
    assert wait_job_gone(runner, job, timeout=30) in ("", "CANCELLED")
    assert squeue_state(runner, filler) == "RUNNING"


def test_the_notebooks_metadata_asks_for_its_own_kernel(kernel_home: dict[str, Any]) -> None:
    """jupyter_server starts a notebook's kernel in the notebook's folder, naming it in JPY_SESSION_NAME: the
    notebook's ``metadata.slurmlab.kernel_request`` changes the spec's request."""
    from jupyter_client.manager import AsyncKernelManager

    runner = kernel_home["runner"]
    name = install_spec(kernel_home, "slurmlab-gpu", gpus=2, time=10)
    folder = kernel_home["tmp"] / "work"
    folder.mkdir()
    notebook = {
        "cells": [],
        "metadata": {"slurmlab": {"kernel_request": {"gpus": 1, "time": 5}}},
        "nbformat": 4,
    }
    (folder / "train.ipynb").write_text(json.dumps(notebook))

    async def from_metadata() -> None:
        km: Any = AsyncKernelManager(kernel_name=name)
        await km.start_kernel(env={**os.environ, "JPY_SESSION_NAME": "work/train.ipynb"}, cwd=str(folder))
        try:
            detail = _job_detail(runner, km.provisioner.status.job_id)
            assert "gres/gpu=1" in detail and "TimeLimit=00:05:00" in detail, detail
            assert km.provisioner.status.request == "1 GPU, 5 min"
            printed, _ = await _run(km, "import os; print(os.getcwd())")
            assert printed.strip() == str(folder)  # the notebook's folder, as a local kernel's
        finally:
            await km.shutdown_kernel(now=True)

    asyncio.run(from_metadata())


def test_bad_request_fails_the_start_in_words_before_anything_is_submitted(
    kernel_home: dict[str, Any],
) -> None:
    from jupyter_client.manager import AsyncKernelManager

    from slurmlab.provisioner import KernelStartRefused

    runner = kernel_home["runner"]
    name = install_spec(kernel_home, "slurmlab-gpu", gpus=1, time=10)

    async def refused(**override: object) -> str:
        km: Any = AsyncKernelManager(kernel_name=name)
        with pytest.raises(KernelStartRefused) as caught:
            await km.start_kernel(slurm_request=override)
        assert km.provisioner.status.phase == "refused"
        return str(caught.value)

    said = asyncio.run(refused(gpus="two"))
    assert "gpus must be a whole number, not 'two'" in said and "Traceback" not in said
    said = asyncio.run(refused(partition="nosuch"))
    assert "nosuch" in said and "partition" in said, said
    said = asyncio.run(refused(gpus=99))
    assert "99" in said, said
    assert runner.run(["squeue", "-h", "--me", "-o", "%A"]).stdout.strip() == ""


def test_allocation_end_under_the_kernel_is_warned_of_and_reported(kernel_home: dict[str, Any]) -> None:
    """Before the time limit the log warns; when the job ends under the kernel (here scancel from outside) the
    status and the log say how it ended, and the kernel is gone with it."""
    from jupyter_client.manager import AsyncKernelManager

    runner = kernel_home["runner"]
    name = install_spec(kernel_home, "slurmlab-gpu", gpus=1, time=1)

    async def cancelled_outside() -> None:
        km: Any = AsyncKernelManager(kernel_name=name)
        lines = _Lines()
        km.log.addHandler(lines)
        await km.start_kernel()
        try:
            job = km.provisioner.status.job_id
            # a one-minute job: the log warns of its time limit before it comes
            deadline = time.monotonic() + 30
            warning = f"job {job} reaches its time limit in 1 min"
            while not any(warning in line for line in lines.lines):
                assert time.monotonic() < deadline, lines.lines
                await asyncio.sleep(0.3)
            runner.run(["scancel", job])
            deadline = time.monotonic() + 60
            while km.provisioner.status.phase != "ended":
                assert time.monotonic() < deadline, km.provisioner.status
                await asyncio.sleep(0.3)
            status = km.provisioner.status
            assert status.reason == "CANCELLED" and f"job {job} ended (CANCELLED" in status.message, status
            assert any(status.message in line for line in lines.lines), lines.lines
            while await km.is_alive():
                assert time.monotonic() < deadline + 30, "the kernel outlived its job"
                await asyncio.sleep(0.3)
        finally:
            await km.shutdown_kernel(now=True)

    asyncio.run(cancelled_outside())


def _processes_naming(text: str) -> list[str]:
    found = []
    for pid in filter(str.isdigit, os.listdir("/proc")):
        try:
            with open(f"/proc/{pid}/cmdline", "rb") as f:
                cmdline = f.read().replace(b"\0", b" ").decode(errors="replace")
        except OSError:
            continue
        if text in cmdline:
            found.append(f"{pid}: {cmdline[:200]}")
    return found


SERVER = textwrap.dedent(
    """
    import asyncio, sys
    from jupyter_client.manager import AsyncKernelManager

    async def main():
        km: Any = AsyncKernelManager(kernel_name=sys.argv[1])
        await km.start_kernel()
        print(km.provisioner.status.job_id, flush=True)
        await asyncio.sleep(600)

    asyncio.run(main())
    """
)


def test_killed_server_leaves_no_allocation(kernel_home: dict[str, Any]) -> None:
    """kill -9 of the process that holds the provisioner: slurmlab's guardian releases the kernel's job."""
    runner = kernel_home["runner"]
    name = install_spec(kernel_home, "slurmlab-gpu", gpus=1, time=10)
    server = subprocess.Popen(
        [sys.executable, "-c", SERVER, name], stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True
    )
    try:
        job = server.stdout.readline().strip()  # type: ignore[union-attr]
        assert job.isdigit(), server.stderr.read() if server.poll() is not None else job  # type: ignore[union-attr]
        assert squeue_state(runner, job) == "RUNNING"
        assert _processes_naming(str(kernel_home["tmp"] / "runtime"))  # the kernel and its srun, found so
    finally:
        server.send_signal(signal.SIGKILL)
        server.wait()
    assert wait_job_gone(runner, job, timeout=60) in ("", "COMPLETING", "CANCELLED")
    # nor a kernel, nor its srun: nothing runs that names the test's runtime folder (the kernel's files are there)
    runtime = str(kernel_home["tmp"] / "runtime")
    deadline = time.monotonic() + 30
    while _processes_naming(runtime):
        assert time.monotonic() < deadline, _processes_naming(runtime)
        time.sleep(0.5)
