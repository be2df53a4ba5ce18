"""The binding of an allocation as a table: per task and per GPU the names of that GPU (Slurm IDX, the index the
task sees, UUID, PCI bus id), its NUMA node, the task's CPU mask and the GPU's NVLink peers in the allocation, with
the known traps flagged (:class:`Trap`); then per task the verdicts on ``--gpu-bind=closest`` and
``--gres-flags=enforce-binding``. Shown as text or HTML and handed to ``topology_figure``."""

from __future__ import annotations

import html
from collections.abc import Container, Iterable, Mapping
from dataclasses import dataclass, field

from slurmlab.core.gpu.binding.evidence import NodeRecord
from slurmlab.core.gpu.devices import format_cpu_list
from slurmlab.core.gpu.figure_display import FigureHtml, mime_bundle
from slurmlab.core.gpu.node_models import NodeTopology, TopologyFigureArgs
from slurmlab.core.gpu.topology import Topology
from slurmlab.core.html_cells import td, th
from slurmlab.core.palette import FAILED, FLAGGED_BACKGROUND, OK

__all__ = [
    "HONOURED",
    "NOT_HONOURED",
    "NOT_REQUESTED",
    "UNKNOWN",
    "BindingFigureArgs",
    "BindingTable",
    "GpuRow",
    "TaskBinding",
    "Trap",
]

HONOURED = "honoured"
NOT_HONOURED = "NOT honoured"
NOT_REQUESTED = "not requested"
UNKNOWN = "unknown"


@dataclass(frozen=True)
class TaskBinding:
    rank: int
    node: str
    gpus: tuple[int, ...]  # topology indices of the task's GPUs
    gpu_numa: str  # their NUMA node(s)
    gpu_cpus: frozenset[int]  # CPUs local to those GPUs (topology / gres.conf Cores)
    mask: frozenset[int] | None  # the task's real CPU mask
    slurm_cpus: frozenset[int] | None  # CPU_IDs Slurm recorded for the job on the node
    closest: str
    enforce: str
    why: tuple[str, ...] = ()
    comparable: bool = (
        True  # False: the real mask uses host CPU ids that differ from the topology's (sandbox)
    )


@dataclass(frozen=True)
class GpuRow:
    """One GPU of one task, by all its names."""

    rank: int
    node: str
    idx: int | None  # Slurm's IDX on the node (SLURM_STEP_GPUS, GRES=…(IDX:…))
    seen_as: int | None  # the index the task sees: cuda:N (its place in CUDA_VISIBLE_DEVICES)
    token: str | None  # its CUDA_VISIBLE_DEVICES entry (a number, GPU-… or MIG-…)
    uuid: str | None
    pci_bus_id: str | None
    numa: str  # the GPU's NUMA node(s), "?" when unknown
    gpu: int | None  # its topology index (the parent GPU of a MIG slice)
    mask: frozenset[int] | None  # the task's CPU mask
    peers: tuple[
        tuple[int, int], ...
    ] = ()  # (Slurm IDX, NVLinks) of the allocation's other GPUs joined by NVLink
    mig: str | None = None  # the MIG slice, None for a whole GPU
    mask_is_slurms: bool = (
        False  # the mask is Slurm's CPU_IDs for the job (a sandbox task's real one names host CPUs)
    )


@dataclass(frozen=True)
class Trap:
    """A known binding trap found in the table: what is wrong, in one line, and what to do."""

    kind: str  # far-socket, split-NUMA, no-NVLink, per-task-GPUs
    node: str
    ranks: tuple[int, ...]
    why: str
    fix: str

    def line(self) -> str:
        return f"TRAP {self.kind}: {self.why}. Fix: {self.fix}"


class BindingFigureArgs(TopologyFigureArgs):
    """``topology_figure``'s arguments for a binding: the node's topology, the tasks' GPUs and CPU masks."""

    task_cpus: dict[str, frozenset[int]]


