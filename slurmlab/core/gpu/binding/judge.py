"""The binding of an allocation, judged: per task and per GPU every name of that GPU (Slurm IDX, the index the task
sees, UUID, PCI bus id), its NUMA node, the task's CPU mask and the GPU's NVLink peers in the allocation, with the
known traps flagged (:mod:`.traps`); per task whether ``--gpu-bind=closest`` and
``--gres-flags=enforce-binding`` were honoured.

The evidence comes from two places and the table keeps both: what a step's tasks really got (``SLURM_STEP_GPUS``,
``CUDA_VISIBLE_DEVICES`` and ``os.sched_getaffinity`` printed by each task, read by :func:`parse_task_reports`) and
what the controller recorded (``CPU_IDs`` and ``GRES=…(IDX:…)`` per node in ``scontrol show job -d``, i.e.
``job.gpu_allocs``, read by :func:`node_records`). The judgement (:func:`explain`) is pure and works on constructed
inputs; :func:`slurmlab.slurm.binding_probe.explain_binding` runs the step that gathers them.

The controller's records read the same on every Slurm: CPU_IDs from the text form or from a JSON job's
``job_resources`` (23.02+), shards from 22.05's ``shard:…(IDX:3)`` or 24.11+'s ``shard:…(0/4,…,4/4)`` (a shard task
has no SLURM_STEP_GPUS; its GPU is the one holding the job's shards). Where a fact is missing the verdict is
"unknown" and the row's ``why`` names the fact, never a guess.

``CUDA_VISIBLE_DEVICES`` may hold numbers, GPU UUIDs (Slurm 26.05 ``env_uuid``) or MIG UUIDs; :mod:`.identity`
resolves each entry to the node's GPU. The evidence lives in :mod:`.evidence` and the table in :mod:`.table`; the
package (:mod:`slurmlab.core.gpu.binding`) offers the public names of all of them.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass

from slurmlab.core.gpu.binding.evidence import (
    NodeRecord,
    TaskReport,
    gpu_bind_value,
)
from slurmlab.core.gpu.binding.identity import (
    NodeNames,
    SeenGpu,
    idx_to_gpu_map,
    listed_gpu_uuids,
    names_from_tasks,
    resolve_visible,
)
from slurmlab.core.gpu.binding.table import (
    HONOURED,
    NOT_HONOURED,
    NOT_REQUESTED,
    UNKNOWN,
    BindingTable,
    GpuRow,
    TaskBinding,
)
from slurmlab.core.gpu.binding.traps import find_traps
from slurmlab.core.gpu.devices import format_cpu_list
from slurmlab.core.gpu.node_models import NodeTopology
from slurmlab.core.gpu.sandbox_limits import sandbox_notes
from slurmlab.core.gpu.topology import Topology

__all__ = ["explain"]


def explain(
    reports: Sequence[TaskReport],
    topologies: Mapping[str, NodeTopology | Topology],
    records: Sequence[NodeRecord] = (),
    *,
    tres_bind: str | None = None,
    enforce_binding: bool = False,
    job_id: str | None = None,
    step_args: Sequence[str] = (),
    sandbox: bool | None = None,
    names: Mapping[str, NodeNames] | None = None,
    free_gpus: Mapping[str, frozenset[int]] | None = None,
) -> BindingTable:
    """Judge the binding from the tasks' reports, each node's topology and the controller's records.

    ``--gpu-bind=closest`` is honoured for a task when its GPUs are among the step GPUs whose local CPUs meet its
    CPU mask (a task bound per task, ``--gpus-per-task``, holds one of them), or are all the step's GPUs when
    none does, as Slurm falls back. This is what the isolation check I7 asks too (task CPUs local to its GPUs).
    Enforce-binding is honoured on a node when the CPUs Slurm gave the job (CPU_IDs) and each task's mask lie
    within the CPUs local to the job's GPUs.

    ``step_args``: the srun options of the step the reports come from, named in the notes. ``sandbox``: the
    reports come from a slurmlab sandbox (None: when a node's topology came from one), which the notes say
    cannot show what a real cluster would (:mod:`.sandbox_limits`). ``names``: per node, what its devices are
    called (the sandbox's hardware file; by default read from the topology's UUIDs and the tasks' own
    ``nvidia-smi -L``). ``free_gpus``: per node the Slurm IDX free there, for the no-NVLink trap (None: unknown).
    """
    notes: list[str] = []
    if step_args:
        notes.append(f"the tasks are those of one step: srun {' '.join(step_args)}")
    bind = gpu_bind_value(tres_bind)
    if bind and not any(a.startswith("--gpu-bind") for a in step_args) and step_args:
        notes.append(
            f"the job asked --gpu-bind={bind}; this step, as %gpu_isolation's, repeats the job's GPU "
            "request without it, so each task holds what that request gives it; run "
            f"`%srun --gpu-bind={bind} …` to see Slurm's {bind} binding of a step (for closest: every GPU "
            "of the step near the task's CPUs)"
        )
    if sandbox is None:
        sandbox = any(isinstance(t, NodeTopology) and t.source == "sandbox" for t in topologies.values())
    if sandbox:
        notes += sandbox_notes()
    by_node = {r.node: r for r in records}
    closest_wanted = bool(tres_bind and "closest" in tres_bind)
    seen = _seen_by_task(reports, topologies, by_node, names or {}, notes)
    rows = [
        _judge_task(
            rep,
            topologies.get(rep.node),
            by_node.get(rep.node),
            seen[rep.rank],
            closest_wanted,
            enforce_binding,
        )
        for rep in reports
    ]
    gpu_rows = _gpu_rows(reports, rows, seen, topologies, by_node)
    traps = find_traps(
        gpu_rows,
        rows,
        {n: _topo_of(t) for n, t in topologies.items()},
        {n: idx_to_gpu_map(t) for n, t in topologies.items()},
        _alloc_idx(reports, by_node),
        free_gpus,
    )
    for rep in reports:
        if not _comparable(rep, _topo_of(topologies.get(rep.node))):
            notes.append(
                f"{rep.node} has {rep.host_cpus} real CPUs but its topology names more (a sandbox node "
                "claims CPUs the host lacks): closest/enforce-binding are judged by Slurm's CPU_IDs, "
                "the task masks are shown as the kernel set them"
            )
    return BindingTable(
        job_id,
        tuple(rows),
        tres_bind,
        enforce_binding,
        tuple(records),
        dict(topologies),
        tuple(dict.fromkeys(notes)),
        tuple(gpu_rows),
        tuple(traps),
    )


def _step_idx(rep: TaskReport, rec: NodeRecord | None) -> tuple[int, ...]:
    """The step's GPUs on the task's node, as Slurm's IDX: a shard/MPS task gets no SLURM_STEP_GPUS, its GPU is
    the one Slurm put the job's shares on."""
    return rep.step_gpus or (rec.shard_gpus if rec is not None else ())


def _seen_by_task(
    reports: Sequence[TaskReport],
    topologies: Mapping[str, NodeTopology | Topology],
    by_node: Mapping[str, NodeRecord],
    names: Mapping[str, NodeNames],
    notes: list[str],
) -> dict[int, list[SeenGpu]]:
    """Per task rank, the devices it sees (its CUDA_VISIBLE_DEVICES resolved to the node's GPUs)."""
    out: dict[int, list[SeenGpu]] = {}
    for node in dict.fromkeys(r.node for r in reports):
        mine = [r for r in reports if r.node == node]
        entry = topologies.get(node)
        rec = by_node.get(node)
        step = tuple(dict.fromkeys(i for r in mine for i in _step_idx(r, rec)))
        known = names.get(node) or names_from_tasks(node, mine, entry, (rec.gpu_idx if rec else ()) or step)
        for rep in mine:
            out[rep.rank], said = resolve_visible(
                rep.visible,
                _step_idx(rep, rec),
                known,
                idx_to_gpu_map(entry),
                rep.rank,
                listed_gpu_uuids(rep.smi_list),
            )
            notes += said
    return out


def _alloc_idx(
    reports: Sequence[TaskReport], by_node: Mapping[str, NodeRecord]
) -> dict[str, tuple[int, ...]]:
    """The allocation's GPUs per node as Slurm's IDX: the controller's record, else the tasks' step GPUs."""
    out: dict[str, tuple[int, ...]] = {}
    for rep in reports:
        rec = by_node.get(rep.node)
        idx = rec.gpu_idx if rec is not None and rec.gpu_idx else _step_idx(rep, rec)
        out[rep.node] = tuple(dict.fromkeys(out.get(rep.node, ()) + tuple(idx)))
    return out


def _gpu_rows(
    reports: Sequence[TaskReport],
    tasks: Sequence[TaskBinding],
    seen: Mapping[int, list[SeenGpu]],
    topologies: Mapping[str, NodeTopology | Topology],
    by_node: Mapping[str, NodeRecord],
) -> list[GpuRow]:
    """Per task, per GPU it sees: every name of that GPU, its NUMA node, the task's mask and its NVLink peers."""
    alloc = _alloc_idx(reports, by_node)
    out = []
    for rep, task in zip(reports, tasks, strict=True):
        entry = topologies.get(rep.node)
        topo, to_gpu = _topo_of(entry), idx_to_gpu_map(entry)
        known = {g.index for g in topo.gpus} if topo is not None else set()
        mask = rep.affinity if task.comparable else task.slurm_cpus
        for s in seen[rep.rank]:
            n = s.name
            gpu = topo.gpu(n.gpu) if topo is not None and n.gpu in known and n.gpu is not None else None
            numa = format_cpu_list(gpu.numa_affinity) if gpu is not None and gpu.numa_affinity else "?"
            peers: tuple[tuple[int, int], ...] = ()
            if gpu is not None and topo is not None and n.mig is None:
                # MIG slices have no peer access; a whole GPU's peers are the allocation's others joined by NVLink
                others = [
                    (i, to_gpu(i)) for i in alloc.get(rep.node, ()) if i != n.idx and to_gpu(i) in known
                ]
                peers = tuple(
                    (i, topo.nvlinks(gpu.index, g))
                    for i, g in others
                    if g != gpu.index and topo.nvlinks(gpu.index, g) > 0
                )
            uuid = n.uuid or (gpu.uuid if gpu is not None and n.mig is None else None)
            out.append(
                GpuRow(
                    rep.rank,
                    rep.node,
                    n.idx,
                    s.position,
                    s.token,
                    uuid,
                    n.pci_bus_id,
                    numa,
                    n.gpu,
                    mask,
                    peers,
                    n.mig,
                    not task.comparable,
                )
            )
    return out


@dataclass(frozen=True)
class _TaskFacts:
    """What the verdicts on one task go by."""

    rep: TaskReport
    topo: Topology | None
    to_gpu: Callable[[int], int]  # Slurm IDX -> topology index on the task's node
    rec: NodeRecord | None
    gpus: tuple[int, ...]  # the task's GPUs (topology indices)
    step: tuple[int, ...]  # the step's GPUs (topology indices)
    local: dict[int, frozenset[int]]  # GPU -> its local CPUs
    gpu_cpus: frozenset[int]  # CPUs local to the task's GPUs
    comparable: bool
    missing: str  # the fact the judgement lacks, named; empty when it has them all

    @property
    def slurm_cpus(self) -> frozenset[int] | None:
        return self.rec.cpu_ids if self.rec is not None else None

    @property
    def judge(self) -> frozenset[int] | None:
        """The CPUs the task is judged by: its real mask, or where that names host CPUs, Slurm's CPU_IDs."""
        return self.rep.affinity if self.comparable else self.slurm_cpus


def _judge_task(
    rep: TaskReport,
    entry: NodeTopology | Topology | None,
    rec: NodeRecord | None,
    seen: Sequence[SeenGpu],
    closest_wanted: bool,
    enforce_binding: bool,
) -> TaskBinding:
    topo = _topo_of(entry)
    to_gpu = idx_to_gpu_map(entry)
    step_idx = _step_idx(rep, rec)
    gpus = tuple(g for g in (_gpu_of(s, to_gpu) for s in seen) if g is not None)
    step = tuple(to_gpu(i) for i in step_idx)
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
    # a sandbox node claims CPUs the host lacks: its tasks' real masks cannot be compared with the
    # topology's CPU ids, so judge by the CPUs Slurm recorded (CPU_IDs) instead
    comparable = _comparable(rep, topo)
    facts = _TaskFacts(
        rep,
        topo,
        to_gpu,
        rec,
        gpus,
        step,
        local,
        gpu_cpus,
        comparable,
        _missing_fact(rep, topo, known, step, rec, comparable),
    )
    why: list[str] = []
    closest = _closest_verdict(facts, why) if closest_wanted else NOT_REQUESTED
    enforce = _enforce_verdict(facts, why) if enforce_binding else NOT_REQUESTED
    return TaskBinding(
        rep.rank,
        rep.node,
        gpus,
        ",".join(map(str, sorted(numa))) or "?",
        gpu_cpus,
        rep.affinity,
        facts.slurm_cpus,
        closest,
        enforce,
        tuple(why),
        comparable,
    )


def _gpu_of(seen: SeenGpu, to_gpu: Callable[[int], int]) -> int | None:
    """The topology index of a device the task sees (None when no source names it)."""
    if seen.name.gpu is not None:
        return seen.name.gpu
    return to_gpu(seen.name.idx) if seen.name.idx is not None else None


def _closest_verdict(f: _TaskFacts, why: list[str]) -> str:
    """``--gpu-bind=closest``: the task got the step's GPUs nearest its CPUs (all of them when none is near)."""
    judge = f.judge
    if f.missing or judge is None:
        why.append(f"closest: {f.missing or 'no CPUs to judge by'}")
        return UNKNOWN
    near = tuple(g for g in f.step if f.local.get(g, frozenset()) & judge)
    expect = near or f.step
    if set(f.gpus) == set(expect) or near and f.gpus and set(f.gpus) <= set(near):
        return HONOURED
    why.append(
        f"closest: CPUs {format_cpu_list(judge)} are nearest GPU(s) "
        f"{','.join(map(str, expect))}, but the task got {','.join(map(str, f.gpus)) or 'none'}"
    )
    return NOT_HONOURED


def _enforce_verdict(f: _TaskFacts, why: list[str]) -> str:
    """``--gres-flags=enforce-binding``: Slurm's CPU_IDs and the task's mask lie within its GPUs' CPUs."""
    topo, mask, slurm_cpus = f.topo, f.rep.affinity, f.slurm_cpus
    if topo is None or not f.gpu_cpus and not _node_local(f.rec, f.to_gpu, f.local, topo):
        why.append("enforce-binding: " + (f.missing or "the local CPUs of the job's GPUs are unknown"))
        return UNKNOWN
    if slurm_cpus is None and not (f.comparable and mask is not None):
        # nothing to hold against the GPUs' CPUs: saying "honoured" here would be a guess
        why.append(f"enforce-binding: {f.missing or 'no CPUs to judge by'}")
        return UNKNOWN
    allowed = _node_local(f.rec, f.to_gpu, f.local, topo) or f.gpu_cpus
    bad = []
    if slurm_cpus is not None and not slurm_cpus <= allowed:
        bad.append(
            f"Slurm CPU_IDs {format_cpu_list(slurm_cpus - allowed)} lie outside the GPUs' CPUs "
            f"{format_cpu_list(allowed)}"
        )
    if f.comparable and mask is not None and not mask <= allowed:
        bad.append(
            f"task mask CPUs {format_cpu_list(mask - allowed)} lie outside the GPUs' CPUs "
            f"{format_cpu_list(allowed)}"
        )
    why += [f"enforce-binding: {b}" for b in bad]
    return NOT_HONOURED if bad else HONOURED


def _missing_fact(
    rep: TaskReport,
    topo: Topology | None,
    known: set[int],
    step: tuple[int, ...],
    rec: NodeRecord | None,
    comparable: bool,
) -> str:
    """Which fact the judgement lacks for this task (empty when it has them all), named so it can be fixed."""
    if topo is None:
        return f"no topology of {rep.node} (topology(alloc) says which sources were tried)"
    absent = [g for g in step if g not in known]
    if absent:
        return f"GPU(s) {','.join(map(str, absent))} of the step are not in {rep.node}'s topology"
    unplaced = [g for g in step if topo.gpu(g).cpu_affinity is None]
    if unplaced:
        return (
            f"the local CPUs of GPU(s) {','.join(map(str, unplaced))} on {rep.node} are unknown (the topology "
            "source gives none: gres.conf without Cores=, or an empty nvidia-smi topo cell)"
        )
    if comparable:
        return "" if rep.affinity is not None else f"task {rep.rank} reported no CPU mask (sched_getaffinity)"
    if rec is None or rec.cpu_ids is None:
        return (
            f"Slurm recorded no CPU_IDs for the job on {rep.node} (scontrol show job -d gave neither the "
            "text CPU_IDs= nor JSON job_resources.nodes.allocation[].sockets[].cores[]), and the task's real "
            "mask names host CPUs, not the node's"
        )
    return ""


def _comparable(rep: TaskReport, topo: Topology | None) -> bool:
    """Whether the task's real CPU ids mean the same CPUs as the topology's (not so in a sandbox)."""
    if rep.host_cpus is None or topo is None:
        return True
    top = max((max(g.cpu_affinity) for g in topo.gpus if g.cpu_affinity), default=-1)
    return top < rep.host_cpus


def _topo_of(entry: NodeTopology | Topology | None) -> Topology | None:
    if entry is None or isinstance(entry, Topology):
        return entry
    return entry.topology


def _node_local(
    rec: NodeRecord | None, to_gpu: Callable[[int], int], local: dict[int, frozenset[int]], topo: Topology
) -> frozenset[int]:
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
