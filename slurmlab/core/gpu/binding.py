"""The binding of an allocation, judged: per task its GPUs, their NUMA node and CPUs, its CPU mask, and whether
``--gpu-bind=closest`` and ``--gres-flags=enforce-binding`` were honoured.

The evidence comes from two places and the table keeps both: what a step's tasks really got (``SLURM_STEP_GPUS``,
``CUDA_VISIBLE_DEVICES`` and ``os.sched_getaffinity`` printed by each task, read by :func:`parse_task_reports`) and
what the controller recorded (``CPU_IDs`` and ``GRES=…(IDX:…)`` per node in ``scontrol show job -d``, i.e.
``job.gpu_allocs``, read by :func:`node_records`). The judgement (:func:`explain`) is pure and works on constructed
inputs; :func:`slurmlab.slurm.binding_probe.explain_binding` runs the step that gathers them.

The controller's records read the same on every Slurm: CPU_IDs from the text form or from a JSON job's
``job_resources`` (23.02+), shards from 22.05's ``shard:…(IDX:3)`` or 24.11+'s ``shard:…(0/4,…,4/4)`` (a shard task
has no SLURM_STEP_GPUS; its GPU is the one holding the job's shards). Where a fact is missing the verdict is
"unknown" and the row's ``why`` names the fact, never a guess.
"""

from __future__ import annotations

import html
import json
from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass, field

from slurmlab.core.gpu.node_models import NodeTopology, TopologyFigureArgs
from slurmlab.core.gpu.topology import Topology, format_cpu_list, parse_cpu_list
from slurmlab.core.slurm.models import Job
from slurmlab.errors import ParseError

__all__ = ["HONOURED", "NOT_HONOURED", "NOT_REQUESTED", "TASK_REPORT_PREFIX", "UNKNOWN", "BindingFigureArgs",
           "BindingTable", "NodeRecord", "TaskBinding", "TaskReport", "explain", "gpu_bind_value", "node_records",
           "parse_task_reports"]

HONOURED = "honoured"
NOT_HONOURED = "NOT honoured"
NOT_REQUESTED = "not requested"
UNKNOWN = "unknown"

# each task of the probe step prints this, then its report as one JSON line
TASK_REPORT_PREFIX = "SLURMLAB_TASK "


@dataclass(frozen=True)
class TaskReport:
    """What one task of a step saw."""

    rank: int
    node: str
    step_gpus: tuple[int, ...] | None  # SLURM_STEP_GPUS (else SLURM_JOB_GPUS): Slurm's global IDX on the node
    visible: tuple[str, ...] | None  # CUDA_VISIBLE_DEVICES tokens (numbers or GPU-/MIG- UUIDs)
    affinity: frozenset[int] | None  # os.sched_getaffinity of the task
    host_cpus: int | None = None


@dataclass(frozen=True)
class NodeRecord:
    """What the controller recorded for the job on one node (``scontrol show job -d``)."""

    node: str
    gpu_idx: tuple[int, ...]
    cpu_ids: frozenset[int] | None
    shard_gpus: tuple[int, ...] = ()  # GPUs holding the job's shards / MPS share (either Slurm form)


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
    comparable: bool = True  # False: the real mask uses host CPU ids that differ from the topology's (sandbox)


class BindingFigureArgs(TopologyFigureArgs):
    """``topology_figure``'s arguments for a binding: the node's topology, the tasks' GPUs and CPU masks."""

    task_cpus: dict[str, frozenset[int]]


