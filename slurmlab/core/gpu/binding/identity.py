"""Which physical GPU each entry of a task's ``CUDA_VISIBLE_DEVICES`` is.

Five names of one GPU are easily mixed up (slurm-job-exporter #63, dask-cuda #1358/#1381): Slurm's IDX (what
``SLURM_STEP_GPUS`` and ``GRES=…(IDX:…)`` hold), the index the task sees (``cuda:N``, the entry's position in
``CUDA_VISIBLE_DEVICES``, renumbered from 0 under ``ConstrainDevices``), its UUID (``GPU-…``, or ``MIG-…`` for a
MIG slice; ``CUDA_VISIBLE_DEVICES`` holds UUIDs with Slurm 26.05's ``env_uuid`` flag and MIG UUIDs since 25.11),
its PCI bus id, and its NUMA node. This module names every device of a node (:class:`NodeNames`) from what is
known there, and resolves a task's entries to those names (:func:`resolve_visible`).

The names come from the sandbox's hardware file (exact: the stand-in ``nvidia-smi`` makes its UUIDs the same way)
or, on a real node, from the topology's ``nvidia-smi -L`` UUIDs and the tasks' own ``-L`` listings and PCI bus
ids. Pure: data in, names out.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field

from slurmlab.core.gpu.hardware_profile import SandboxHardware
from slurmlab.core.gpu.mig.instances import mig_slice_label
from slurmlab.core.gpu.node_models import NodeTopology
from slurmlab.core.gpu.smi.listing import parse_smi_list
from slurmlab.core.gpu.standin_names import made_up_uuid
from slurmlab.core.gpu.topology import Topology
from slurmlab.errors import ParseError

__all__ = [
    "GpuName",
    "NodeNames",
    "SeenGpu",
    "idx_to_gpu_map",
    "listed_gpu_uuids",
    "names_from_hardware",
    "names_from_tasks",
    "resolve_visible",
]


@dataclass(frozen=True)
class GpuName:
    """What one device of a node is called (None where no source names it)."""

    idx: int | None  # Slurm's IDX on the node
    gpu: int | None  # the topology index of the GPU (of the parent GPU for a MIG slice)
    uuid: str | None  # GPU-… or MIG-…
    pci_bus_id: str | None
    mig: str | None = None  # the MIG slice (its one label), None for a whole GPU


@dataclass(frozen=True)
class NodeNames:
    """Every device of a node that a source names, by Slurm IDX and by UUID."""

    node: str
    by_idx: Mapping[int, GpuName] = field(default_factory=dict)
    by_uuid: Mapping[str, GpuName] = field(default_factory=dict)
    pci_of_gpu: Mapping[int, str] = field(default_factory=dict)  # topology index -> PCI bus id
    source: str = ""


@dataclass(frozen=True)
class SeenGpu:
    """One device as a task sees it: its place in ``CUDA_VISIBLE_DEVICES`` and what it is."""

    position: int | None  # the index the task sees (cuda:N); None when CUDA_VISIBLE_DEVICES is unset
    token: str | None  # its CUDA_VISIBLE_DEVICES entry
    name: GpuName


def idx_to_gpu_map(entry: NodeTopology | Topology | None) -> Callable[[int], int]:
    """Slurm IDX -> topology index on a node. A live capture taken under ``ConstrainDevices`` numbers the
    allocation's GPUs from 0 while Slurm keeps the node's IDX: then they pair up in order."""
    if not isinstance(entry, NodeTopology):
        return _same
    if entry.idx_to_gpu:
        return entry.gpu_of_idx
    if entry.gpus and len(entry.gpus) == len(entry.slurm_gpus) and set(entry.gpus) != set(entry.slurm_gpus):
        pairs = dict(zip(entry.slurm_gpus, entry.gpus, strict=True))
        return lambda idx: pairs.get(idx, idx)
    return entry.gpu_of_idx


def _same(idx: int) -> int:
    return idx


def names_from_hardware(hw: SandboxHardware, node: str) -> NodeNames:
    """The names of a sandbox node's devices, as its stand-in ``nvidia-smi`` prints them (exact)."""
    gpus = hw.profile.get("gpus")
    pci = (
        {
            g["index"]: g["pci_bus_id"]
            for g in gpus
            if isinstance(g, Mapping)
            and isinstance(g.get("index"), int)
            and isinstance(g.get("pci_bus_id"), str)
        }
        if isinstance(gpus, list)
        else {}
    )
    migs = hw.profile.get("mig")
    mig_list = [m for m in migs if isinstance(m, Mapping)] if isinstance(migs, list) else []
    by_idx: dict[int, GpuName] = {}
    by_uuid: dict[str, GpuName] = {}
    for idx, (gpu, pos) in enumerate(hw.gres_idx):
        whole = "GPU-" + made_up_uuid(hw.name, node, "gpu", gpu)
        if pos is not None and pos < len(mig_list):
            m = mig_list[pos]
            start, size = m.get("start"), m.get("size")
            label = mig_slice_label(
                gpu,
                str(m.get("profile")),
                start if isinstance(start, int) else None,
                size if isinstance(size, int) else None,
            )
            name = GpuName(idx, gpu, "MIG-" + made_up_uuid(hw.name, node, "mig", pos), pci.get(gpu), label)
            by_uuid.setdefault(whole, GpuName(None, gpu, whole, pci.get(gpu)))
        else:
            name = GpuName(idx, gpu, whole, pci.get(gpu))
            by_uuid[whole] = name
        by_idx[idx] = name
        by_uuid[name.uuid or ""] = name
    return NodeNames(node, by_idx, by_uuid, pci, f"the sandbox's hardware file ({hw.detail})")


