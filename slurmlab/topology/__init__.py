"""GPU topology and MIG of an allocation's nodes, and the explanation of its binding.

    from slurmlab.topology import topology, mig, explain_binding
    topology(alloc)          # NodeTopology: .topology, .source ("sandbox" | "nvidia-smi" | "nvml"), .gpus
    mig(alloc)               # NodeMig: .layout, .source, .highlight (the allocation's slices)
    explain_binding(alloc)   # BindingTable: per task GPUs, NUMA, CPU mask, closest/enforce-binding honoured?

Each result has ``figure_args()``: ``slurmlab.viz.topology_figure(**t.figure_args())`` draws it with the
allocation's GPUs (and, for a binding table, the tasks' CPUs) highlighted; this room does not import viz.
Without an allocation: ``from_file(path)`` / ``from_profile("dgx-h100")`` (and ``mig_from_*``).
Nothing here probes hardware at import; the probes run as steps of the allocation.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from slurmlab.topology.binding import BindingTable, explain, explain_binding
from slurmlab.topology.sources import (
    SOURCES,
    NodeMig,
    NodeTopology,
    SourceUnavailable,
    from_file,
    from_profile,
    mig_from_file,
    mig_from_profile,
    node_mig,
    node_topology,
)

if TYPE_CHECKING:
    from slurmlab.slurm.allocation import Allocation

__all__ = ["SOURCES", "BindingTable", "NodeMig", "NodeTopology", "SourceUnavailable", "explain",
           "explain_binding", "from_file", "from_profile", "mig", "mig_from_file", "mig_from_profile", "topology"]


def topology(allocation: Allocation, node: str | None = None, *, source: str = "auto") -> NodeTopology:
    """The GPU topology of an allocated node (default its first), saying which source answered."""
    return node_topology(allocation, node, source=source)


def mig(allocation: Allocation, node: str | None = None, *, source: str = "auto") -> NodeMig:
    """The MIG layout of an allocated node with the allocation's slices highlighted."""
    return node_mig(allocation, node, source=source)
