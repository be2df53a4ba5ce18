"""The known traps of a GPU binding, found in the per-task, per-GPU rows of the table.

- far socket: a task's GPU is local to CPUs the task does not run on, so every copy and launch crosses the
  socket link (UPI/xGMI);
- split NUMA: one task's GPUs sit on different NUMA nodes, or its GPUs sit on one NUMA node while its CPUs span
  that one and another (e.g. CPUs 0-23,56-79 over two sockets, GPUs all beside 0-55);
- no NVLink: the allocation's GPUs on a node are not all joined by NVLink while a set of as many NVLink-joined GPUs
  was free there;
- per-task GPUs: ``--gpus-per-task`` under ``ConstrainDevices``, or ``--gpu-bind=single``/``per_task``, gives each
  task only its own GPU(s); the node's other GPUs are hidden from it, so CUDA peer access and CUDA IPC between the
  tasks' GPUs are impossible and NCCL falls back to copies through host memory instead of NVLink
  (NVIDIA/nccl-tests#300, open-mpi/ompi#11949).

Each trap says, in one line, what is wrong and what to ask Slurm for instead. Pure: rows in, traps out.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from itertools import combinations

from slurmlab.core.gpu.binding.table import GpuRow, TaskBinding, Trap
from slurmlab.core.gpu.devices import format_cpu_list
from slurmlab.core.gpu.topology import Topology

__all__ = ["FAR_SOCKET", "NO_NVLINK", "PER_TASK_GPUS", "SPLIT_NUMA", "find_traps"]

FAR_SOCKET = "far-socket"
SPLIT_NUMA = "split-NUMA"
NO_NVLINK = "no-NVLink"
PER_TASK_GPUS = "per-task-GPUs"


def find_traps(
    gpu_rows: Sequence[GpuRow],
    tasks: Sequence[TaskBinding],
    topologies: Mapping[str, Topology | None],
    to_gpu: Mapping[str, Callable[[int], int]],
    alloc_idx: Mapping[str, Sequence[int]],
    free_idx: Mapping[str, frozenset[int]] | None = None,
) -> list[Trap]:
    """The traps in the rows. ``alloc_idx``: the allocation's Slurm IDX per node; ``free_idx``: the IDX that were
    free on each node (from ``scontrol show node -d``), None when not known."""
    by_task = {(t.node, t.rank): t for t in tasks}
    traps: list[Trap] = []
    for (node, rank), rows in _group(gpu_rows).items():
        topo = topologies.get(node)
        task = by_task.get((node, rank))
        if topo is None:
            continue
        traps += _far_socket(node, rank, rows, topo, task)
        traps += _split_numa(node, rank, rows)
    traps += _cpus_beyond_the_gpus(gpu_rows, tasks, topologies)
    for node, idx in alloc_idx.items():
        topo = topologies.get(node)
        if topo is not None:
            free = free_idx.get(node) if free_idx is not None else None
            traps += _no_nvlink(node, tuple(idx), topo, to_gpu.get(node, _same), free)
    traps += _per_task(gpu_rows, alloc_idx)
    return traps


def _group(rows: Sequence[GpuRow]) -> dict[tuple[str, int], list[GpuRow]]:
    out: dict[tuple[str, int], list[GpuRow]] = {}
    for g in rows:
        out.setdefault((g.node, g.rank), []).append(g)
    return out


def _far_socket(
    node: str, rank: int, rows: list[GpuRow], topo: Topology, task: TaskBinding | None
) -> list[Trap]:
    """A GPU none of whose local CPUs the task may run on."""
    if task is None:
        return []
    # a sandbox task's real mask names host CPUs: judge it by the CPUs Slurm gave the job there
    cpus = task.mask if task.comparable else task.slurm_cpus
    if not cpus:
        return []
    out = []
    known = {g.index for g in topo.gpus}
    for g in rows:
        local = topo.gpu(g.gpu).cpu_affinity if g.gpu in known and g.gpu is not None else None
        if local and not cpus & local:
            out.append(
                Trap(
                    FAR_SOCKET,
                    node,
                    (rank,),
                    f"task {rank} on {node} runs on CPUs {format_cpu_list(cpus)} but its GPU (Slurm IDX {_n(g.idx)}, "
                    f"cuda:{_n(g.seen_as)}) sits on NUMA {g.numa} beside CPUs {format_cpu_list(local)}: every "
                    "host-GPU copy and kernel launch crosses the socket link",
                    "ask --gpu-bind=closest with --gres-flags=enforce-binding (or bind the task's CPUs with --cpu-bind "
                    "to the GPU's cores), so that each task runs on the socket of its GPU",
                )
            )
    return out


def _split_numa(node: str, rank: int, rows: list[GpuRow]) -> list[Trap]:
    """One task's GPUs on different NUMA nodes."""
    numa = {g.numa for g in rows if g.numa != "?" and g.gpu is not None}
    if len(numa) < 2:
        return []
    where = "; ".join(f"IDX {_n(g.idx)} on NUMA {g.numa}" for g in rows)
    return [
        Trap(
            SPLIT_NUMA,
            node,
            (rank,),
            f"task {rank} on {node} holds GPUs on {len(numa)} NUMA nodes ({where}): its CPUs are far from "
            "some of them, and traffic between them without NVLink crosses the socket link",
            "ask for GPUs of one socket (--gpus-per-socket=N --sockets-per-node=1), or run one task per "
            "socket with --gpus-per-task and --gpu-bind=closest",
        )
    ]


