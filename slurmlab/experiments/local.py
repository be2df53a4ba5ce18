"""Run a time-slicing experiment: N workers, one common start, their reports analysed.

The orchestration is shared; only *how* the N worker commands start differs. A launcher
takes the N argv lists and returns N running handles (``poll()``, ``communicate(timeout)``,
``kill()``, as :class:`subprocess.Popen` has). :class:`LocalLauncher` starts local processes;
an allocation can pass a launcher that starts ``srun --overlap`` steps instead.
The workers and the orchestrator meet in a sync folder: each worker writes ``ready.<label>``
after calibrating and compiling, then the orchestrator writes ``t0`` a little in the future.
"""

from __future__ import annotations

import json
import subprocess
import sys
import tempfile
import time
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Protocol

from slurmlab.errors import ExperimentError
from slurmlab.experiments.analysis import TimesliceResult, analyse_reports


class RunningWorker(Protocol):
    def poll(self) -> int | None: ...
    def communicate(self, input: Any = None, timeout: float | None = None) -> tuple[Any, Any]: ...
    def kill(self) -> None: ...


class Launcher(Protocol):
    def __call__(self, argvs: Sequence[Sequence[str]]) -> Sequence[RunningWorker]: ...


class LocalLauncher:
    """Start each worker as a local process (pinning is done by the worker's ``--pin``)."""

    def __call__(self, argvs: Sequence[Sequence[str]]) -> Sequence[RunningWorker]:
        return [
            # a session of its own gives each worker its own scheduler autogroup (see --nice)
            subprocess.Popen(
                list(a), stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, start_new_session=True
            )
            for a in argvs
        ]


@dataclass
class WorkerPlan:
    """What each worker runs: backend, window, fixed work, and where each one is pinned."""

    procs: int
    duration: float = 2.0
    backend: str = "cpu"
    pins: Sequence[str | None] = ()
    fma_iters: int = 0
    copy_mb: int = 0
    threshold_us: float | None = None
    device: int = 0
    nice: int | None = None
    python: str = sys.executable
    labels: Sequence[str] = ()
    work_repeats: int = 1

    def label(self, i: int) -> str:
        return self.labels[i] if i < len(self.labels) else f"p{i}"

    def argv(self, i: int, sync_dir: Path) -> list[str]:
        argv = [
            self.python, "-m", "slurmlab.experiments.worker",
            "--backend", self.backend,
            "--label", self.label(i),
            "--sync-dir", str(sync_dir),
            "--duration", repr(self.duration),
            "--device", str(self.device),
        ]  # fmt: skip
        pin = self.pins[i] if i < len(self.pins) else None
        if pin is not None:
            argv += ["--pin", pin]
        if self.fma_iters:
            argv += ["--fma-iters", str(self.fma_iters)]
            if self.work_repeats > 1:
                argv += ["--work-repeats", str(self.work_repeats)]
        if self.copy_mb:
            argv += ["--copy-mb", str(self.copy_mb)]
        if self.threshold_us is not None:
            argv += ["--threshold-us", repr(self.threshold_us)]
        if self.nice is not None:
            argv += ["--nice", str(self.nice)]
        return argv


def pins_for(procs: int, cores: Sequence[int] | str | None) -> list[str | None]:
    """Worker i goes to ``cores[i % len(cores)]``: one core = all share it; N cores = one each."""
    if cores is None:
        return [None] * procs
    if isinstance(cores, str):
        from slurmlab.experiments.worker import parse_cpus

        cores = sorted(parse_cpus(cores))
    cores = list(cores)
    if not cores:
        raise ExperimentError(
            "no cores given to pin the workers to", hint="give e.g. cores=[0] or cores=[0, 1]"
        )
    return [str(cores[i % len(cores)]) for i in range(procs)]


def _kill_all(handles: Sequence[RunningWorker]) -> None:
    for h in handles:
        if h.poll() is None:
            h.kill()


