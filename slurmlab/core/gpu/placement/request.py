"""From a chosen set of GPUs to what a user can ask Slurm for: which GPUs of a node other jobs hold (read from
``scontrol show node -d``: ``GresUsed=gpu:h100:3(IDX:0,2-3)``), and the salloc options that come closest to the
chosen set, with what Slurm cannot do said plainly (it takes a count of GPUs, never their indices).

Pure: reads parsed Slurm records and topologies, returns options and sentences.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass

from slurmlab.core.gpu.devices import format_cpu_list
from slurmlab.core.gpu.mig import is_mig_type
from slurmlab.core.gpu.placement.choice import GpuChoice
from slurmlab.core.gpu.topology import Topology
from slurmlab.core.slurm.models import Node

__all__ = ["INDICES_NOTE", "SallocAdvice", "TakenGpus", "salloc_advice", "taken_on_node"]

INDICES_NOTE = (
    "Slurm cannot be asked for GPU indices: --gpus takes a count (and a type) and -w names the node; "
    "Slurm picks which of the node's free GPUs the job gets."
)
LINKS_NOTE = "Slurm prefers NVLink-joined GPUs only when gres.conf records the NVLinks (Links=)."
CLOSEST_NOTE = "With several tasks add --gpu-bind=closest: each task then gets the GPUs nearest its CPUs."


@dataclass(frozen=True)
class TakenGpus:
    """The GPUs of one node that jobs hold now, as topology indices, and what was read to know it."""

    node: str
    gpus: tuple[int, ...]
    total: int  # GPUs Slurm reports on the node
    notes: tuple[str, ...] = ()

    @property
    def gpus_text(self) -> str:
        return format_cpu_list(self.gpus)

    def line(self) -> str:
        held = (
            f"GPU{'s' if len(self.gpus) > 1 else ''} {self.gpus_text} taken" if self.gpus else "no GPU taken"
        )
        return f"{self.node}: {held} ({self.total} GPUs; from scontrol show node -d)"


def taken_on_node(node: Node, idx_to_gpu: Mapping[int, int] | None = None) -> TakenGpus:
    """The GPUs ``node`` has in use: whole GPUs (``gpu:…(IDX:…)``) and GPUs shared out as shards or MPS.

    ``idx_to_gpu`` maps Slurm's IDX to topology indices where they differ (a MIG sandbox); without it IDX is
    taken as the ``nvidia-smi`` index, which holds when gres.conf lists ``/dev/nvidia0``… in order.
    """
    mapping = dict(idx_to_gpu or {})
    taken: set[int] = set()
    notes: list[str] = []
    skipped: list[str] = []
    for item in node.gres_used:
        if item.name == "gpu":
            if item.type and is_mig_type(item.type) and not mapping:
                # a MIG slice's IDX numbers slices, not GPUs: it would mark the wrong whole GPU
                skipped.append(item.render())
                continue
            taken.update(mapping.get(i, i) for i in item.indices or ())
    shared = sorted(
        i
        for name in ("shard", "mps")
        for i, (used, _) in node.shard_usage(name).items()
        if used is None or used > 0
    )
    # a GPU shared out as shards/MPS cannot be given whole to another job while its shares are held
    shared_idx = [mapping.get(i, i) for i in shared if mapping.get(i, i) not in taken]
    if shared_idx:
        notes.append(
            f"GPU{'s' if len(shared_idx) > 1 else ''} {format_cpu_list(shared_idx)} "
            f"{'are' if len(shared_idx) > 1 else 'is'} shared out (shards/MPS in use): counted as taken"
        )
        taken.update(shared_idx)
    if skipped:
        notes.append(
            f"MIG slices in use ({', '.join(skipped)}) are not whole GPUs: their GPUs are not marked"
        )
    return TakenGpus(node.name, tuple(sorted(taken)), node.gpu_total, tuple(notes))


@dataclass(frozen=True)
class SallocAdvice:
    """Request options (for ``parse_request``) that come closest to a chosen set, and what they can't do."""

    options: tuple[str, ...]
    notes: tuple[str, ...]


def salloc_advice(
    topo: Topology,
    choice: GpuChoice,
    *,
    node: str | None = None,
    gpu_type: str | None = None,
    free: int | None = None,
) -> SallocAdvice:
    """What to ask Slurm for to get ``choice`` (or as close as Slurm allows).

    ``free``: how many GPUs of the node are free now (None: unknown). ``--gres-flags=enforce-binding`` is
    added when the chosen set sits on one NUMA node of several: Slurm then gives only GPUs that gres.conf binds
    to the job's CPUs, so the GPUs of a small job come from one socket.
    """
    n = len(choice.gpus)
    # -N 1: the set is one node's; -w alone only says a node must be among the job's, and --gpus=N then
    # spreads over several nodes when the named one has fewer free (seen on a 22.05 sandbox)
    # option and value apart: the request pipeline reads and renders them (--gpus=h100:4)
    options = ["-N", "1", "--gpus", f"{gpu_type}:{n}" if gpu_type else str(n)]
    if node:
        options = ["-w", node, *options]
    notes = [INDICES_NOTE]
    if free is not None and free == n:
        notes.append(
            f"Only {n} GPUs are free{' on ' + node if node else ''} now ({choice.gpu_list}): those are "
            "the ones Slurm gives, unless another job takes one first."
        )
    if len(choice.numa_groups) == 1 and len(topo.numa_groups()) > 1 and n > 1:
        options.append("--gres-flags=enforce-binding")
        notes.append(
            "--gres-flags=enforce-binding: Slurm gives only GPUs that gres.conf binds (Cores=) to the "
            f"job's CPUs, so the {n} GPUs come from one socket, as {choice.gpu_list} do "
            f"({choice.numa_groups[0]}); the job waits if no socket has {n} free."
        )
    if choice.all_nvlink and not choice.switched and n > 1:
        notes.append(LINKS_NOTE)
    if n > 1:
        notes.append(CLOSEST_NOTE)
    return SallocAdvice(tuple(options), tuple(notes))
