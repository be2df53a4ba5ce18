"""Start N workers, give them one common start, collect their reports.

Only *how* the N worker commands start differs between a laptop and an allocation. A launcher
takes the N argv lists and returns N running handles (``poll()``, ``communicate(timeout)``,
``kill()``, as :class:`subprocess.Popen` has). :class:`LocalLauncher` starts local processes;
:class:`slurmlab.experiments.steps.StepLauncher` starts ``srun --overlap`` steps instead.
The workers and the orchestrator meet in a sync folder: each worker writes ``ready.<label>``
after calibrating and compiling, then the orchestrator writes ``t0`` a little in the future. The folder is a
:class:`SyncFolder`: a local one (:class:`LocalSyncFolder`, on a filesystem this process shares with the
workers), or one a launcher makes where its workers are (``launcher.sync_folder(root)``: over SSH, on the
cluster, :class:`slurmlab.experiments.steps.RemoteSyncFolder`).
"""

from __future__ import annotations

import json
import shutil
import subprocess
import tempfile
import time
from collections.abc import Sequence
from pathlib import Path
from typing import Any, Protocol

from slurmlab.errors import ExperimentError
from slurmlab.experiments.plan import WorkerPlan

__all__ = ["Launcher", "LocalLauncher", "LocalSyncFolder", "RunningWorker", "SyncFolder", "run_workers"]


class RunningWorker(Protocol):
    def poll(self) -> int | None: ...
    def communicate(self, input: Any = None, timeout: float | None = None) -> tuple[Any, Any]: ...
    def kill(self) -> None: ...


class Launcher(Protocol):
    def __call__(self, argvs: Sequence[Sequence[str]]) -> Sequence[RunningWorker]: ...


class SyncFolder(Protocol):
    """Where the workers and the orchestrator meet: ``path`` as the workers are given it (``--sync-dir``);
    ``poll_s``: how often :meth:`ready` is asked while the workers get ready."""

    path: str
    poll_s: float

    def ready(self) -> int:
        """How many workers wrote ``ready.<label>``."""
        ...

    def start_at(self, margin_s: float) -> None:
        """Write ``t0``: ``margin_s`` from now on the workers' clock."""
        ...

    def close(self) -> None:
        """Remove the folder."""
        ...


class LocalSyncFolder:
    """A sync folder on this machine's filesystem (the temp folder, or ``root``: one the nodes share)."""

    poll_s = 0.005  # a directory read

    def __init__(self, root: str | Path | None = None) -> None:
        self.path = tempfile.mkdtemp(prefix="slurmlab-sync-", dir=root)
        Path(self.path).chmod(0o755)

    def ready(self) -> int:
        return len(list(Path(self.path).glob("ready.*")))

    def start_at(self, margin_s: float) -> None:
        t0 = time.time_ns() + int(margin_s * 1e9)
        (Path(self.path) / ".t0.tmp").write_text(str(t0))
        (Path(self.path) / ".t0.tmp").replace(Path(self.path) / "t0")

    def close(self) -> None:
        shutil.rmtree(self.path, ignore_errors=True)


class LocalLauncher:
    """Start each worker as a local process (pinning is done by the worker's ``--pin``)."""

    def __call__(self, argvs: Sequence[Sequence[str]]) -> Sequence[RunningWorker]:
        return [
            # a session of its own gives each worker its own scheduler autogroup (see --nice)
            subprocess.Popen(
                list(a),
                stdout=subprocess.PIPE,
                stderr=subprocess.PIPE,
                encoding="utf-8",
                errors="replace",
                start_new_session=True,
            )
            for a in argvs
        ]


def _kill_all(handles: Sequence[RunningWorker]) -> None:
    for h in handles:
        if h.poll() is None:
            h.kill()


def run_workers(
    workers: WorkerPlan,
    launcher: Launcher | None = None,
    *,
    ready_timeout: float = 300.0,
    start_margin: float = 0.3,
) -> list[dict[str, Any]]:
    """Start the workers with ``launcher``, give them a common T0, return their reports.

    The sync folder is the launcher's (``launcher.sync_folder(root)``), else made here under the plan's
    ``sync_root`` (default: the system temp folder); workers on other nodes need it on a filesystem they share
    with this process.
    """
    launcher = launcher or LocalLauncher()
    make_folder = getattr(launcher, "sync_folder", None)
    root = workers.plan.sync_root
    sync: SyncFolder = make_folder(root) if callable(make_folder) else LocalSyncFolder(root)
    try:
        handles = list(launcher([workers.argv(i, Path(sync.path)) for i in range(workers.procs)]))
        try:
            deadline = time.monotonic() + ready_timeout
            while (ready := sync.ready()) < workers.procs:
                dead = [i for i, h in enumerate(handles) if h.poll() is not None]
                if dead:
                    out, err = handles[dead[0]].communicate(timeout=5)
                    raise ExperimentError(
                        f"worker {workers.label(dead[0])} exited before it was ready: {_error_of(out, err)}"
                    )
                if time.monotonic() > deadline:
                    raise ExperimentError(
                        f"only {ready} of {workers.procs} workers became ready within {ready_timeout:.0f} s",
                        hint="is the machine overloaded, or the GPU busy compiling?",
                    )
                time.sleep(sync.poll_s)
            sync.start_at(start_margin)
            budget = workers.window_s + start_margin + 120.0
            reports = []
            for i, h in enumerate(handles):
                try:
                    out, err = h.communicate(timeout=budget)
                except subprocess.TimeoutExpired as exc:
                    raise ExperimentError(f"worker {workers.label(i)} ran past {budget:.0f} s") from exc
                reports.append(_parse_report(workers.label(i), out, err))
            return reports
        finally:
            _kill_all(handles)
    finally:
        sync.close()


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