@dataclass(frozen=True)
class BindingTable:
    """The GPU map (per task, per GPU: ``gpu_rows``, with the ``traps`` found in them), the binding verdicts per
    task (``rows``), and the highlight inputs for ``topology_figure``."""

    job_id: str | None
    rows: tuple[TaskBinding, ...]
    tres_bind: str | None
    enforce_requested: bool
    records: tuple[NodeRecord, ...] = ()
    topologies: Mapping[str, NodeTopology | Topology] = field(default_factory=dict)
    notes: tuple[str, ...] = ()
    gpu_rows: tuple[GpuRow, ...] = ()
    traps: tuple[Trap, ...] = ()

    @property
    def closest(self) -> str:
        return _overall(r.closest for r in self.rows)

    @property
    def enforce(self) -> str:
        return _overall(r.enforce for r in self.rows)

    def nodes(self) -> list[str]:
        return list(dict.fromkeys(r.node for r in self.rows))

    def highlight_gpus(self, node: str | None = None) -> tuple[int, ...]:
        node = node or (self.nodes() or [""])[0]
        return tuple(sorted({g for r in self.rows if r.node == node for g in r.gpus}))

    def task_cpus(self, node: str | None = None) -> dict[str, frozenset[int]]:
        """``task N`` -> its CPU mask on ``node`` (the ``task_cpus`` argument of ``topology_figure``).

        Where the real masks use other CPU ids than the topology (a sandbox node), the tasks are drawn with the
        CPUs Slurm recorded for the job on the node (CPU_IDs), labelled so.
        """
        node = node or (self.nodes() or [""])[0]
        rows = [r for r in self.rows if r.node == node]
        out = {f"task {r.rank}": r.mask for r in rows if r.comparable and r.mask is not None}
        other = [r for r in rows if not r.comparable and r.slurm_cpus is not None]
        if other:
            ranks = format_cpu_list(r.rank for r in other)
            out[f"task {ranks} (Slurm CPU_IDs)"] = other[0].slurm_cpus or frozenset()
        return out

    def figure_args(self, node: str | None = None) -> BindingFigureArgs:
        """Arguments of ``slurmlab.viz.topology_figure`` for ``node`` (default the first): its topology, the
        tasks' GPUs highlighted and their CPU masks: ``topology_figure(**table.figure_args())``."""
        node = node or (self.nodes() or [""])[0]
        topo = self.topologies.get(node)
        if topo is None:
            raise KeyError(f"no topology for node {node!r} (nodes: {', '.join(self.topologies)})")
        return {
            "topo": topo if isinstance(topo, Topology) else topo.topology,
            "highlight_gpus": self.highlight_gpus(node),
            "task_cpus": self.task_cpus(node),
        }

    # ---- display -----------------------------------------------------------------------------------
    _HEAD = (
        "task",
        "node",
        "GPUs",
        "GPU NUMA",
        "GPU-local CPUs",
        "task CPU mask",
        "Slurm CPU_IDs",
        "closest",
        "enforce-binding",
    )

    def _cells(self, r: TaskBinding) -> tuple[str, ...]:
        return (
            str(r.rank),
            r.node,
            ",".join(map(str, r.gpus)) or "-",
            r.gpu_numa,
            format_cpu_list(r.gpu_cpus) or "-",
            _cpus(r.mask),
            _cpus(r.slurm_cpus),
            r.closest,
            r.enforce,
        )

    def _footer(self) -> list[str]:
        lines = [
            f"--gpu-bind: {self.tres_bind or 'not set'} -> {self.closest}",
            f"--gres-flags=enforce-binding: {'set' if self.enforce_requested else 'not set'} -> {self.enforce}",
        ]
        for rec in self.records:
            shards = f" shards on GPU {','.join(map(str, rec.shard_gpus))}" if rec.shard_gpus else ""
            lines.append(
                f"scontrol show job -d: {rec.node} GRES IDX {','.join(map(str, rec.gpu_idx)) or '-'}"
                f"{shards} CPU_IDs {_cpus(rec.cpu_ids)}"
            )
        for node, topo in self.topologies.items():
            src = getattr(topo, "source", None)
            if src:
                lines.append(f"topology of {node}: {src} ({getattr(topo, 'detail', '')})")
        why = [f"task {r.rank}: {w}" for r in self.rows for w in r.why]
        return lines + why + [f"note: {n}" for n in self.notes]

    _GPU_HEAD = (
        "task",
        "node",
        "Slurm IDX",
        "task sees",
        "CUDA_VISIBLE_DEVICES",
        "UUID",
        "PCI bus id",
        "NUMA",
        "task CPU mask",
        "NVLink peers (IDX)",
        "traps",
    )

    def _gpu_cells(self, g: GpuRow) -> tuple[str, ...]:
        peers = ", ".join(f"{i} (NV{n})" for i, n in g.peers) or ("none (MIG slice)" if g.mig else "none")
        uuid = (g.uuid or "?") + (f" [{g.mig}]" if g.mig else "")
        traps = ", ".join(t.kind for t in self.traps_of(g)) or "-"
        return (
            str(g.rank),
            g.node,
            _num(g.idx),
            "-" if g.seen_as is None else f"cuda:{g.seen_as}",
            g.token or "(unset)",
            uuid,
            g.pci_bus_id or "?",
            g.numa,
            _cpus(g.mask) + (" (Slurm CPU_IDs)" if g.mask_is_slurms else ""),
            peers,
            traps,
        )

    def traps_of(self, g: GpuRow) -> list[Trap]:
        """The traps that concern this GPU row (its task on its node)."""
        return [t for t in self.traps if t.node == g.node and g.rank in t.ranks]

    def text(self) -> str:
        out = [f"GPU map of job {self.job_id}: per task, per GPU"] if self.gpu_rows else []
        if self.gpu_rows:
            out += _columns([self._GPU_HEAD] + [self._gpu_cells(g) for g in self.gpu_rows])
            out += [t.line() for t in self.traps] or ["no known trap found"]
        out.append(f"binding of job {self.job_id}")
        out += _columns([self._HEAD] + [self._cells(r) for r in self.rows])
        return "\n".join(out + self._footer())

    __str__ = text

    def _gpu_html(self) -> str:
        if not self.gpu_rows:
            return ""
        head = "".join(th(h) for h in self._GPU_HEAD)
        body = ""
        for g in self.gpu_rows:
            flagged = bool(self.traps_of(g))
            style = f' style="background:{FLAGGED_BACKGROUND}"' if flagged else ""
            body += f"<tr{style}>" + "".join(td(html.escape(c)) for c in self._gpu_cells(g)) + "</tr>"
        traps = "".join(
            f"<li class='slurmlab-trap' style='color:{FAILED}'><b>{html.escape(t.kind)}</b>: "
            f"{html.escape(t.why)}. <i>Fix:</i> {html.escape(t.fix)}</li>"
            for t in self.traps
        )
        return (
            f"<b>GPU map of job {html.escape(str(self.job_id))}: per task, per GPU</b>"
            f"<table class='slurmlab-gpu-map'><thead><tr>{head}</tr></thead><tbody>{body}</tbody></table>"
            f"<ul>{traps or '<li>no known trap found</li>'}</ul>"
        )

    def _repr_html_(self) -> str:
        head = "".join(th(h) for h in self._HEAD)  # left-aligned (slurmlab.core.html_cells)
        body = ""
        for r in self.rows:
            cells = self._cells(r)
            tds = []
            for i, c in enumerate(cells):
                style = ""
                if i >= 7 and c == NOT_HONOURED:
                    style = f"color:{FAILED};font-weight:bold"
                elif i >= 7 and c == HONOURED:
                    style = f"color:{OK}"
                tds.append(td(html.escape(c), style))
            body += "<tr>" + "".join(tds) + "</tr>"
        # a sandbox's limits stand out where a reader would take the table for a real cluster's
        foot = "".join(
            f"<li class='slurmlab-sandbox-note'>{html.escape(line)}</li>"
            if line.startswith("note: sandbox:")
            else f"<li>{html.escape(line)}</li>"
            for line in self._footer()
        )
        return (
            f"<div class='slurmlab-binding'>{self._gpu_html()}<b>binding of job {html.escape(str(self.job_id))}</b>"
            f"<table><thead><tr>{head}</tr></thead><tbody>{body}</tbody></table><ul>{foot}</ul></div>"
        )

    def _repr_mimebundle_(
        self,
        include: Container[str] | None = None,
        exclude: Container[str] | None = None,
        draw: FigureHtml | None = None,
    ) -> dict[str, str]:
        """In a notebook: the table, then per node its topology with the tasks' GPUs and CPUs marked."""
        caption = (
            "per node: the tasks' GPUs highlighted, their CPUs coloured (the figures of figure_args(node))"
        )
        return mime_bundle(
            self,
            "binding",
            self.text(),
            caption,
            html_text=self._repr_html_(),
            text_first=True,
            draw=draw,
            include=include,
            exclude=exclude,
        )


def _columns(rows: list[tuple[str, ...]]) -> list[str]:
    widths = [max(len(row[i]) for row in rows) for i in range(len(rows[0]))]
    return ["  ".join(c.ljust(w) for c, w in zip(row, widths, strict=True)).rstrip() for row in rows]


def _num(n: int | None) -> str:
    return "?" if n is None else str(n)


def _cpus(s: frozenset[int] | None) -> str:
    return "?" if s is None else (format_cpu_list(s) or "-")


def _overall(values: Iterable[str]) -> str:
    found = set(values)
    for v in (NOT_HONOURED, UNKNOWN, HONOURED):
        if v in found:
            return v
    return NOT_REQUESTED