def _cpus_beyond_the_gpus(
    gpu_rows: Sequence[GpuRow], tasks: Sequence[TaskBinding], topologies: Mapping[str, Topology | None]
) -> list[Trap]:
    """Tasks whose GPUs sit on one NUMA node while their CPUs lie partly beside those GPUs and partly beyond
    (a CPU set with none beside them is the far-socket trap). A task's real mask is judged against its own GPUs;
    a sandbox task's (whose real mask names host CPUs) by the CPUs Slurm gave the job on the node against all the
    job's GPUs there: some task runs on those CPUs whichever it is. Tasks with the same finding are one trap."""
    found: dict[tuple[str, frozenset[int], frozenset[int], bool], list[int]] = {}
    rows_of = _group(gpu_rows)
    for task in tasks:
        topo = topologies.get(task.node)
        cpus = task.mask if task.comparable else task.slurm_cpus
        mine = rows_of.get((task.node, task.rank), [])
        if not task.comparable and mine:
            mine = [g for g in gpu_rows if g.node == task.node]
        numa = {g.numa for g in mine}
        local = _local_cpus(topo, mine) if topo is not None and len(numa) == 1 and "?" not in numa else None
        if local is not None and cpus and cpus & local and not cpus <= local:
            found.setdefault((task.node, cpus, local, task.comparable), []).append(task.rank)
    return [
        _beyond_trap(node, tuple(ranks), cpus, local, own, gpu_rows, topologies.get(node))
        for (node, cpus, local, own), ranks in found.items()
    ]


def _beyond_trap(
    node: str,
    ranks: tuple[int, ...],
    cpus: frozenset[int],
    local: frozenset[int],
    own: bool,
    gpu_rows: Sequence[GpuRow],
    topo: Topology | None,
) -> Trap:
    """The split-NUMA trap of tasks whose CPUs reach beyond their GPUs' NUMA node (``own``: their real masks)."""
    beyond = cpus - local
    gpus = [g for g in gpu_rows if g.node == node and (g.rank in ranks or not own)]
    idx = format_cpu_list({g.idx for g in gpus if g.idx is not None})
    others = sorted(
        {g.numa_label for g in (topo.gpus if topo else ()) if g.cpu_affinity and g.cpu_affinity & beyond}
    )
    where = f"on {' and '.join(others)}" if others else "on another NUMA node (no GPU of the node sits there)"
    who = f"task {ranks[0]}" if len(ranks) == 1 else f"tasks {format_cpu_list(ranks)}"
    run = "runs" if len(ranks) == 1 else "run"
    if own:
        cpus_are = f"{who} on {node} {run} on CPUs {format_cpu_list(cpus)}"
        gpus_are = "its GPUs" if len(ranks) == 1 else "their GPUs"
    else:
        cpus_are = (
            f"the job's CPUs on {node}, where {who} {run} (Slurm's CPU_IDs), are {format_cpu_list(cpus)}"
        )
        gpus_are = "the job's GPUs there"
    return Trap(
        SPLIT_NUMA,
        node,
        ranks,
        f"{cpus_are}, over more than one NUMA node, while {gpus_are} (Slurm IDX {idx}) all sit on NUMA "
        f"{gpus[0].numa if gpus else '?'} beside CPUs {format_cpu_list(local)}: CPUs {format_cpu_list(beyond)} are "
        f"{where}, so threads there reach the GPUs across the socket link and their host buffers land in the far "
        "NUMA node's memory",
        "keep each task's CPUs beside its GPUs: --gres-flags=enforce-binding (Slurm then gives only CPUs gres.conf "
        "ties to the GPUs) with --cpu-bind=cores, or fewer --cpus-per-task so that one socket holds them; or spread "
        "the GPUs over both sockets (--gpus-per-socket) with --gpu-bind=closest",
    )


