"""Allocations against the real sandbox (dgx-h100: 2 nodes x 8 H100)."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import textwrap
import threading
import time
from typing import Any

import pytest

from slurmlab.errors import AllocationError
from slurmlab.slurm import queries
from slurmlab.slurm.allocation import Allocation, find_leftovers
from slurmlab.slurm.poller import JobPoller

pytestmark = pytest.mark.sandbox


def _squeue_state(runner: Any, job_id: str) -> str:
    return runner.run(["squeue", "-h", "-t", "all", "-j", job_id, "-o", "%T"]).stdout.strip()


def test_pending_allocation_returns_at_once_and_runs_when_resources_free(sandbox: Any) -> None:
    runner = sandbox.runner()
    poller = JobPoller(runner, interval=0.5)
    blocker = Allocation.submit(["-N2", "--gpus-per-node=8", "-t", "5"], runner=runner, poller=poller)
    blocker.wait(timeout=20)
    t0 = time.monotonic()
    waiting = Allocation.submit(["--gpus=2", "-t", "5"], runner=runner, poller=poller)
    elapsed = time.monotonic() - t0
    assert elapsed < 1.0, f"submit blocked for {elapsed:.2f} s"
    assert waiting.job_id is not None
    # the poller reports the reason within about an interval
    deadline = time.monotonic() + 5
    while waiting.reason is None and time.monotonic() < deadline:
        time.sleep(0.1)
    assert waiting.state == "PENDING"
    assert waiting.reason == "Resources"
    assert _squeue_state(runner, waiting.job_id) == "PENDING"

    seen: list[str] = []
    waiting.subscribe(lambda a: seen.append(a.state))
    blocker.cancel()  # free the GPUs from outside the waiting allocation
    t1 = time.monotonic()
    waiting.wait("RUNNING", timeout=15)
    assert time.monotonic() - t1 < 5
    assert "RUNNING" in seen
    assert sum(len(v) for v in waiting.gpus.values()) == 2
    assert waiting.time_left() is not None and 0 < waiting.time_left() <= 300  # type: ignore[operator]
    waiting.cancel()
    waiting.wait("CANCELLED", timeout=15)
    assert _squeue_state(runner, waiting.job_id) in ("CANCELLED", "")
    poller.stop()


def test_leaving_a_with_block_cancels_the_job_and_its_state_says_so_at_once(sandbox: Any) -> None:
    runner = sandbox.runner()
    poller = JobPoller(runner, interval=0.2)
    try:
        with Allocation.submit(["--gpus=1", "-t", "5"], runner=runner, poller=poller) as alloc:
            alloc.wait(timeout=20)
        assert alloc.state == "CANCELLED", alloc.summary()  # before: RUNNING until a later poll
        # what Slurm says next (COMPLETING while the epilog runs, then CANCELLED) never makes it live again
        states, slurm_said = set(), set()
        deadline = time.monotonic() + 3
        while time.monotonic() < deadline:
            states.add(alloc.state)
            slurm_said.add(_squeue_state(runner, str(alloc.job_id)))
            time.sleep(0.1)
        assert states == {"CANCELLED"}, (states, slurm_said)
        assert slurm_said <= {"COMPLETING", "CANCELLED", ""}, slurm_said
    finally:
        poller.stop()


def test_steps_stream_output_line_by_line(sandbox: Any) -> None:
    alloc = Allocation.submit(["-N1", "-n1", "--gpus=1", "-t", "5"], runner=sandbox.runner())
    alloc.wait(timeout=20)
    arrivals: list[tuple[float, str]] = []
    t0 = time.monotonic()
    result = alloc.srun(
        ["bash", "-c", "echo first; sleep 2; echo second"],
        on_output=lambda stream, line: arrivals.append((time.monotonic() - t0, line)),
    )
    assert result.ok and result.stdout == ["first", "second"]
    first = next(t for t, line in arrivals if line == "first")
    second = next(t for t, line in arrivals if line == "second")
    assert second - first > 1.5, "the first line arrived only when the step ended"
    alloc.cancel()


def test_steps_see_their_gpus_with_closest_binding(sandbox: Any) -> None:
    alloc = Allocation.submit(
        ["-N2", "-n4", "--gpus=4", "--gpu-bind=closest", "--gres-flags=enforce-binding", "-t", "5"],
        runner=sandbox.runner(),
    )
    alloc.wait(timeout=20)
    gpus = alloc.gpus
    assert set(gpus) == {"node1", "node2"} and sum(len(v) for v in gpus.values()) == 4
    result = alloc.srun(["bash", "-c", "echo $SLURMD_NODENAME $SLURM_STEP_GPUS"], on_output=lambda *_: None)
    assert result.ok
    seen = {line.split()[0]: line.split()[1] for line in result.stdout if len(line.split()) == 2}
    for node, idx in gpus.items():
        assert seen[node] == ",".join(map(str, idx))
    alloc.cancel()


def test_interrupted_step_leaves_the_allocation_alive(sandbox: Any) -> None:
    runner = sandbox.runner()
    alloc = Allocation.submit(["-N1", "-n1", "-t", "5"], runner=runner)
    alloc.wait(timeout=20)
    # a process started in the background by a non-interactive shell inherits SIGINT ignored: Ctrl-C
    # in a kernel is what is simulated here, so give the test Python's own handler
    previous = signal.signal(signal.SIGINT, signal.default_int_handler)
    timer = threading.Timer(
        1.5, lambda: signal.pthread_kill(threading.main_thread().ident or 0, signal.SIGINT)
    )
    timer.start()
    t0 = time.monotonic()
    try:
        with pytest.raises(KeyboardInterrupt):
            alloc.srun(["sleep", "60"], on_output=lambda *_: None)
    finally:
        signal.signal(signal.SIGINT, previous)
    assert time.monotonic() - t0 < 20
    assert alloc.steps[-1].interrupted
    assert _squeue_state(runner, alloc.job_id or "") == "RUNNING"
    # the step ends; Slurm may list it for a moment while its step daemon finishes (seen on 26.05)
    deadline = time.monotonic() + 10
    steps = "sleep"
    while "sleep" in steps and time.monotonic() < deadline:
        steps = runner.run(["squeue", "-h", "-s", "-j", alloc.job_id or "", "-o", "%i %j"]).stdout
        time.sleep(0.2)
    assert "sleep" not in steps
    # and the allocation still takes steps
    assert alloc.srun(["hostname"], on_output=lambda *_: None).ok
    alloc.cancel()


def test_exiting_python_releases_its_allocations(sandbox: Any) -> None:
    runner = sandbox.runner()
    script = textwrap.dedent(
        """
        from slurmlab.slurm.allocation import Allocation
        a = Allocation.submit(["--gpus=1", "-t", "5"])
        a.wait(timeout=20)
        print(a.job_id, flush=True)
        """
    )
    env = {**os.environ, **sandbox.env()}
    out = subprocess.run([sys.executable, "-c", script], env=env, capture_output=True, text=True, timeout=60)
    assert out.returncode == 0, out.stderr
    job_id = out.stdout.strip()
    assert job_id.isdigit()
    assert _squeue_state(runner, job_id) in ("CANCELLED", "COMPLETING", "")


def test_a_restarted_kernel_finds_what_it_left(sandbox: Any) -> None:
    runner = sandbox.runner()
    script = textwrap.dedent(
        """
        from slurmlab.slurm.allocation import Allocation
        a = Allocation.submit(["--gpus=1", "-t", "5"])
        a.wait(timeout=20)
        a.detach()
        print(a.job_id, flush=True)
        """
    )
    env = {**os.environ, **sandbox.env()}
    out = subprocess.run([sys.executable, "-c", script], env=env, capture_output=True, text=True, timeout=60)
    job_id = out.stdout.strip()
    assert _squeue_state(runner, job_id) == "RUNNING"
    left = find_leftovers(runner)
    assert job_id in {str(j.job_id) for j in left}
    again = Allocation.attach(job_id, runner=runner)
    again.wait(timeout=10)
    assert again.gpus
    again.cancel()
    assert _squeue_state(runner, job_id) in ("CANCELLED", "COMPLETING", "")


def test_a_rejected_request_raises_with_slurms_message(sandbox: Any) -> None:
    from slurmlab.errors import RequestError

    # caught before submission, with the partitions that exist
    with pytest.raises(RequestError) as early:
        Allocation.submit(["-p", "nosuchpart", "--gpus=1", "-t", "5"], runner=sandbox.runner())
    assert "nosuchpart" in str(early.value) and "gpu" in str(early.value)
    # and what Slurm itself says when validation is skipped
    with pytest.raises(AllocationError) as info:
        Allocation.submit(
            ["-p", "nosuchpart", "--gpus=1", "-t", "5"], runner=sandbox.runner(), validate=False
        )
    assert "Invalid partition" in str(info.value) or "invalid partition" in str(info.value)


def test_queries_list_my_jobs_nodes_and_inventory(sandbox: Any) -> None:
    runner = sandbox.runner()
    alloc = Allocation.submit(["--gpus=3", "-t", "5"], runner=runner)
    alloc.wait(timeout=20)
    jobs = queries.list_jobs(runner)
    mine = [j for j in jobs if str(j.job_id) == alloc.job_id]
    assert mine and sum(len(v) for v in mine[0].gpus_by_node().values()) == 3
    nodes = {n.name: n for n in queries.list_nodes(runner)}
    assert set(nodes) == set(sandbox.nodes)
    assert sum(n.gpu_used for n in nodes.values()) == 3
    inv = queries.inventory(runner)
    part = inv.partitions[0]
    assert part.gpu_types == ("h100",) and part.most_per_node("gpu") == 8
    alloc.cancel()


def test_many_watchers_share_one_cheap_squeue_per_interval(sandbox: Any) -> None:
    runner = sandbox.runner()
    calls: list[list[str]] = []

    def counting_brief(ids: Any, r: Any) -> Any:
        calls.append(list(ids))
        return queries.brief_states(ids, r)

    poller = JobPoller(runner, interval=0.5, fetch_brief=counting_brief, fetch_detail=queries.job_detail)
    # kept past the kernel (salloc --no-shell): nothing pushes their news, so they are polled
    allocs = [
        Allocation.submit(["-n1", "-t", "5"], runner=runner, poller=poller, release_at_exit=False)
        for _ in range(5)
    ]
    for a in allocs:
        a.wait(timeout=20)
    n0 = len(calls)
    time.sleep(3)
    rounds = len(calls) - n0
    assert 3 <= rounds <= 8, rounds  # one call per interval, not one per watcher
    assert all(len(c) == 5 for c in calls[n0:])
    for a in allocs:
        a.cancel()
    poller.stop()


def test_a_gpu_type_the_partition_lacks_fails_before_submission(sandbox: Any) -> None:
    from slurmlab.errors import RequestError

    runner = sandbox.runner()
    before = runner.run(["squeue", "-h", "-t", "all", "-o", "%A"]).stdout.split()
    with pytest.raises(RequestError) as info:
        Allocation.submit(["--gpus=a100:1", "-t", "5"], runner=runner)
    text = str(info.value)
    assert "a100" in text and "h100" in text  # the types that exist are named
    after = runner.run(["squeue", "-h", "-t", "all", "-o", "%A"]).stdout.split()
    assert after == before  # nothing was submitted


def test_a_python_function_runs_as_a_step(sandbox: Any) -> None:
    alloc = Allocation.submit(["-n1", "-t", "5"], runner=sandbox.runner())
    alloc.wait(timeout=20)
    lines: list[str] = []
    result = alloc.srun(
        lambda: __import__("os").environ["SLURM_JOB_ID"], on_output=lambda stream, line: lines.append(line)
    )
    assert result.ok and lines == [alloc.job_id]
    alloc.cancel()


def test_several_steps_run_side_by_side(sandbox: Any) -> None:
    alloc = Allocation.submit(["-n2", "-t", "5"], runner=sandbox.runner())
    alloc.wait(timeout=20)
    t0 = time.monotonic()
    steps = [alloc.launch(["bash", "-c", "sleep 2; echo $SLURM_STEP_ID"], args=["-n1"]) for _ in range(2)]
    results = [s.wait(timeout=30) for s in steps]
    assert all(r.ok for r in results)
    assert time.monotonic() - t0 < 3.8  # concurrent, not one after the other
    assert len({r.stdout[0] for r in results}) == 2
    alloc.cancel()
