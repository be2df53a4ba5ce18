"""Orchestration: plans and their worker commands, a launcher of one's own, and workers that fail."""

from __future__ import annotations

import subprocess
import sys
from collections.abc import Sequence
from pathlib import Path

import pytest

from slurmlab.errors import ExperimentError
from slurmlab.experiments.plan import TimeslicePlan, WorkerPlan, pins_for
from slurmlab.experiments.timeslice import measure
from slurmlab.experiments.workers import LocalLauncher, RunningWorker, run_workers


def test_pins_round_robin() -> None:
    assert pins_for(3, [0]) == ["0", "0", "0"]
    assert pins_for(3, [0, 1]) == ["0", "1", "0"]
    assert pins_for(2, "2-3") == ["2", "3"]
    assert pins_for(2, None) == [None, None]
    with pytest.raises(ExperimentError):
        pins_for(2, [])


def test_plan_argv_is_a_list_with_the_sync_dir() -> None:
    plan = WorkerPlan.of(TimeslicePlan(2, 1.5, "cpu", cores=(0, 1), fma_iters=10, nice=-5))
    argv = plan.argv(1, Path("/tmp/s"))
    assert argv[:3] == [sys.executable, "-m", "slurmlab.experiments.node.worker"]
    assert argv[argv.index("--pin") + 1] == "1"
    assert argv[argv.index("--sync-dir") + 1] == "/tmp/s"
    assert argv[argv.index("--duration") + 1] == "1.5"
    assert argv[argv.index("--nice") + 1] == "-5"


class RecordingLauncher:
    """Another launcher (as an allocation's ``srun --overlap`` one would be): real processes."""

    def __init__(self) -> None:
        self.argvs: list[list[str]] = []

    def __call__(self, argvs: Sequence[Sequence[str]]) -> Sequence[RunningWorker]:
        self.argvs = [list(a) for a in argvs]
        return LocalLauncher()(argvs)


def test_a_custom_launcher_starts_the_workers() -> None:
    launcher = RecordingLauncher()
    r = measure(TimeslicePlan(2, 0.3, "cpu"), launcher)
    assert len(launcher.argvs) == 2
    assert r.labels == ["p0", "p1"]
    assert all(p.runs >= 1 for p in r.processes)
    assert r.meta["window_start_spread_ns"] < 5_000_000  # the workers agreed on T0


class BrokenLauncher:
    """Starts workers that die at once, as a step that Slurm refused would."""

    def __call__(self, argvs: Sequence[Sequence[str]]) -> Sequence[RunningWorker]:
        bad = [list(a) + ["--pin", "99999"] for a in argvs]
        return [subprocess.Popen(a, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True) for a in bad]


def test_a_worker_that_dies_is_reported_with_its_error() -> None:
    with pytest.raises(ExperimentError, match="exited before it was ready"):
        run_workers(WorkerPlan.of(TimeslicePlan(2, 0.2, "cpu")), BrokenLauncher(), ready_timeout=30)


def test_bad_arguments() -> None:
    with pytest.raises(ExperimentError):
        TimeslicePlan(0, 1.0)
    with pytest.raises(ExperimentError):
        TimeslicePlan(1, 0.0)
    # a plan whose backend is not decided yet cannot start workers
    with pytest.raises(ExperimentError, match="still 'auto'"):
        measure(TimeslicePlan(1, 0.2))


def test_sync_folder_under_a_shared_root(tmp_path: Path) -> None:
    launcher = RecordingLauncher()
    r = measure(TimeslicePlan(1, 0.2, "cpu", sync_root=tmp_path), launcher)
    sync = Path(launcher.argvs[0][launcher.argvs[0].index("--sync-dir") + 1])
    assert sync.parent == tmp_path
    assert not sync.exists()  # cleaned up after the run
    assert r.classification == "solo"


def test_the_baseline_worker_does_only_the_fixed_work() -> None:
    workers = WorkerPlan.of(TimeslicePlan(3, 2.0, "cpu", cores=(4,), fma_iters=100, copy_mb=8))
    solo = workers.baseline()
    assert solo.procs == 1 and solo.label(0) == "solo"
    argv = solo.argv(0, Path("/tmp/s"))
    assert argv[argv.index("--duration") + 1] == "0.0" and argv[argv.index("--work-repeats") + 1] == "3"
    assert argv[argv.index("--pin") + 1] == "4" and "--copy-mb" not in argv
    # the measured group keeps the plan's window and copy
    assert "--copy-mb" in workers.argv(2, Path("/tmp/s")) and workers.window_s == 2.0