def _local_cpus(topo: Topology, rows: Sequence[GpuRow]) -> frozenset[int] | None:
    """The CPUs local to the rows' GPUs, or None when a GPU's are not known."""
    known = {g.index for g in topo.gpus}
    local: set[int] = set()
    for g in rows:
        affinity = topo.gpu(g.gpu).cpu_affinity if g.gpu is not None and g.gpu in known else None
        if not affinity:
            return None
        local |= affinity
    return frozenset(local)


def _no_nvlink(
    node: str, idx: tuple[int, ...], topo: Topology, to_gpu: Callable[[int], int], free: frozenset[int] | None
) -> list[Trap]:
    """The allocation's GPUs on a node not all joined by NVLink, while as many NVLink-joined GPUs were free."""
    gpus = [to_gpu(i) for i in idx]
    known = {g.index for g in topo.gpus}
    # MIG slices share a parent GPU and have no peer access at all: NVLink is not theirs to use
    if len(idx) < 2 or len(set(gpus)) != len(gpus) or not set(gpus) <= known or not topo.nvlink_edges():
        return []
    missing = [
        (a, b)
        for (a, ga), (b, gb) in combinations(zip(idx, gpus, strict=True), 2)
        if topo.nvlinks(ga, gb) == 0
    ]
    if not missing:
        return []
    node_idx = _node_idx(topo, to_gpu, idx)
    pool = sorted((free | set(idx)) & set(node_idx) if free is not None else node_idx)
    better = next((c for c in combinations(pool, len(idx)) if _all_nvlink(c, node_idx, topo)), None)
    if better is None:
        return []
    pairs = ", ".join(f"{a}-{b}" for a, b in missing)
    was = "were free" if free is not None else "exist on the node (whether they were free is not known)"
    return [
        Trap(
            NO_NVLINK,
            node,
            (),
            f"the allocation's GPUs on {node} (Slurm IDX {format_cpu_list(idx)}) have no NVLink between "
            f"{pairs}, so their traffic goes over PCIe, while GPUs {format_cpu_list(better)} joined by NVLink "
            f"{was}",
            f"ask for NVLink-joined GPUs: slurmlab's best_gpus({len(idx)}) / `slurmlab topo --best {len(idx)}` "
            "names them; gres.conf Links= lets Slurm prefer them",
        )
    ]


def _node_idx(topo: Topology, to_gpu: Callable[[int], int], idx: tuple[int, ...]) -> dict[int, int]:
    """Slurm IDX -> topology index of the node's GPUs whose IDX is known: the allocation's, and those others whose
    IDX is their topology index (a node with neither MIG slices nor a device cgroup numbers them so)."""
    mine = {i: to_gpu(i) for i in idx}
    taken = set(mine.values())
    others = {
        g.index: g.index
        for g in topo.gpus
        if g.index not in taken and g.index not in mine and to_gpu(g.index) == g.index
    }
    return {**others, **mine}


def _all_nvlink(chosen: Sequence[int], node_idx: Mapping[int, int], topo: Topology) -> bool:
    return all(topo.nvlinks(node_idx[a], node_idx[b]) > 0 for a, b in combinations(chosen, 2))


def _per_task(rows: Sequence[GpuRow], alloc_idx: Mapping[str, Sequence[int]]) -> list[Trap]:
    """Tasks of one node shown different GPUs, each only its own share of those the tasks hold together."""
    out = []
    for node in alloc_idx:
        seen: dict[int, set[int]] = {}
        for g in rows:
            if g.node == node and g.mig is None and g.idx is not None:
                seen.setdefault(g.rank, set()).add(g.idx)
        # tasks that all share one set (or one GPU) see each other's GPUs: nothing is hidden between them
        whole = set().union(*seen.values()) if seen else set()
        if len(seen) < 2 or len(whole) < 2 or not all(s < whole for s in seen.values()):
            continue
        sets = "; ".join(f"task {r} sees {format_cpu_list(s)}" for r, s in sorted(seen.items()))
        out.append(
            Trap(
                PER_TASK_GPUS,
                node,
                tuple(sorted(seen)),
                f"on {node} each task sees only its own GPU(s) of the {format_cpu_list(whole)} its tasks hold ({sets}): "
                "per-task GPU binding (--gpus-per-task under ConstrainDevices, --gpu-bind=single or per_task) hides "
                "the others, so CUDA peer access and IPC between the tasks' GPUs fail and NCCL copies through host "
                "memory instead of peer-to-peer over NVLink or PCIe (nccl-tests#300, ompi#11949)",
                "give every task all the node's GPUs (--gpus-per-node=N, no --gpus-per-task, --gpu-bind=none) and pick "
                "the device in the program by SLURM_LOCALID, e.g. torch.cuda.set_device(int(os.environ['SLURM_LOCALID']))",
            )
        )
    return out


def _n(v: int | None) -> str:
    return "?" if v is None else str(v)


def _same(i: int) -> int:
    return i
