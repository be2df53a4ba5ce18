"""timeslice.run and its plan / StepLauncher / step GPU options: the parts that need no Slurm, run for real."""

from __future__ import annotations

import os
import subprocess
import sys
from typing import Any

import pytest

from slurmlab.core.slurm.gres import GresItem
from slurmlab.core.slurm.models import GresAlloc, Job
from slurmlab.errors import ExperimentError, SlurmlabError
from slurmlab.experiments.plan import TimeslicePlan, choose_cores
from slurmlab.experiments.steps import (
    StepHandle,
    StepLauncher,
    default_sync_root,
    runs_on_this_host,
    step_gpu_args,
)
from slurmlab.experiments.timeslice import run
from slurmlab.experiments.timeslice_result import TimesliceResult


def _job(**kw: Any) -> Job:
    return Job(job_id=7, name="t", state="RUNNING", **kw)


def _gpu(count: int, prefix: str = "gres:") -> GresItem:
    return GresItem(name="gpu", count=count, prefix=prefix)


def test_per_job_gpus_are_repeated_in_every_worker_step() -> None:
    held = (GresAlloc("n1", (GresItem("gpu", "h100", 2, (0, 1)),), "0-3"),)
    assert step_gpu_args(_job(tres_per_job=(_gpu(2),), gpu_allocs=held), "n1") == ["--gpus=2"]
    # per task / per node jobs hand their steps the GPUs without a request
    assert step_gpu_args(_job(tres_per_task=(_gpu(1),), gpu_allocs=held), "n1") == []
    assert step_gpu_args(_job(tres_per_node=(_gpu(2),), gpu_allocs=held), "n1") == []
    assert step_gpu_args(None, "n1") == []


def test_bad_arguments_are_clear_errors() -> None:
    with pytest.raises(ExperimentError, match="procs must be at least 1"):
        run(None, procs=0)
    with pytest.raises(ExperimentError, match="unknown backend"):
        run(None, backend="opencl")
    with pytest.raises(ExperimentError, match="cores must be at least 1"):
        run(None, procs=2, backend="cpu", cores=0)
    with pytest.raises(ExperimentError, match="duration must be positive"):
        run(None, duration=0)
    with pytest.raises(ExperimentError, match="not both"):
        run(None, TimeslicePlan(procs=2), procs=3)


def test_the_plan_is_one_frozen_object_with_normalised_fields() -> None:
    plan = TimeslicePlan(procs=2, cores=[0, 1], step_args=["--gpus=1"])  # type: ignore[arg-type]
    assert plan.cores == (0, 1) and plan.step_args == ("--gpus=1",)
    assert not plan.placed and TimeslicePlan(backend="cpu").placed
    with pytest.raises(AttributeError):
        plan.procs = 5  # type: ignore[misc]


def test_cores_are_chosen_from_those_the_workers_may_use() -> None:
    assert choose_cores(None, [4, 5, 6]) == (4,)
    assert choose_cores(2, [4, 5, 6]) == (4, 5)
    assert choose_cores("5-6", [4, 5, 6]) == (5, 6)
    with pytest.raises(ExperimentError, match="may use only 3"):
        choose_cores(4, [4, 5, 6])
    with pytest.raises(ExperimentError, match="not available here"):
        choose_cores([9], [4, 5, 6])


class _NotRunning:
    state = "PENDING"
    job_id = "12"

    def launch(self, argv: Any, args: Any = (), overlap: bool = True) -> Any:
        raise AssertionError("must not start steps in a pending allocation")


def test_a_pending_allocation_is_refused_before_any_step() -> None:
    with pytest.raises(ExperimentError, match="PENDING, not RUNNING"):
        run(_NotRunning(), procs=2, backend="cpu")


def test_step_launcher_needs_something_that_launches_steps() -> None:
    with pytest.raises(SlurmlabError, match="cannot start steps"):
        StepLauncher(object())