@dataclass(frozen=True)
class BindingTable:
    """Per task binding, plus the highlight inputs for ``topology_figure``."""

    job_id: str | None
    rows: tuple[TaskBinding, ...]
    tres_bind: str | None
    enforce_requested: bool
    records: tuple[NodeRecord, ...] = ()
    topologies: Mapping[str, NodeTopology | Topology] = field(default_factory=dict)
    notes: tuple[str, ...] = ()

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
        return {"topo": topo if isinstance(topo, Topology) else topo.topology,
                "highlight_gpus": self.highlight_gpus(node),
                "task_cpus": self.task_cpus(node)}

    # ---- display -----------------------------------------------------------------------------------
    _HEAD = ("task", "node", "GPUs", "GPU NUMA", "GPU-local CPUs", "task CPU mask", "Slurm CPU_IDs", "closest",
             "enforce-binding")

    def _cells(self, r: TaskBinding) -> tuple[str, ...]:
        return (str(r.rank), r.node, ",".join(map(str, r.gpus)) or "-", r.gpu_numa,
                format_cpu_list(r.gpu_cpus) or "-", _cpus(r.mask), _cpus(r.slurm_cpus), r.closest, r.enforce)

    def _footer(self) -> list[str]:
        lines = [f"--gpu-bind: {self.tres_bind or 'not set'} -> {self.closest}",
                 f"--gres-flags=enforce-binding: {'set' if self.enforce_requested else 'not set'} -> {self.enforce}"]
        for rec in self.records:
            shards = f" shards on GPU {','.join(map(str, rec.shard_gpus))}" if rec.shard_gpus else ""
            lines.append(f"scontrol show job -d: {rec.node} GRES IDX {','.join(map(str, rec.gpu_idx)) or '-'}"
                         f"{shards} CPU_IDs {_cpus(rec.cpu_ids)}")
        for node, topo in self.topologies.items():
            src = getattr(topo, "source", None)
            if src:
                lines.append(f"topology of {node}: {src} ({getattr(topo, 'detail', '')})")
        why = [f"task {r.rank}: {w}" for r in self.rows for w in r.why]
        return lines + why + [f"note: {n}" for n in self.notes]

    def text(self) -> str:
        rows = [self._HEAD] + [self._cells(r) for r in self.rows]
        widths = [max(len(row[i]) for row in rows) for i in range(len(self._HEAD))]
        out = [f"binding of job {self.job_id}"]
        out += ["  ".join(c.ljust(w) for c, w in zip(row, widths, strict=True)).rstrip() for row in rows]
        return "\n".join(out + self._footer())

    __str__ = text

    def _repr_html_(self) -> str:
        head = "".join(f"<th>{html.escape(h)}</th>" for h in self._HEAD)
        body = ""
        for r in self.rows:
            cells = self._cells(r)
            tds = []
            for i, c in enumerate(cells):
                style = ""
                if i >= 7 and c == NOT_HONOURED:
                    style = ' style="color:#B00020;font-weight:bold"'
                elif i >= 7 and c == HONOURED:
                    style = ' style="color:#1B7F3B"'
                tds.append(f"<td{style}>{html.escape(c)}</td>")
            body += "<tr>" + "".join(tds) + "</tr>"
        foot = "".join(f"<li>{html.escape(line)}</li>" for line in self._footer())
        return (f"<div class='slurmlab-binding'><b>binding of job {html.escape(str(self.job_id))}</b>"
                f"<table><thead><tr>{head}</tr></thead><tbody>{body}</tbody></table><ul>{foot}</ul></div>")


def _cpus(s: frozenset[int] | None) -> str:
    return "?" if s is None else (format_cpu_list(s) or "-")


def _overall(values: Iterable[str]) -> str:
    found = set(values)
    for v in (NOT_HONOURED, UNKNOWN, HONOURED):
        if v in found:
            return v
    return NOT_REQUESTED


# ---- reports of the step ----------------------------------------------------------------------------


def _idx_list(text: str | None, what: str) -> tuple[int, ...] | None:
    if text is None or text == "":
        return None
    try:
        return tuple(sorted(parse_cpu_list(text, what=what)))
    except ParseError:
        raise ParseError(what, text, hint="expected GPU indices such as 0,1 or 0-3") from None


