"""Time-slicing inside an allocation: N workers sharing one GPU (or one CPU core).

:func:`run` is the entry point a notebook calls, with a :class:`~.plan.TimeslicePlan` (or its fields
as keywords). With an allocation each worker is a step (``srun --jobid=J --overlap -n1 -N1 -w NODE
…``) on the allocation's first node; without one the workers are local processes. Either way the
plan is placed where the workers run and :func:`measure` starts them, gives them one common start
T0 and analyses their reports, so a sandbox run and a local run of the same plan are judged by the
same numbers.

Which processor the workers share:

- ``backend="cpu"``: one CPU core. A first small step reports the CPUs the step may use on the
  node (its affinity, inside the job's cpuset on a real cluster); the workers pin themselves to
  the first of them (``cores``: a list of CPUs, or a count taken from the front of that list).
- ``backend="cupy"``: one GPU, ``device`` (an ordinal of the step's ``CUDA_VISIBLE_DEVICES``);
  every worker step asks for the same GPUs, so the ordinal names the same physical GPU.
- ``backend="auto"``: cupy when the node's Python sees a GPU through CuPy, else cpu.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import replace
from typing import Any

from slurmlab.errors import ExperimentError
from slurmlab.experiments.analysis import analyse_reports
from slurmlab.experiments.node.worker import cpu_affinity, pick_backend
from slurmlab.experiments.plan import TimeslicePlan, WorkerPlan, choose_cores
from slurmlab.experiments.protocols import ExperimentAllocation
from slurmlab.experiments.steps import StepLauncher, default_sync_root, probe_node, step_gpu_args
from slurmlab.experiments.timeslice_result import TimesliceResult
from slurmlab.experiments.workers import Launcher, LocalLauncher, run_workers

__all__ = ["TimeslicePlan", "measure", "run"]


def run(
    allocation: ExperimentAllocation | None = None, plan: TimeslicePlan | None = None, **fields: Any
) -> TimesliceResult:
    """N workers sharing one GPU (cupy) or one CPU core (cpu) of ``allocation`` (or of this machine).

    Give a ``plan``, or its fields as keywords: ``run(alloc, procs=3, duration=2, backend="cpu")``
    (see :class:`~.plan.TimeslicePlan` for each of them).
    """
    if plan is None:
        plan = TimeslicePlan(**fields)
    elif fields or not isinstance(plan, TimeslicePlan):
        raise ExperimentError(
            "give a TimeslicePlan or the plan's fields as keywords, not both",
            hint="e.g. run(alloc, TimeslicePlan(procs=3)) or run(alloc, procs=3)",
        )
    if allocation is None:
        return _run_here(plan)
    return _run_in(allocation, plan)


def _run_here(plan: TimeslicePlan) -> TimesliceResult:
    backend = pick_backend(plan.backend)
    cores = choose_cores(plan.cores, cpu_affinity()) if backend == "cpu" else None
    result = measure(replace(plan, backend=backend, cores=cores), LocalLauncher())
    result.meta.update({"launcher": "local"})
    return result


def _run_in(allocation: ExperimentAllocation, plan: TimeslicePlan) -> TimesliceResult:
    if allocation.state != "RUNNING":
        raise ExperimentError(
            f"allocation {allocation.job_id} is {allocation.state}, not RUNNING",
            hint="wait for it (alloc.wait()) or make a new one with %salloc",
        )
    nodes = list(allocation.nodes or [])
    node = plan.node or (nodes[0] if nodes else None)
    if node is not None and nodes and node not in nodes:
        raise ExperimentError(f"node {node!r} is not in allocation {allocation.job_id}: {nodes}")
    python = plan.python or allocation.runner.python()
    probe = probe_node(allocation, node, python)
    backend = probe["backend"] if plan.backend == "auto" else plan.backend
    cores = choose_cores(plan.cores, probe.get("cpus") or []) if backend == "cpu" else None
    sync_root = plan.sync_root if plan.sync_root is not None else default_sync_root(allocation)
    placed = replace(plan, backend=backend, cores=cores, node=node, sync_root=sync_root, python=python)
    args = [
        "-n1",
        "-N1",
        *(["-w", node] if node else []),
        *step_gpu_args(allocation.job, node),
        *plan.step_args,
    ]
    launcher = StepLauncher(allocation, args, new_session=plan.nice is not None)
    result = measure(placed, launcher)
    result.meta.update(
        {
            "launcher": "steps",
            "job_id": str(allocation.job_id),
            "node": node,
            "step_args": args,
            "probe": probe,
            "step_argv": [h.argv for h in launcher.started],
        }
    )
    return result


def measure(
    plan: TimeslicePlan, launcher: Launcher | None = None, *, solo_report: Mapping[str, Any] | None = None
) -> TimesliceResult:
    """Run a placed plan: its workers logging together (and, with ``solo``, one alone first for the
    fixed-work baseline), then the analysis of their reports.

    ``solo_report`` reuses the report of an earlier solo run (same ``fma_iters``) as the baseline.
    """
    workers = WorkerPlan.of(plan)
    if solo_report is None and plan.solo and plan.fma_iters:
        solo_report = run_workers(workers.baseline(), launcher)[0]
    reports = run_workers(workers, launcher)
    result = analyse_reports(reports, solo=solo_report)
    result.meta.update(
        {
            "pins": list(workers.pins),
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
