"""A node's topology or MIG layout together with the source that answered (models and their display).

Built one way per kind: live from an allocation's node, ``alloc.topology("node1")`` / ``alloc.mig("node1")``;
without one, from a saved capture, a profile or text, ``slurmlab.topology(...)`` / ``slurmlab.mig(...)``.
Evaluated in a notebook, each draws itself (see :mod:`.figure_display`): ``alloc.topology("node1")`` or
``slurmlab.mig("mig-lgi.txt")`` alone shows the figure, its text folded below it.

Sources: ``file`` (a saved capture or profile JSON), ``profile`` (a built-in hardware profile), ``sandbox`` (the
hardware file a slurmlab sandbox writes beside its slurm.conf), ``nvidia-smi`` and ``nvml`` (probes run as steps
on an allocated node). Every result says which source answered and what was tried before it.
"""

from __future__ import annotations

import dataclasses
import html
from collections.abc import Container, Mapping
from dataclasses import dataclass, field
from typing import TypeAlias, TypedDict

from slurmlab.core.gpu.figure_display import FigureHtml, mime_bundle
from slurmlab.core.gpu.mig import GpuInstance, MigLayout
from slurmlab.core.gpu.smi.nvlink import read_nvlink_status
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
    slurm_gpus: tuple[
        int, ...
    ] = ()  # the same GPUs as Slurm's IDX (differs in MIG sandboxes, see gpu_of_idx)
    idx_to_gpu: Mapping[int, int] = field(default_factory=dict)  # Slurm IDX -> topology index where not equal
    tried: tuple[str, ...] = ()  # sources tried first, with why they did not answer
    notes: tuple[str, ...] = ()
    gpu_type: str | None = None  # Slurm's GRES type of the whole GPUs (h100), where the source knows it

    def gpu_of_idx(self, idx: int) -> int:
        """The topology index of the GPU Slurm calls ``IDX:idx`` on this node."""
        return self.idx_to_gpu.get(idx, idx)

    def with_nvlink_text(self, text: str, where: str) -> NodeTopology:
        """A copy whose GPUs carry each link's state from saved ``nvidia-smi nvlink -s`` output; inactive or slow
        links then show in the summary and as red marks on the figure."""
        return dataclasses.replace(
            self,
            topology=self.topology.with_nvlink_status(read_nvlink_status(text, where)),
            detail=f"{self.detail}; link state from nvidia-smi nvlink -s saved in {where}",
        )

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

    def caption(self) -> str:
        """One line over the figure: the node, where the topology came from, and this allocation's GPUs."""
        mine = f"; this allocation's GPUs: {', '.join(map(str, self.gpus))}" if self.gpus else ""
        return f"{self.node or 'topology'} — source: {self.source} ({self.detail}){mine}"

    def _repr_mimebundle_(
        self,
        include: Container[str] | None = None,
        exclude: Container[str] | None = None,
        draw: FigureHtml | None = None,
    ) -> dict[str, str]:
        return mime_bundle(
            self, "topology", self.summary(), self.caption(), draw=draw, include=include, exclude=exclude
        )

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

    def slices(self) -> list[GpuInstance]:
        """The instances this allocation holds (those ``highlight`` names)."""
        return self.layout.matching(self.highlight) if self.highlight else []

    def _mine(self) -> str:
        """This allocation's slices by their one name (:func:`~slurmlab.core.gpu.mig.mig_slice_label`)."""
        found = self.slices()
        named = {k for inst in found for k in ((inst.gpu, inst.placement), (inst.gpu, inst.gi_id), inst.uuid)}
        named |= {ci.uuid for inst in found for ci in inst.compute_instances}
        unmatched = [str(h) for h in self.highlight if h not in named]  # a key no instance of the layout has
        return ", ".join([inst.label for inst in found] + unmatched)

    def summary(self) -> str:
        head = f"MIG layout of {self.node}" if self.node else "MIG layout"
        lines = [f"{head} — source: {self.source} ({self.detail})"]
        if self.highlight:
            lines.append(f"this allocation's slices: {self._mine()}")
        lines.append(self.layout.summary())
        return _with_provenance(lines, self.tried, self.notes)

    __str__ = summary

    def _repr_html_(self) -> str:
        return _pre(self.summary())

    def caption(self) -> str:
        """One line over the figure: the node, where the layout came from, and this allocation's slices."""
        mine = f"; this allocation's slices (outlined): {self._mine()}" if self.highlight else ""
        return f"{self.node or 'MIG layout'} — source: {self.source} ({self.detail}){mine}"

    def _repr_mimebundle_(
        self,
        include: Container[str] | None = None,
        exclude: Container[str] | None = None,
        draw: FigureHtml | None = None,
    ) -> dict[str, str]:
        return mime_bundle(
            self, "mig", self.summary(), self.caption(), draw=draw, include=include, exclude=exclude
        )

    def figure_args(self) -> MigFigureArgs:
        """Arguments of ``slurmlab.viz.mig_figure``: ``mig_figure(**nm.figure_args())``."""
        return {"layout": self.layout, "highlight": self.highlight}