def parse_task_reports(lines: Sequence[str]) -> list[TaskReport]:
    """The ``SLURMLAB_TASK {json}`` lines of the probe step (other lines are Slurm's chatter and are ignored)."""
    out = []
    for line in lines:
        if not line.startswith(TASK_REPORT_PREFIX):
            continue
        try:
            data = json.loads(line[len(TASK_REPORT_PREFIX):])
            env = data["env"]
            rank = int(env["SLURM_PROCID"])
            node = str(env["SLURMD_NODENAME"])
        except (ValueError, KeyError, TypeError):
            raise ParseError("task report of the binding probe", line[:300],
                             hint="expected JSON with env.SLURM_PROCID and env.SLURMD_NODENAME") from None
        gpus = _idx_list(env.get("SLURM_STEP_GPUS") or env.get("SLURM_JOB_GPUS"), "SLURM_STEP_GPUS")
        cvd = env.get("CUDA_VISIBLE_DEVICES")
        visible = tuple(t.strip() for t in cvd.split(",") if t.strip()) if isinstance(cvd, str) and cvd else None
        aff = data.get("affinity")
        if aff is not None and not (isinstance(aff, list) and all(isinstance(c, int) for c in aff)):
            raise ParseError("task CPU affinity", repr(aff)[:200], hint="a list of CPU ids")
        host = data.get("host_cpus")
        out.append(TaskReport(rank, node, gpus, visible, frozenset(aff) if aff is not None else None,
                              host if isinstance(host, int) else None))
    return sorted(out, key=lambda t: t.rank)


# ---- the judgement (pure) ---------------------------------------------------------------------------


def _task_idx(rep: TaskReport, notes: list[str], step: tuple[int, ...]) -> tuple[int, ...]:
    """Slurm IDX of the GPUs bound to one task: CUDA_VISIBLE_DEVICES read against the step's GPUs."""
    if rep.visible is None:
        return step
    if not all(t.isdigit() for t in rep.visible):
        # UUIDs (GPU-…/MIG-…): the task's own devices; without a UUID map assume the step's in order
        return step[: len(rep.visible)] if step else ()
    vis = tuple(int(t) for t in rep.visible)
    if step and set(vis) <= set(step):
        return vis  # global numbering: no device cgroup (CUDA_VISIBLE_DEVICES=Slurm's IDX)
    if step and max(vis) < len(step):
        # ConstrainDevices=yes renumbers from 0 inside the step's devices, in the step's order
        return tuple(step[i] for i in vis)
    notes.append(f"task {rep.rank}: CUDA_VISIBLE_DEVICES={','.join(rep.visible)} does not match "
                 f"SLURM_STEP_GPUS={','.join(map(str, step)) or '-'}; taking the step's GPUs")
    return step