def names_from_tasks(
    node: str, reports: Sequence[object], entry: NodeTopology | Topology | None, step_idx: Sequence[int]
) -> NodeNames:
    """The names of a real node's devices: GPU UUIDs from its topology (``nvidia-smi -L`` in the topology probe),
    MIG UUIDs and their parent GPUs from the tasks' own ``-L``, PCI bus ids from the tasks' ``--query-gpu``.

    ``reports`` are the node's :class:`~slurmlab.core.gpu.binding.evidence.TaskReport`; ``step_idx`` the IDX of
    the allocation's GPUs there (they give a topology GPU its IDX)."""
    topo = entry.topology if isinstance(entry, NodeTopology) else entry
    to_gpu = idx_to_gpu_map(entry)
    idx_of = {to_gpu(i): i for i in step_idx}
    pci: dict[str, str] = {}
    for rep in reports:
        pci.update(dict(getattr(rep, "pci", ())))
    by_uuid: dict[str, GpuName] = {}
    gpu_of_uuid: dict[str, int] = {}
    if topo is not None:
        for g in topo.gpus:
            if g.uuid:
                gpu_of_uuid[g.uuid] = g.index
                by_uuid[g.uuid] = GpuName(idx_of.get(g.index), g.index, g.uuid, pci.get(g.uuid))
    for rep in reports:
        text = getattr(rep, "smi_list", None)
        if not text:
            continue
        try:
            devices, _layout = parse_smi_list(text)
        except ParseError:
            continue  # a listing that does not parse names nothing; the row then says which name is unknown
        parents = {d.index: d.uuid for d in devices if d.parent is None}
        for d in devices:
            if d.parent is None:
                gpu = gpu_of_uuid.get(d.uuid)
                by_uuid.setdefault(
                    d.uuid,
                    GpuName(idx_of.get(gpu) if gpu is not None else None, gpu, d.uuid, pci.get(d.uuid)),
                )
            else:
                parent_uuid = parents.get(d.parent, "")
                gpu = gpu_of_uuid.get(parent_uuid)
                by_uuid.setdefault(
                    d.uuid, GpuName(None, gpu, d.uuid, pci.get(parent_uuid), f"{d.name} on {parent_uuid}")
                )
    by_idx = {n.idx: n for n in by_uuid.values() if n.idx is not None and n.mig is None}
    pci_of_gpu = {
        n.gpu: n.pci_bus_id for n in by_uuid.values() if n.gpu is not None and n.pci_bus_id and n.mig is None
    }
    return NodeNames(node, by_idx, by_uuid, pci_of_gpu, "nvidia-smi -L and --query-gpu on the node")


def listed_gpu_uuids(smi_list: str | None) -> tuple[str, ...]:
    """The whole GPUs of a task's own ``nvidia-smi -L``, in its order (empty when it has none or does not parse)."""
    if not smi_list:
        return ()
    try:
        devices, _layout = parse_smi_list(smi_list)
    except ParseError:
        return ()
    return tuple(d.uuid for d in sorted(devices, key=lambda d: d.index) if d.parent is None)


