"""The hardware of every node of a job: node -> its topology, node -> its MIG layout.

``alloc.topology()`` and ``alloc.mig()`` answer with these (``alloc.topology("node2")`` with one node's
:class:`~slurmlab.core.gpu.node_models.NodeTopology`). Each maps node names to the per-node models, in the job's
node order, and says which nodes gave no answer and why. Evaluated in a notebook it draws one figure per node.
"""

from __future__ import annotations

import html
from collections.abc import Container, Iterator, Mapping
from dataclasses import dataclass, field
from typing import Generic, TypeVar

from slurmlab.core.gpu.figure_display import FigureHtml, mime_bundle
from slurmlab.core.gpu.node_models import MigFigureArgs, NodeMig, NodeTopology, TopologyFigureArgs

__all__ = ["JobMig", "JobTopology"]

N = TypeVar("N", NodeTopology, NodeMig)


@dataclass(frozen=True)
class _PerNode(Mapping[str, N], Generic[N]):
    job_id: str | None
    per_node: Mapping[str, N]  # in the job's node order
    missing: Mapping[str, str] = field(default_factory=dict)  # node -> why no source answered for it

    _WHAT = "hardware"

    def __getitem__(self, node: str) -> N:
        try:
            return self.per_node[node]
        except KeyError:
            why = self.missing.get(node)
            known = ", ".join(self.per_node) or "none"
            raise KeyError(
                f"no {self._WHAT} of {node!r} in job {self.job_id}"
                + (f": {why}" if why else f" (its nodes with one: {known})")
            ) from None

    def __iter__(self) -> Iterator[str]:
        return iter(self.per_node)

    def __len__(self) -> int:
        return len(self.per_node)

    def node(self, node: str | None = None) -> N:
        """One node's model (default the job's first)."""
        if node is None:
            if not self.per_node:
                raise KeyError(f"no {self._WHAT} of any node of job {self.job_id}")
            return next(iter(self.per_node.values()))
        return self[node]

    def summary(self) -> str:
        head = f"{self._WHAT} of job {self.job_id}: {len(self.per_node)} node(s)"
        parts = [head] + [v.summary() for v in self.per_node.values()]
        parts += [f"{node}: no {self._WHAT} ({why})" for node, why in self.missing.items()]
        return "\n\n".join(parts)

    __str__ = summary

    def __repr__(self) -> str:
        return f"<{type(self).__name__} of job {self.job_id}: {', '.join(self.per_node) or 'no nodes'}>"

    def _repr_html_(self) -> str:
        return f"<pre>{html.escape(self.summary())}</pre>"

    def caption(self) -> str:
        missing = f"; no answer from {', '.join(self.missing)}" if self.missing else ""
        return f"{self._WHAT} of job {self.job_id}: one figure per node ({', '.join(self.per_node)}){missing}"


@dataclass(frozen=True)
class JobTopology(_PerNode[NodeTopology]):
    """Node -> :class:`NodeTopology` for every node of a job (this job's GPUs marked on each)."""

    _WHAT = "topology"

    def figure_args(self, node: str | None = None) -> TopologyFigureArgs:
        """``slurmlab.viz.topology_figure``'s arguments for one node (default the first)."""
        return self.node(node).figure_args()

    def _repr_mimebundle_(
        self,
        include: Container[str] | None = None,
        exclude: Container[str] | None = None,
        draw: FigureHtml | None = None,
    ) -> dict[str, str]:
        return mime_bundle(
            self, "job-topology", self.summary(), self.caption(), draw=draw, include=include, exclude=exclude
        )


@dataclass(frozen=True)
class JobMig(_PerNode[NodeMig]):
    """Node -> :class:`NodeMig` for every node of a job with MIG (this job's slices outlined on each)."""

    _WHAT = "MIG layout"

    def figure_args(self, node: str | None = None) -> MigFigureArgs:
        """``slurmlab.viz.mig_figure``'s arguments for one node (default the first)."""
        return self.node(node).figure_args()

    def _repr_mimebundle_(
        self,
        include: Container[str] | None = None,
        exclude: Container[str] | None = None,
        draw: FigureHtml | None = None,
    ) -> dict[str, str]:
        return mime_bundle(
            self, "job-mig", self.summary(), self.caption(), draw=draw, include=include, exclude=exclude
        )