def explain(
    reports: Sequence[TaskReport],
    topologies: Mapping[str, NodeTopology | Topology],
    records: Sequence[NodeRecord] = (),
    *,
    tres_bind: str | None = None,
    enforce_binding: bool = False,
    job_id: str | None = None,
) -> BindingTable:
    """Judge the binding from the tasks' reports, each node's topology and the controller's records.

    ``--gpu-bind=closest`` is honoured for a task when its GPUs are exactly the step GPUs whose local CPUs meet
    its CPU mask (all the step's GPUs when none do, as Slurm falls back). Enforce-binding is honoured on a node
    when the CPUs Slurm gave the job (CPU_IDs) and each task's mask lie within the CPUs local to the job's GPUs.
    """
    notes: list[str] = []
    by_node = {r.node: r for r in records}
    closest_wanted = bool(tres_bind and "closest" in tres_bind)
    rows = []
    for rep in reports:
        entry = topologies.get(rep.node)
        topo = _topo_of(entry)
        to_gpu = entry.gpu_of_idx if isinstance(entry, NodeTopology) else _same_gpu
        rec = by_node.get(rep.node)
        # a shard/MPS task gets no SLURM_STEP_GPUS: its GPU is the one Slurm put the job's shares on
        step_idx = rep.step_gpus or (rec.shard_gpus if rec is not None else ())
        idx = _task_idx(rep, notes, step_idx)
        gpus = tuple(to_gpu(i) for i in idx)
        step = tuple(to_gpu(i) for i in step_idx)
        why: list[str] = []
        known = {g.index for g in topo.gpus} if topo is not None else set()
        local: dict[int, frozenset[int]] = {}
        numa: set[int] = set()
        for g in set(gpus) | set(step):
            if g in known and topo is not None:
                gpu = topo.gpu(g)
                local[g] = gpu.cpu_affinity or frozenset()
                if g in gpus:
                    numa |= gpu.numa_affinity or frozenset()
        gpu_cpus = frozenset().union(*(local.get(g, frozenset()) for g in gpus)) if gpus else frozenset()
        slurm_cpus = rec.cpu_ids if rec is not None else None
        mask = rep.affinity
        # a sandbox node claims CPUs the host lacks: its tasks' real masks cannot be compared with the
        # topology's CPU ids, so judge by the CPUs Slurm recorded (CPU_IDs) instead
        comparable = _comparable(rep, topo)
        judge = mask if comparable else slurm_cpus

        missing = _missing_fact(rep, topo, known, step, rec, comparable)
        if not closest_wanted:
            closest = NOT_REQUESTED
        elif missing or judge is None:
            closest = UNKNOWN
            why.append(f"closest: {missing or 'no CPUs to judge by'}")
        else:
            near = tuple(g for g in step if local.get(g, frozenset()) & judge)
            expect = near or step
            closest = HONOURED if set(gpus) == set(expect) else NOT_HONOURED
            if closest == NOT_HONOURED:
                why.append(f"closest: CPUs {format_cpu_list(judge)} are nearest GPU(s) "
                           f"{','.join(map(str, expect))}, but the task got {','.join(map(str, gpus)) or 'none'}")

        if not enforce_binding:
            enforce = NOT_REQUESTED
        elif topo is None or not gpu_cpus and not _node_local(rec, to_gpu, local, topo):
            enforce = UNKNOWN
            why.append("enforce-binding: " + (missing or "the local CPUs of the job's GPUs are unknown"))
        elif slurm_cpus is None and not (comparable and mask is not None):
            # nothing to hold against the GPUs' CPUs: saying "honoured" here would be a guess
            enforce = UNKNOWN
            why.append(f"enforce-binding: {missing or 'no CPUs to judge by'}")
        else:
            allowed = _node_local(rec, to_gpu, local, topo) or gpu_cpus
            bad = []
            if slurm_cpus is not None and not slurm_cpus <= allowed:
                bad.append(f"Slurm CPU_IDs {format_cpu_list(slurm_cpus - allowed)} lie outside the GPUs' CPUs "
                           f"{format_cpu_list(allowed)}")
            if comparable and mask is not None and not mask <= allowed:
                bad.append(f"task mask CPUs {format_cpu_list(mask - allowed)} lie outside the GPUs' CPUs "
                           f"{format_cpu_list(allowed)}")
            enforce = NOT_HONOURED if bad else HONOURED
            why += [f"enforce-binding: {b}" for b in bad]
        rows.append(TaskBinding(rep.rank, rep.node, gpus, ",".join(map(str, sorted(numa))) or "?", gpu_cpus,
                                mask, slurm_cpus, closest, enforce, tuple(why), comparable))
    for rep in reports:
        if not _comparable(rep, _topo_of(topologies.get(rep.node))):
            notes.append(f"{rep.node} has {rep.host_cpus} real CPUs but its topology names more (a sandbox node "
                         "claims CPUs the host lacks): closest/enforce-binding are judged by Slurm's CPU_IDs, "
                         "the task masks are shown as the kernel set them")
    return BindingTable(job_id, tuple(rows), tres_bind, enforce_binding, tuple(records), dict(topologies),
                        tuple(dict.fromkeys(notes)))


