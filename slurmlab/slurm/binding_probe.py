"""The step that gathers what an allocation's tasks were bound to, and its explanation.

One probe step runs over the allocation's tasks with the job's own GPU request; each task prints its
``SLURM_STEP_GPUS``, ``CUDA_VISIBLE_DEVICES`` and real CPU mask. With each node's topology
(:func:`slurmlab.slurm.probes.node_topology`) and the controller's records, :func:`slurmlab.core.gpu.binding.explain`
judges the binding.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import TYPE_CHECKING

from slurmlab.core.gpu.binding import (
    TASK_REPORT_PREFIX,
    BindingTable,
    explain,
    node_records,
    parse_task_reports,
)
from slurmlab.core.request.step_request import step_args_for
from slurmlab.errors import AllocationError
from slurmlab.slurm.probes import node_topology

if TYPE_CHECKING:
    from slurmlab.slurm.allocation import Allocation

__all__ = ["TASK_PROBE", "explain_binding"]

# Each task prints one JSON line; python3 is what the node has (not this kernel's interpreter).
TASK_PROBE = (
    "import json, os\n"
    "e = os.environ\n"
    "aff = sorted(os.sched_getaffinity(0)) if hasattr(os, 'sched_getaffinity') else None\n"
    "keys = ('SLURM_PROCID', 'SLURMD_NODENAME', 'SLURM_STEP_GPUS', 'SLURM_JOB_GPUS', 'CUDA_VISIBLE_DEVICES',"
    " 'GPU_DEVICE_ORDINAL')\n"
    f"print({TASK_REPORT_PREFIX!r} + json.dumps({{'env': {{k: e.get(k) for k in keys}}, 'affinity': aff,"
    " 'host_cpus': os.cpu_count()}), flush=True)\n"
)


def explain_binding(alloc: Allocation, *, source: str = "auto", step_args: Sequence[str] | None = None
                    ) -> BindingTable:
    """Run a probe step over the allocation's tasks and explain their binding (see
    :func:`slurmlab.core.gpu.binding.explain`); ``source`` is the topology source, as for ``node_topology``.

    The probe step asks what the isolation check's step asks (:func:`step_args_for`: the job's task count and GPU
    request), so that the two describe the same tasks; ``step_args`` replaces those options, e.g. to add
    ``--gpu-bind=closest``. (Adding the job's ``--gpu-bind`` here once made the two disagree: closest binding
    gives each task every GPU of the step near its CPUs, so with ``--gpus-per-task=1`` and two GPUs on one socket
    both tasks saw GPUs 0,1 here while the isolation check's tasks saw one each.)"""
    if not alloc.running:
        raise AllocationError(f"allocation {alloc.job_id} is {alloc.state}, not RUNNING",
                              hint="wait for it: alloc.wait()")
    job = alloc.refresh().job
    if job is None:
        raise AllocationError(f"no detail for allocation {alloc.job_id} yet", hint="try again in a moment")
    tasks = job.num_tasks or len(alloc.nodes) or 1
    # the probe asks for what the job's tasks were granted, or its tasks would see other GPUs
    args = list(step_args) if step_args is not None else step_args_for(job, tasks)
    res = alloc.srun(["python3", "-c", TASK_PROBE], args=args, on_output=lambda *_: None, timeout=120)
    reports = parse_task_reports(res.stdout)
    if not res.ok or not reports:
        raise AllocationError(
            f"the binding probe step failed (exit {res.returncode}): " + " / ".join(res.stderr[-3:]),
            hint="the node needs python3; run alloc.srun(['python3', '-V']) to check",
        )
    topologies = {n: node_topology(alloc, n, source=source) for n in dict.fromkeys(r.node for r in reports)}
    return explain(reports, topologies, node_records(job), tres_bind=job.tres_bind,
                   enforce_binding=bool(job.gres_binding_enforced), job_id=alloc.job_id, step_args=args)