def run_workers(
    plan: WorkerPlan,
    launcher: Launcher | None = None,
    *,
    ready_timeout: float = 300.0,
    start_margin: float = 0.3,
    sync_root: str | Path | None = None,
) -> list[dict[str, Any]]:
    """Start the plan's workers with ``launcher``, give them a common T0, return their reports.

    The sync folder is made under ``sync_root`` (default: the system temp folder); workers on
    other nodes need it on a filesystem they share with this process.
    """
    launcher = launcher or LocalLauncher()
    with tempfile.TemporaryDirectory(prefix="slurmlab-sync-", dir=sync_root) as tmp:
        sync = Path(tmp)
        sync.chmod(0o755)
        handles = list(launcher([plan.argv(i, sync) for i in range(plan.procs)]))
        try:
            deadline = time.monotonic() + ready_timeout
            while len(list(sync.glob("ready.*"))) < plan.procs:
                dead = [i for i, h in enumerate(handles) if h.poll() is not None]
                if dead:
                    out, err = handles[dead[0]].communicate(timeout=5)
                    raise ExperimentError(
                        f"worker {plan.label(dead[0])} exited before it was ready: {_error_of(out, err)}"
                    )
                if time.monotonic() > deadline:
                    raise ExperimentError(
                        f"only {len(list(sync.glob('ready.*')))} of {plan.procs} workers became ready "
                        f"within {ready_timeout:.0f} s",
                        hint="is the machine overloaded, or the GPU busy compiling?",
                    )
                time.sleep(0.005)
            t0 = time.time_ns() + int(start_margin * 1e9)
            (sync / ".t0.tmp").write_text(str(t0))
            (sync / ".t0.tmp").replace(sync / "t0")
            budget = plan.duration + start_margin + 120.0
            reports = []
            for i, h in enumerate(handles):
                try:
                    out, err = h.communicate(timeout=budget)
                except subprocess.TimeoutExpired as exc:
                    raise ExperimentError(f"worker {plan.label(i)} ran past {budget:.0f} s") from exc
                reports.append(_parse_report(plan.label(i), out, err))
            return reports
        finally:
            _kill_all(handles)


def _error_of(out: str | None, err: str | None) -> str:
    for line in reversed((out or "").splitlines()):
        try:
            data = json.loads(line)
        except ValueError:
            continue
        if isinstance(data, dict) and "error" in data:
            return str(data["error"])
    tail = (err or "").strip().splitlines()[-3:]
    return " | ".join(tail) or "no output"


def _parse_report(label: str, out: str | None, err: str | None) -> dict[str, Any]:
    lines = [ln for ln in (out or "").splitlines() if ln.strip()]
    if not lines:
        raise ExperimentError(f"worker {label} printed no report: {_error_of(out, err)}")
    try:
        data = json.loads(lines[-1])
    except ValueError as exc:
        raise ExperimentError(
            f"worker {label} printed something that is not a JSON report: {lines[-1][:200]!r}"
        ) from exc
    if "error" in data:
        raise ExperimentError(f"worker {label} failed: {data['error']}")
    return dict(data)


def run_timeslice(
    procs: int = 3,
    duration: float = 2.0,
    backend: str = "cpu",
    *,
    cores: Sequence[int] | str | None = None,
    launcher: Launcher | None = None,
    fma_iters: int = 0,
    copy_mb: int = 0,
    solo: bool = False,
    threshold_us: float | None = None,
    device: int = 0,
    nice: int | None = None,
    solo_report: Mapping[str, Any] | None = None,
    sync_root: str | Path | None = None,
) -> TimesliceResult:
    """N workers logging together (and, with ``solo``, one alone first for the fixed-work baseline).

    ``solo_report`` reuses the report of an earlier solo run (same ``fma_iters``) as the baseline.
    """
    if procs < 1:
        raise ExperimentError(f"procs must be at least 1, got {procs}")
    if duration <= 0:
        raise ExperimentError(f"duration must be positive, got {duration}")
    pins = pins_for(procs, cores)
    if solo_report is None and solo and fma_iters:
        solo_plan = WorkerPlan(
            1,
            0.0,
            backend,
            pins[:1],
            fma_iters,
            0,
            threshold_us,
            device,
            nice,
            labels=["solo"],
            work_repeats=3,
        )
        solo_report = run_workers(solo_plan, launcher, sync_root=sync_root)[0]
    plan = WorkerPlan(procs, duration, backend, pins, fma_iters, copy_mb, threshold_us, device, nice)
    reports = run_workers(plan, launcher, sync_root=sync_root)
    result = analyse_reports(reports, solo=solo_report)
    result.meta.update(
        {
            "pins": pins,
            "identity": [r.get("identity") for r in reports],
            "cpu_affinity": [r.get("cpu_affinity") for r in reports],
            "copy": [r.get("copy") for r in reports],
            "late_ns": [r.get("late_ns") for r in reports],
            "nice": [r.get("nice") for r in reports],
            "autogroup": [r.get("autogroup") for r in reports],
        }
    )
    result.meta["reports"] = reports
    result.meta["solo_report"] = solo_report
    return result


def run_local(
    procs: int = 3,
    duration: float = 2.0,
    backend: str = "cpu",
    cores: Sequence[int] | str | None = None,
    **kwargs: Any,
) -> TimesliceResult:
    """:func:`run_timeslice` with local processes."""
    return run_timeslice(procs, duration, backend, cores=cores, launcher=LocalLauncher(), **kwargs)