def _missing_fact(rep: TaskReport, topo: Topology | None, known: set[int], step: tuple[int, ...],
                  rec: NodeRecord | None, comparable: bool) -> str:
    """Which fact the judgement lacks for this task (empty when it has them all), named so it can be fixed."""
    if topo is None:
        return f"no topology of {rep.node} (topology(alloc) says which sources were tried)"
    absent = [g for g in step if g not in known]
    if absent:
        return f"GPU(s) {','.join(map(str, absent))} of the step are not in {rep.node}'s topology"
    unplaced = [g for g in step if topo.gpu(g).cpu_affinity is None]
    if unplaced:
        return (f"the local CPUs of GPU(s) {','.join(map(str, unplaced))} on {rep.node} are unknown (the topology "
                "source gives none: gres.conf without Cores=, or an empty nvidia-smi topo cell)")
    if comparable:
        return "" if rep.affinity is not None else f"task {rep.rank} reported no CPU mask (sched_getaffinity)"
    if rec is None or rec.cpu_ids is None:
        return (f"Slurm recorded no CPU_IDs for the job on {rep.node} (scontrol show job -d gave neither the "
                "text CPU_IDs= nor JSON job_resources.nodes.allocation[].sockets[].cores[]), and the task's real "
                "mask names host CPUs, not the node's")
    return ""


def _comparable(rep: TaskReport, topo: Topology | None) -> bool:
    """Whether the task's real CPU ids mean the same CPUs as the topology's (not so in a sandbox)."""
    if rep.host_cpus is None or topo is None:
        return True
    top = max((max(g.cpu_affinity) for g in topo.gpus if g.cpu_affinity), default=-1)
    return top < rep.host_cpus


def _same_gpu(idx: int) -> int:
    """A bare topology numbers its GPUs as Slurm's IDX does."""
    return idx


def _topo_of(entry: NodeTopology | Topology | None) -> Topology | None:
    if entry is None or isinstance(entry, Topology):
        return entry
    return entry.topology


def _node_local(rec: NodeRecord | None, to_gpu: Callable[[int], int], local: dict[int, frozenset[int]],
                topo: Topology) -> frozenset[int]:
    """CPUs local to all the job's GPUs on the node (what enforce-binding limits the job's CPUs to)."""
    if rec is None:
        return frozenset()
    out: frozenset[int] = frozenset()
    known = {g.index for g in topo.gpus}
    for i in rec.gpu_idx or rec.shard_gpus:
        g = to_gpu(i)
        if g in known:
            out |= local.get(g) or topo.gpu(g).cpu_affinity or frozenset()
    return out


# ---- the controller's records -----------------------------------------------------------------------


def node_records(job: Job) -> list[NodeRecord]:
    """Per node, what the controller recorded for ``job`` (its ``gpu_allocs``: GRES IDX, CPU_IDs, shards)."""
    out = []
    for a in job.gpu_allocs:
        cpu_ids = parse_cpu_list(a.cpu_ids, what=f"CPU_IDs of {a.node}") if a.cpu_ids else None
        # GresAlloc.shares reads 22.05's shard:…(IDX:3) and 24.11+'s shard:…(0/4,…,4/4) alike
        shards = sorted({i for name in ("shard", "mps") for i in a.shares(name)})
        out.append(NodeRecord(a.node, tuple(a.gpu_indices), cpu_ids, tuple(shards)))
    return out


def gpu_bind_value(tres_bind: str | None) -> str | None:
    """``gres/gpu:closest`` (as the job records it) -> ``closest``; None when GPUs are not bound."""
    if not tres_bind:
        return None
    for part in tres_bind.split(";"):
        part = part.strip()
        if part.startswith("gres/gpu:"):
            return part[len("gres/gpu:"):] or None
        if part.startswith("gpu:"):
            return part[len("gpu:"):] or None
    return None
