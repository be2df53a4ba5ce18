"""What a time-slicing run does, as one object: :class:`TimeslicePlan`, and the worker commands it becomes.

A plan is made once, where the user's choices arrive (a notebook call, ``%gpu_timeslice``, ``slurmlab
timeslice``), is checked there, and travels unchanged through the orchestration. Where the workers run
decides two things the plan may leave open, the backend (``auto``) and the CPUs of the cpu backend; the
orchestration fills them in with :func:`dataclasses.replace` (a *placed* plan) and :class:`WorkerPlan`
turns a placed plan into the argv of each worker.
"""

from __future__ import annotations

import sys
from collections.abc import Sequence
from dataclasses import dataclass, replace
from pathlib import Path

from slurmlab.core.gpu.devices import format_cpu_list, parse_cpu_list
from slurmlab.errors import ExperimentError

__all__ = ["BACKENDS", "WORKER_MODULE", "TimeslicePlan", "WorkerPlan", "choose_cores", "pins_for"]

BACKENDS = ("auto", "cpu", "cupy")
# what every worker runs, on whichever machine: python -m WORKER_MODULE …
WORKER_MODULE = "slurmlab.experiments.node.worker"

Cores = tuple[int, ...] | str | int | None


@dataclass(frozen=True)
class TimeslicePlan:
    """N workers sharing one GPU (cupy) or one CPU core (cpu) for ``duration`` seconds.

    ``backend``: ``auto`` (cupy when the workers' machine sees a GPU through CuPy, else cpu), ``cpu``
    or ``cupy``. ``cores``: the CPUs of the cpu backend — a count taken from the front of the CPUs the
    workers may use, a cpulist string (``"0,2"``) or CPU numbers; None lets :func:`.timeslice.run`
    take one core (all workers share it, so they are time-sliced), while a placed plan with None
    leaves the workers unpinned. ``node``: which allocated node (default the first). ``device``: the
    GPU ordinal the cupy workers share. ``step_args``: more srun options for every worker step.
    ``fma_iters``: fixed work per worker, for the slowdown (``solo``: measure it alone first, the
    baseline). ``copy_mb``: a copy-bandwidth buffer per worker. ``threshold_us``: the switch
    threshold (default: from each worker's calibration). ``nice``: the workers' niceness (negative
    needs privilege; refusal is recorded), the guard against other load on a shared machine.
    ``sync_root``: where the workers meet (a folder the nodes share; default: chosen from where the
    workers run). ``python``: the interpreter that runs the workers.
    """

    procs: int = 3
    duration: float = 2.0
    backend: str = "auto"
    cores: Cores = None
    node: str | None = None
    device: int = 0
    step_args: tuple[str, ...] = ()
    fma_iters: int = 0
    copy_mb: int = 0
    solo: bool = False
    threshold_us: float | None = None
    nice: int | None = None
    sync_root: str | Path | None = None
    # the workers' Python (None: on the nodes the allocation's runner names, Runner.python; here this one)
    python: str | None = None

    def __post_init__(self) -> None:
        if self.procs < 1:
            raise ExperimentError(f"procs must be at least 1, got {self.procs}")
        if self.backend not in BACKENDS:
            raise ExperimentError(f"unknown backend {self.backend!r}", hint="use auto, cpu or cupy")
        if not self.duration > 0:
            raise ExperimentError(f"duration must be positive, got {self.duration}")
        if isinstance(self.cores, int) and not isinstance(self.cores, bool) and self.cores < 1:
            raise ExperimentError(f"cores must be at least 1, got {self.cores}")
        # frozen: the normalised forms are set once, here (lists from callers become tuples)
        if self.cores is not None and not isinstance(self.cores, str | int):
            object.__setattr__(self, "cores", tuple(int(c) for c in self.cores))
        object.__setattr__(self, "step_args", tuple(str(a) for a in self.step_args))

    @property
    def placed(self) -> bool:
        """True once the backend is decided (the workers can be started)."""
        return self.backend != "auto"


