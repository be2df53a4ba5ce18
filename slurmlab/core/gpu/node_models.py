"""A node's topology or MIG layout together with the source that answered (models and their display).

Sources: ``file`` (a saved capture or profile JSON), ``profile`` (a built-in hardware profile), ``sandbox`` (the
hardware file a slurmlab sandbox writes beside its slurm.conf), ``nvidia-smi`` and ``nvml`` (probes run as steps
on an allocated node). Every result says which source answered and what was tried before it.
"""

from __future__ import annotations

import html
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import TypeAlias, TypedDict

from slurmlab.core.gpu.mig import MigLayout
from slurmlab.core.gpu.topology import Topology

__all__ = ["SOURCES", "MigFigureArgs", "MigHighlight", "NodeMig", "NodeTopology", "TopologyFigureArgs"]

SOURCES = ("file", "profile", "sandbox", "nvidia-smi", "nvml")

# an instance to highlight: (GPU index, "start:size") of its placement, or its MIG UUID
MigHighlight: TypeAlias = "tuple[int, str] | str"


class TopologyFigureArgs(TypedDict):
    """The arguments ``slurmlab.viz.topology_figure`` takes from a node's topology."""

    topo: Topology
    highlight_gpus: tuple[int, ...]


class MigFigureArgs(TypedDict):
    """The arguments ``slurmlab.viz.mig_figure`` takes from a node's MIG layout."""

    layout: MigLayout
    highlight: tuple[MigHighlight, ...]


def _with_provenance(lines: list[str], tried: tuple[str, ...], notes: tuple[str, ...]) -> str:
    """A summary's lines followed by the sources tried first and the notes."""
    return "\n".join(lines + [f"tried first: {t}" for t in tried] + [f"note: {n}" for n in notes])


def _pre(text: str) -> str:
    return f"<pre>{html.escape(text)}</pre>"


@dataclass(frozen=True)
class NodeTopology:
    """A node's topology, the source it came from, and (for an allocation) the GPUs it holds there."""

    topology: Topology
    source: str  # one of SOURCES
    detail: str  # what exactly answered: "profile dgx-h100 of the sandbox in /tmp/…", "nvidia-smi topo -m on node1"
    node: str | None = None
    gpus: tuple[int, ...] = ()  # the allocation's GPUs on this node, as topology indices
    slurm_gpus: tuple[int, ...] = ()  # the same GPUs as Slurm's IDX (differs in MIG sandboxes, see gpu_of_idx)
    idx_to_gpu: Mapping[int, int] = field(default_factory=dict)  # Slurm IDX -> topology index where not equal
    tried: tuple[str, ...] = ()  # sources tried first, with why they did not answer
    notes: tuple[str, ...] = ()
    gpu_type: str | None = None  # Slurm's GRES type of the whole GPUs (h100), where the source knows it

    def gpu_of_idx(self, idx: int) -> int:
        """The topology index of the GPU Slurm calls ``IDX:idx`` on this node."""
        return self.idx_to_gpu.get(idx, idx)

    def summary(self) -> str:
        head = f"topology of {self.node}" if self.node else "topology"
        lines = [f"{head} — source: {self.source} ({self.detail})"]
        if self.gpus:
            lines.append(f"this allocation's GPUs here: {', '.join(map(str, self.gpus))}")
        lines.append(self.topology.summary())
        return _with_provenance(lines, self.tried, self.notes)

    __str__ = summary

    def _repr_html_(self) -> str:
        return _pre(self.summary())

    def figure_args(self) -> TopologyFigureArgs:
        """Arguments of ``slurmlab.viz.topology_figure``: ``topology_figure(**nt.figure_args())``."""
        return {"topo": self.topology, "highlight_gpus": self.gpus}


@dataclass(frozen=True)
class NodeMig:
    """A node's MIG layout, its source, and the instances this allocation holds (keys for ``mig_figure``)."""

    layout: MigLayout
    source: str
    detail: str
    node: str | None = None
    highlight: tuple[MigHighlight, ...] = ()  # (gpu, "start:size") pairs or MIG UUIDs
    tried: tuple[str, ...] = ()
    notes: tuple[str, ...] = ()

    def summary(self) -> str:
        head = f"MIG layout of {self.node}" if self.node else "MIG layout"
        lines = [f"{head} — source: {self.source} ({self.detail})"]
        if self.highlight:
            lines.append("this allocation's instances: " + ", ".join(
                f"GPU {h[0]} at {h[1]}" if isinstance(h, tuple) else str(h) for h in self.highlight))
        lines.append(self.layout.summary())
        return _with_provenance(lines, self.tried, self.notes)

    __str__ = summary

    def _repr_html_(self) -> str:
        return _pre(self.summary())

    def figure_args(self) -> MigFigureArgs:
        """Arguments of ``slurmlab.viz.mig_figure``: ``mig_figure(**nm.figure_args())``."""
        return {"layout": self.layout, "highlight": self.highlight}
