"""Time-slicing inside an allocation: N workers sharing one GPU (or one CPU core).

:func:`run` is the entry point a notebook calls. With an allocation each worker is a step
(``srun --jobid=J --overlap -n1 -N1 -w NODE …``) on the allocation's first node; without one
(or when ``allocation=None``) the workers are local processes. Either way the orchestration,
the common start T0 and the analysis are those of :mod:`.local`, so a sandbox run and a local
run of the same plan are judged by the same numbers.

Which processor the workers share:

- ``backend="cpu"``: one CPU core. A first small step reports the CPUs the step may use on the
  node (its affinity, inside the job's cpuset on a real cluster); the workers pin themselves to
  the first of them (``cores=``: a list of CPUs, or a count taken from the front of that list).
- ``backend="cupy"``: one GPU, ``device`` (an ordinal of the step's ``CUDA_VISIBLE_DEVICES``);
  every worker step asks for the same GPUs, so the ordinal names the same physical GPU.
- ``backend="auto"``: cupy when the node's Python sees a GPU through CuPy, else cpu.
"""

from __future__ import annotations

import json
import sys
from collections.abc import Sequence
from pathlib import Path
from typing import Any

from slurmlab.core.gpu.topology import format_cpu_list, parse_cpu_list
from slurmlab.errors import ExperimentError
from slurmlab.experiments.analysis import TimesliceResult
from slurmlab.experiments.local import LocalLauncher, run_timeslice
from slurmlab.experiments.steps import StepLauncher, default_sync_root

__all__ = ["probe_node", "run", "step_gpu_args"]

_PROBE = (
    "import json, os, socket\n"
    "from slurmlab.experiments.worker import cpu_affinity, pick_backend\n"
    "print(json.dumps({'cpus': cpu_affinity(), 'backend': pick_backend('auto'),\n"
    "                  'node': os.environ.get('SLURMD_NODENAME') or socket.gethostname(),\n"
    "                  'cuda_visible_devices': os.environ.get('CUDA_VISIBLE_DEVICES')}))\n"
)


def step_gpu_args(job: Any, node: str | None) -> list[str]:
    """The GPU request each worker step repeats so that all of them see the same GPUs.

    A job that asked GPUs per job (``--gpus=N``) must name GPUs in an ``--overlap`` step on
    Slurm 22.05; asking for all of the job's GPUs on the node keeps ``CUDA_VISIBLE_DEVICES`` (and
    so ``--device``) the same in every worker. Jobs that asked per node or per task hand the
    step their GPUs without a request. Shards and MPS are never handed over unasked: each step
    asks for the job's count (a job's shards sit on one GPU per node, so all see that GPU).
    """
    if job is None:
        return []
    args = []
    per_job = [g for g in getattr(job, "tres_per_job", ()) or () if getattr(g, "name", None) == "gpu"]
    if per_job:
        on_node = (job.gpus_by_node() or {}).get(node or "", ()) if hasattr(job, "gpus_by_node") else ()
        count = len(on_node) or sum(int(g.count or 1) for g in per_job)
        args.append(f"--gpus={count}")
    for field in ("tres_per_task", "tres_per_node", "tres_per_job"):
        for g in getattr(job, field, ()) or ():
            if getattr(g, "name", None) in ("shard", "mps"):
                args.append(f"--gres={g.name}:{int(g.count or 1)}")
    return args


def probe_node(allocation: Any, node: str | None = None, python: str = sys.executable) -> dict[str, Any]:
    """What a one-task step on ``node`` sees: its CPUs, the backend it would pick, its node name."""
    args = ["-n1", "-N1", *(["-w", node] if node else []), *step_gpu_args(allocation.job, node)]
    result = allocation.srun([python, "-c", _PROBE], args=args, on_output=lambda s, ln: None, timeout=120)
    lines = [ln for ln in result.stdout if ln.strip().startswith("{")]
    if result.returncode != 0 or not lines:
        raise ExperimentError(
            f"the probe step in allocation {allocation.job_id} failed (exit {result.returncode}): "
            + " | ".join((result.stderr or result.stdout)[-3:]),
            hint="can the allocation's nodes run this Python (with slurmlab installed)? "
            "pass python=… for another interpreter",
        )
    probe: dict[str, Any] = json.loads(lines[-1])
    return probe