def choose_cores(cores: Cores, available: Sequence[int]) -> tuple[int, ...]:
    """The CPUs the cpu workers are pinned to, out of those the workers may use (``available``)."""
    if cores is None:
        cores = 1
    if isinstance(cores, int):
        if cores < 1:
            raise ExperimentError(f"cores must be at least 1, got {cores}")
        if cores > len(available):
            raise ExperimentError(
                f"asked for {cores} cores but the step may use only {len(available)}: {list(available)}",
                hint="ask the allocation for more CPUs (-c / --cpus-per-task) or use fewer cores",
            )
        return tuple(available[:cores])
    chosen = sorted(parse_cpu_list(cores, what="--cores CPU list")) if isinstance(cores, str) else list(cores)
    missing = [c for c in chosen if c not in available]
    if not chosen or missing:
        raise ExperimentError(
            f"CPU(s) {format_cpu_list(missing) or cores!r} are not available here "
            f"(this process may use {format_cpu_list(available)})",
            hint="give CPUs from that list, e.g. --cores 0 or --cores 0,1",
        )
    return tuple(chosen)


def pins_for(procs: int, cores: Cores) -> list[str | None]:
    """Worker i goes to ``cores[i % len(cores)]``: one core = all share it; N cores = one each."""
    if cores is None:
        return [None] * procs
    if isinstance(cores, int):
        cores = (cores,)
    elif isinstance(cores, str):
        cores = tuple(sorted(parse_cpu_list(cores, what="CPU list")))
    if not cores:
        raise ExperimentError(
            "no cores given to pin the workers to", hint="give e.g. cores=[0] or cores=[0, 1]"
        )
    return [str(cores[i % len(cores)]) for i in range(procs)]


@dataclass(frozen=True)
class WorkerPlan:
    """The command of each worker of one group: a placed plan, a pin per worker, and the group's labels.

    Made from a plan with :meth:`of` (the measured group) or :meth:`baseline` (one worker alone, doing
    only the fixed work, three times, keeping its best).
    """

    plan: TimeslicePlan
    pins: tuple[str | None, ...]
    labels: tuple[str, ...] = ()
    duration: float | None = None  # the logging window, when not the plan's (the baseline logs none)
    work_repeats: int = 1

    @classmethod
    def of(cls, plan: TimeslicePlan) -> WorkerPlan:
        if not plan.placed:
            raise ExperimentError(
                "the plan's backend is still 'auto'",
                hint="decide cpu or cupy where the workers run (timeslice.run does) before starting them",
            )
        return cls(plan, tuple(pins_for(plan.procs, plan.cores)))

    def baseline(self) -> WorkerPlan:
        # the fixed work alone: no logging window, no copy, the best of three tries
        return WorkerPlan(replace(self.plan, copy_mb=0), self.pins[:1], ("solo",), 0.0, 3)

    @property
    def procs(self) -> int:
        return len(self.pins)

    @property
    def window_s(self) -> float:
        return self.plan.duration if self.duration is None else self.duration

    def label(self, i: int) -> str:
        return self.labels[i] if i < len(self.labels) else f"p{i}"

    def argv(self, i: int, sync_dir: Path) -> list[str]:
        plan = self.plan
        argv = [
            plan.python or sys.executable, "-m", WORKER_MODULE,
            "--backend", plan.backend,
            "--label", self.label(i),
            "--sync-dir", str(sync_dir),
            "--duration", repr(self.window_s),
            "--device", str(plan.device),
        ]  # fmt: skip
        pin = self.pins[i] if i < len(self.pins) else None
        if pin is not None:
            argv += ["--pin", pin]
        if plan.fma_iters:
            argv += ["--fma-iters", str(plan.fma_iters)]
            if self.work_repeats > 1:
                argv += ["--work-repeats", str(self.work_repeats)]
        if plan.copy_mb:
            argv += ["--copy-mb", str(plan.copy_mb)]
        if plan.threshold_us is not None:
            argv += ["--threshold-us", repr(plan.threshold_us)]
        if plan.nice is not None:
            argv += ["--nice", str(plan.nice)]
        return argv