class _Step:
    """A step as Allocation.launch returns it: a real process, stopped through stop()."""

    def __init__(self, argv: list[str]) -> None:
        self.argv = argv
        self.proc = subprocess.Popen(argv, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
        self.stopped = False

    def stop(self) -> None:
        self.stopped = True
        self.proc.kill()
        self.proc.wait()


class _Launches:
    state = "RUNNING"

    def __init__(self, fail_at: int | None = None) -> None:
        self.calls: list[tuple[list[str], list[str]]] = []
        self.steps: list[_Step] = []
        self.fail_at = fail_at

    def launch(self, argv: list[str], args: Any = (), overlap: bool = True) -> _Step:
        if self.fail_at is not None and len(self.calls) == self.fail_at:
            raise SlurmlabError("srun refused")
        self.calls.append((list(argv), list(args)))
        step = _Step(list(argv))
        self.steps.append(step)
        return step


def test_step_launcher_starts_one_step_per_worker_with_common_and_own_options() -> None:
    alloc = _Launches()
    launcher = StepLauncher(alloc, ["-n1", "-w", "n1"], per_worker_args=[["--gpus=1"]])
    sleep = [sys.executable, "-c", "print('hi')"]
    handles = launcher([sleep, sleep])
    assert [c[1] for c in alloc.calls] == [["-n1", "-w", "n1", "--gpus=1"], ["-n1", "-w", "n1"]]
    out, _ = handles[0].communicate(timeout=10)
    assert out.strip() == "hi" and handles[0].poll() == 0
    assert isinstance(handles[1], StepHandle) and launcher.started == list(handles)


def test_step_launcher_stops_the_started_steps_when_one_fails_to_start() -> None:
    alloc = _Launches(fail_at=1)
    long = [sys.executable, "-c", "import time; time.sleep(60)"]
    with pytest.raises(SlurmlabError, match="srun refused"):
        StepLauncher(alloc)([long, long])
    assert alloc.steps[0].stopped and alloc.steps[0].proc.poll() is not None


def test_sync_root_is_under_home_when_the_nodes_are_other_hosts(tmp_path: Any, monkeypatch: Any) -> None:
    class Remote:
        nodes = ["gpu-node-17"]
        runner = None

    monkeypatch.setenv("HOME", str(tmp_path))
    monkeypatch.delenv("SLURM_CONF", raising=False)
    assert not runs_on_this_host(Remote())
    assert default_sync_root(Remote()) == tmp_path / ".slurmlab" / "sync"
    assert (tmp_path / ".slurmlab" / "sync").is_dir()

    conf = tmp_path / "slurm.conf"
    conf.write_text("NodeName=node1 NodeAddr=127.0.0.1 CPUs=4\n")

    class Runner:
        slurm_conf = str(conf)

    class Sandbox(Remote):
        runner = Runner()

    assert runs_on_this_host(Sandbox()) and default_sync_root(Sandbox()) is None

    # a host name on Debian's 127.0.1.1: the sandbox's nodes are bound there, still this machine
    conf.write_text("NodeName=node1 NodeAddr=127.0.1.1 CPUs=4\nNodeName=node2 NodeAddr=127.0.1.1 CPUs=4\n")
    assert runs_on_this_host(Sandbox())
    # one node elsewhere: not all of them are this machine
    conf.write_text("NodeName=node1 NodeAddr=127.0.1.1 CPUs=4\nNodeName=node2 NodeAddr=10.0.0.7 CPUs=4\n")
    assert not runs_on_this_host(Sandbox())


@pytest.mark.slow
@pytest.mark.skipif(not hasattr(os, "sched_setaffinity"), reason="needs Linux CPU affinity")
def test_without_an_allocation_the_workers_are_local_and_share_one_core() -> None:
    r = run(None, procs=2, duration=0.3, backend="cpu")
    assert isinstance(r, TimesliceResult)
    assert r.meta["launcher"] == "local" and r.backend == "cpu"
    assert len(r.processes) == 2
    assert r.meta["cpu_affinity"][0] == r.meta["cpu_affinity"][1] and len(r.meta["cpu_affinity"][0]) == 1


def test_step_launcher_can_give_each_worker_a_session_of_its_own() -> None:
    alloc = _Launches()
    handles = StepLauncher(alloc, new_session=True)(
        [[sys.executable, "-c", "import os; print(os.getsid(0) == os.getpid())"]]
    )
    assert alloc.calls[0][0][:2] == ["setsid", "--wait"]
    out, _ = handles[0].communicate(timeout=10)
    assert out.strip() == "True"