def _choose_cores(cores: Sequence[int] | str | int | None, available: Sequence[int]) -> list[int] | str:
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
        return list(available[:cores])
    chosen = sorted(parse_cpu_list(cores, what="--cores CPU list")) if isinstance(cores, str) else list(cores)
    missing = [c for c in chosen if c not in available]
    if not chosen or missing:
        raise ExperimentError(
            f"CPU(s) {format_cpu_list(missing) or cores!r} are not available here "
            f"(this process may use {format_cpu_list(available)})",
            hint="give CPUs from that list, e.g. --cores 0 or --cores 0,1",
        )
    return chosen


def run(
    allocation: Any = None,
    procs: int = 3,
    duration: float = 2.0,
    backend: str = "auto",
    *,
    cores: Sequence[int] | str | int | None = None,
    node: str | None = None,
    device: int = 0,
    step_args: Sequence[str] = (),
    fma_iters: int = 0,
    solo: bool = False,
    threshold_us: float | None = None,
    nice: int | None = None,
    sync_root: str | Path | None = None,
) -> TimesliceResult:
    """N workers sharing one GPU (cupy) or one CPU core (cpu) of ``allocation`` (or of this machine).

    ``cores``: CPUs for the cpu backend — a list, a cpulist string, or a count (default 1: all
    workers on one core, so they are time-sliced; ``cores=2`` with 2 workers runs them side by
    side). ``node``: which allocated node (default the first). ``step_args``: more srun options
    for every worker step. ``nice``: workers' niceness (negative needs privilege; refusal is
    recorded), the guard against other load on a shared machine.
    """
    if procs < 1:
        raise ExperimentError(f"procs must be at least 1, got {procs}")
    if backend not in ("auto", "cpu", "cupy"):
        raise ExperimentError(f"unknown backend {backend!r}", hint="use auto, cpu or cupy")
    if allocation is None:
        from slurmlab.experiments.worker import cpu_affinity, pick_backend

        chosen = pick_backend(backend)
        pins = _choose_cores(cores, cpu_affinity()) if chosen == "cpu" else None
        result = run_timeslice(
            procs, duration, chosen, cores=pins, launcher=LocalLauncher(), fma_iters=fma_iters, solo=solo,
            threshold_us=threshold_us, device=device, nice=nice, sync_root=sync_root,
        )  # fmt: skip
        result.meta.update({"launcher": "local"})
        return result

    if getattr(allocation, "state", "RUNNING") != "RUNNING":
        raise ExperimentError(
            f"allocation {getattr(allocation, 'job_id', '?')} is {allocation.state}, not RUNNING",
            hint="wait for it (alloc.wait()) or make a new one with %salloc",
        )
    nodes = list(getattr(allocation, "nodes", []) or [])
    node = node or (nodes[0] if nodes else None)
    if node is not None and nodes and node not in nodes:
        raise ExperimentError(f"node {node!r} is not in allocation {allocation.job_id}: {nodes}")
    probe = probe_node(allocation, node)
    chosen = probe["backend"] if backend == "auto" else backend
    pins = _choose_cores(cores, probe.get("cpus") or []) if chosen == "cpu" else None
    args = ["-n1", "-N1", *(["-w", node] if node else []), *step_gpu_args(allocation.job, node), *step_args]
    launcher = StepLauncher(allocation, args, new_session=nice is not None)
    root = sync_root if sync_root is not None else default_sync_root(allocation)
    result = run_timeslice(
        procs, duration, chosen, cores=pins, launcher=launcher, fma_iters=fma_iters, solo=solo,
        threshold_us=threshold_us, device=device, nice=nice, sync_root=root,
    )  # fmt: skip
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
