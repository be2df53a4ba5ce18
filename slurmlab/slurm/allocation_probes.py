"""What an allocation got, measured by probes that run as its steps (:mod:`.probes`, :mod:`.binding_probe`):
GPU topology, MIG layout and binding. A mixin of :class:`~slurmlab.slurm.allocation.Allocation`, kept apart
so the lifecycle class stays readable."""

from __future__ import annotations

from typing import TYPE_CHECKING, cast, overload

from slurmlab.core.gpu.binding import BindingTable
from slurmlab.core.gpu.job_hardware import JobMig, JobTopology
from slurmlab.core.gpu.node_models import NodeMig, NodeTopology
from slurmlab.slurm.binding_probe import explain_binding
from slurmlab.slurm.probes import job_mig, job_topology, node_mig, node_topology

if TYPE_CHECKING:
    from slurmlab.slurm.allocation import Allocation

__all__ = ["AllocationProbes"]


def _allocation(probes: object) -> Allocation:
    return cast("Allocation", probes)  # the mixin is only ever part of an Allocation


class AllocationProbes:
    """Probe methods of an allocation (``self`` is always an :class:`Allocation`)."""

    @overload
    def topology(self, node: None = None, *, source: str = "auto") -> JobTopology: ...
    @overload
    def topology(self, node: str, *, source: str = "auto") -> NodeTopology: ...

    def topology(self, node: str | None = None, *, source: str = "auto") -> JobTopology | NodeTopology:
        """GPU topology of every allocated node (node -> :class:`NodeTopology`), or of ``node`` alone: the
        sandbox's profile, or live (nvidia-smi, then NVML); ``source`` forces one of them.

        In a notebook the answer draws itself, one figure per node with this allocation's GPUs marked::

            alloc.topology()            # every node of the job
            alloc.topology("node2")     # one node
            alloc.topology()["node2"].topology.summary()   # the model behind it
        """
        if node is None:
            return job_topology(_allocation(self), source=source)
        return node_topology(_allocation(self), node, source=source)

    @overload
    def mig(self, node: None = None, *, source: str = "auto") -> JobMig: ...
    @overload
    def mig(self, node: str, *, source: str = "auto") -> NodeMig: ...

    def mig(self, node: str | None = None, *, source: str = "auto") -> JobMig | NodeMig:
        """MIG layout of every allocated node with MIG (node -> :class:`NodeMig`), or of ``node`` alone, with
        this allocation's slices outlined; ``source`` forces ``sandbox`` or ``nvidia-smi``.

        In a notebook the answer draws itself (the slice grid of each GPU; slices are named
        ``GPU 0 · 3g.71gb @ 4:4``: GPU, profile, placement in memory slices)::

            alloc.mig()                 # every node of the job with MIG
            alloc.mig("node1")          # one node

        A saved capture draws the same way: ``slurmlab.mig_from_file("mig-lgi.txt")``; to place the figure
        yourself: ``slurmlab.viz.mig_figure(**alloc.mig("node1").figure_args())``.
        """
        if node is None:
            return job_mig(_allocation(self), source=source)
        return node_mig(_allocation(self), node, source=source)

    def explain_binding(self, *, source: str = "auto") -> BindingTable:
        """Per task and per GPU every name of the GPU, with the known traps flagged; per task its GPUs' NUMA node and
        CPUs, its CPU mask, and whether binding was honoured."""
        return explain_binding(_allocation(self), source=source)

    def gpu_map(self, *, source: str = "auto") -> BindingTable:
        """Per task, per GPU: Slurm IDX, the index the task sees, UUID, PCI bus id, NUMA node, CPU mask and NVLink
        peers in the allocation, with the known traps flagged (the table :meth:`explain_binding` gives)."""
        return explain_binding(_allocation(self), source=source)