def resolve_visible(
    visible: Sequence[str] | None,
    step: Sequence[int],
    names: NodeNames | None,
    to_gpu: Callable[[int], int],
    rank: int,
    listed: Sequence[str] = (),
) -> tuple[list[SeenGpu], list[str]]:
    """The devices one task sees, in ``cuda:N`` order, and notes on entries no source could name.

    Numbers are Slurm's IDX when they are among the step's (no device cgroup), else positions among the devices
    the task's cgroup shows: ``listed``, the GPU UUIDs of its own ``nvidia-smi -L``, when that lists as many as it
    has entries (a cgroup per task, ``--gpus-per-task`` under ``ConstrainDevices``), else the step's GPUs
    (``ConstrainDevices`` renumbers from 0). UUIDs are looked up in ``names``; one found nowhere is matched by
    position when the task sees as many devices as the step holds (Slurm lists both in the same order)."""
    names = names or NodeNames("")
    step = tuple(step)
    if visible is None:
        return [SeenGpu(None, None, _named(i, names, to_gpu)) for i in step], []
    notes: list[str] = []
    numbers = all(t.isdigit() for t in visible)
    vis = tuple(int(t) for t in visible) if numbers else ()
    out: list[SeenGpu] = []
    for k, token in enumerate(visible):
        if numbers:
            out.append(SeenGpu(k, token, _named_by_number(vis, k, step, names, to_gpu, listed)))
            continue
        found = names.by_uuid.get(token)
        if found is not None and found.idx is None and len(visible) == len(step):
            # a MIG UUID names its parent GPU; Slurm's IDX of the slice is its place in the step's list
            found = GpuName(step[k], found.gpu, found.uuid, found.pci_bus_id, found.mig)
        if found is not None and (found.idx is not None or found.gpu is not None):
            out.append(SeenGpu(k, token, found))
        elif len(visible) == len(step):
            out.append(SeenGpu(k, token, _with_uuid(_named(step[k], names, to_gpu), token)))
            notes.append(
                f"task {rank}: {token} is named by no source here; taken as Slurm IDX {step[k]}, the "
                f"step's {k + 1}. GPU (Slurm lists both in one order)"
            )
        else:
            out.append(SeenGpu(k, token, GpuName(None, found.gpu if found else None, token, None)))
            notes.append(
                f"task {rank}: CUDA_VISIBLE_DEVICES entry {token} matches no GPU of the node, so its Slurm "
                "IDX, NUMA node and peers are unknown; run `nvidia-smi -L` on the node (or load its "
                "output) to see which GPU holds that UUID"
            )
    if numbers and vis and not (step and (set(vis) <= set(step) or max(vis) < len(step))):
        notes.append(
            f"task {rank}: CUDA_VISIBLE_DEVICES={','.join(visible)} does not match "
            f"SLURM_STEP_GPUS={','.join(map(str, step)) or '-'}; taking the step's GPUs"
        )
        return [SeenGpu(None, None, _named(i, names, to_gpu)) for i in step], notes
    return out, notes


def _named_by_number(
    vis: tuple[int, ...],
    k: int,
    step: tuple[int, ...],
    names: NodeNames,
    to_gpu: Callable[[int], int],
    listed: Sequence[str],
) -> GpuName:
    """The names of the ``k``-th of numeric CUDA_VISIBLE_DEVICES entries ``vis`` (see :func:`resolve_visible`)."""
    if step and set(vis) <= set(step):
        return _named(vis[k], names, to_gpu)
    own = names.by_uuid.get(listed[vis[k]]) if len(listed) == len(vis) and max(vis) < len(listed) else None
    if own is not None and own.idx is not None:
        return own  # the task's own cgroup: its -L names the device
    if step and max(vis) < len(step):
        return _named(step[vis[k]], names, to_gpu)
    return GpuName(None, None, None, None)


def _named(idx: int, names: NodeNames, to_gpu: Callable[[int], int]) -> GpuName:
    """The names of Slurm IDX ``idx``: the source's, or what the topology alone tells (its index)."""
    found = names.by_idx.get(idx)
    if found is not None:
        return found
    gpu = to_gpu(idx)
    return GpuName(idx, gpu, None, names.pci_of_gpu.get(gpu))


def _with_uuid(name: GpuName, uuid: str) -> GpuName:
    return GpuName(name.idx, name.gpu, name.uuid or uuid, name.pci_bus_id, name.mig)
