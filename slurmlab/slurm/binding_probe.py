"""The step that gathers what an allocation's tasks were bound to, and its explanation (the GPU map).

One probe step (``srun --label``) runs over the allocation's tasks with the job's own GPU request; each task prints
its ``SLURM_STEP_GPUS``, ``CUDA_VISIBLE_DEVICES`` and real CPU mask, and what its own ``nvidia-smi`` lists (``-L``,
and each GPU's UUID with its PCI bus id), as one report in the framing of :mod:`slurmlab.core.framing`. With each
node's topology (:func:`slurmlab.slurm.probes.node_topology`), the names of its devices (the sandbox's hardware
file, else those listings), the GPUs free on it (``scontrol show node -d``) and the controller's records,
:func:`slurmlab.core.gpu.binding.explain` builds the table and flags the traps.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import TYPE_CHECKING

from slurmlab.core.framing import FRAME_SOURCE, has_reports
from slurmlab.core.gpu.binding import (
    BindingTable,
    NodeNames,
    explain,
    names_from_hardware,
    node_records,
    parse_task_reports,
)
from slurmlab.core.request.step_request import step_args_for
from slurmlab.core.slurm.models import Job
from slurmlab.errors import AllocationError, ParseError, SlurmError
from slurmlab.slurm.hardware_files import sandbox_hardware
from slurmlab.slurm.node_queries import show_node
from slurmlab.slurm.probes import node_topology

if TYPE_CHECKING:
    from slurmlab.slurm.allocation import Allocation

__all__ = ["TASK_PROBE", "explain_binding"]

# Each task prints its report in the one framing (slurmlab.core.framing: srun cuts a line longer than 1 KiB and
# mixes its pieces with the other tasks' output, and a report with the 224 CPUs of a DGX H100 or a MIG node's -L is
# longer than that), read back per task from srun's labels; python3 is what the node has (not this kernel's
# interpreter, so the frame function travels as source), and a node without nvidia-smi or one that hangs costs at
# most its timeout.
TASK_PROBE = (
    FRAME_SOURCE + "import os, subprocess\n"
    "e = os.environ\n"
    "aff = sorted(os.sched_getaffinity(0)) if hasattr(os, 'sched_getaffinity') else None\n"
    "keys = ('SLURM_PROCID', 'SLURMD_NODENAME', 'SLURM_STEP_GPUS', 'SLURM_JOB_GPUS', 'CUDA_VISIBLE_DEVICES',"
    " 'GPU_DEVICE_ORDINAL')\n"
    "def smi(*args):\n"
    "    try:\n"
    "        r = subprocess.run(('nvidia-smi',) + args, capture_output=True, text=True, timeout=20)\n"
    "    except (OSError, subprocess.SubprocessError):\n"
    "        return []\n"
    "    return r.stdout.splitlines() if r.returncode == 0 else []\n"
    "pci = []\n"
    "for line in smi('--query-gpu=uuid,pci.bus_id', '--format=csv,noheader'):\n"
    "    parts = [p.strip() for p in line.split(',')]\n"
    "    if len(parts) == 2 and parts[0].startswith('GPU-'):\n"
    "        pci.append(parts)\n"
    "print(frame({'env': {k: e.get(k) for k in keys}, 'affinity': aff, 'host_cpus': os.cpu_count(),"
    " 'L': [line[:500] for line in smi('-L')], 'pci': pci}), flush=True)\n"
)


def explain_binding(
    alloc: Allocation, *, source: str = "auto", step_args: Sequence[str] | None = None
) -> BindingTable:
    """Run a probe step over the allocation's tasks and explain their binding (see
    :func:`slurmlab.core.gpu.binding.explain`); ``source`` is the topology source, as for ``node_topology``.

    The probe step asks what the isolation check's step asks (:func:`step_args_for`: the job's task count and GPU
    request), so that the two describe the same tasks; ``step_args`` replaces those options, e.g. to add
    ``--gpu-bind=closest``. (Adding the job's ``--gpu-bind`` here once made the two disagree: closest binding
    gives each task every GPU of the step near its CPUs, so with ``--gpus-per-task=1`` and two GPUs on one socket
    both tasks saw GPUs 0,1 here while the isolation check's tasks saw one each.)"""
    if not alloc.running:
        raise AllocationError(
            f"allocation {alloc.job_id} is {alloc.state}, not RUNNING", hint="wait for it: alloc.wait()"
        )
    job = alloc.refresh().job
    if job is None:
        raise AllocationError(f"no detail for allocation {alloc.job_id} yet", hint="try again in a moment")
    tasks = job.num_tasks or len(alloc.nodes) or 1
    # the probe asks for what the job's tasks were granted, or its tasks would see other GPUs
    args = list(step_args) if step_args is not None else step_args_for(job, tasks)
    res = alloc.srun(
        ["python3", "-c", TASK_PROBE], args=args, on_output=lambda *_: None, label=True, timeout=120
    )
    # the task count is the job's unless step_args chose another: then every task that printed must report
    count = tasks if step_args is None else None
    # a step that printed no report did not run the probe: Slurm's own words say why
    reports = parse_task_reports(res.stdout, count, stderr=res.stderr) if has_reports(res.stdout) else []
    if not res.ok or not reports:
        raise AllocationError(
            f"the binding probe step failed (exit {res.returncode}): " + " / ".join(res.stderr[-3:]),
            hint="the node needs python3; run alloc.srun(['python3', '-V']) to check",
        )
    nodes = list(dict.fromkeys(r.node for r in reports))
    topologies = {n: node_topology(alloc, n, source=source) for n in nodes}
    return explain(
        reports,
        topologies,
        node_records(job),
        tres_bind=job.tres_bind,
        enforce_binding=bool(job.gres_binding_enforced),
        job_id=alloc.job_id,
        step_args=args,
        names=_sandbox_names(alloc, nodes),
        free_gpus=_free_gpus(alloc, job, nodes),
    )


def _sandbox_names(alloc: Allocation, nodes: Sequence[str]) -> dict[str, NodeNames]:
    """In a slurmlab sandbox, its devices' names from its hardware file (what its stand-in nvidia-smi prints)."""
    try:
        hw = sandbox_hardware(alloc.runner)
    except ParseError:
        return {}  # the topology's own probe says what is wrong with the file
    if hw is None:
        return {}
    return {n: names_from_hardware(hw, n) for n in nodes if n in hw.nodes}


def _free_gpus(alloc: Allocation, job: Job, nodes: Sequence[str]) -> dict[str, frozenset[int]] | None:
    """Per node, the Slurm IDX no other job holds now (``scontrol show node -d``), this job's own included; None
    when Slurm did not say (the no-NVLink trap then says that it does not know whether better GPUs were free)."""
    mine = job.gpus_by_node()
    out: dict[str, frozenset[int]] = {}
    for name in nodes:
        try:
            node = show_node(name, alloc.runner)
        except (SlurmError, ParseError):
            return None
        if node is None:
            return None
        used = {i for idx in node.gpu_used_indices().values() for i in idx}
        out[name] = frozenset(set(range(node.gpu_total)) - used | set(mine.get(name, ())))
    return out
