"""Whether a request fits the nodes of a partition at all: CPUs, memory and GPUs per task, per node, in total.

Slurm 24.11 refuses such a request at submit ("Requested node configuration is not available"); 22.05 and
26.05 queue it and leave it pending for ever with the reason PartitionConfig. Checked here, it is refused
before submit with the numbers: what was asked, what the partition has (its CPUs, in how many nodes, the
biggest), and the most that would fit.

A task's CPUs, memory and GPUs sit on one node, so what a node can hold is counted in whole tasks: ``-n 20
-c 12`` on two 112-CPU nodes fits 9 + 9 = 18 tasks, not 224 // 12. ``-O`` (--overcommit) lets tasks share
CPUs, so with it CPUs no longer limit the count of tasks.
"""

from __future__ import annotations

import heapq
from collections.abc import Sequence
from dataclasses import dataclass

from slurmlab.core.request.inventory import NodeInventory, PartitionInventory
from slurmlab.core.request.problems import Problem
from slurmlab.core.request.request import GpuRequest

__all__ = ["TaskShape", "check_capacity", "task_shape", "tasks_fitting"]

_OVERCOMMIT = ("--overcommit", "-O")


@dataclass(frozen=True)
class TaskShape:
    """What one task needs on its node. ``mem_mib`` None = no memory asked per task; ``gpus`` 0 = none."""

    cpus: int = 1
    mem_mib: float | None = None
    gpus: int = 0
    gpu_type: str | None = None
    cpus_from: str = ""  # how the CPUs were asked for, as options (for the messages)
    mem_from: str = ""


def overcommit(req: GpuRequest) -> bool:
    return any(g[0].split("=")[0] in _OVERCOMMIT for g in req.extra)


def task_shape(req: GpuRequest) -> TaskShape:
    """One task's needs: -c (or --cpus-per-gpu × --gpus-per-task), --mem-per-cpu × its CPUs (or
    --mem-per-gpu × its GPUs), --gpus-per-task."""
    gpt = req.gpus_per_task.count if req.gpus_per_task is not None else 0
    gtype = req.gpus_per_task.type if req.gpus_per_task is not None else None
    if req.cpus_per_task is not None:
        cpus, cpus_from = req.cpus_per_task, f"-c {req.cpus_per_task}"
    elif req.cpus_per_gpu is not None and gpt:
        cpus = req.cpus_per_gpu * gpt
        cpus_from = f"--cpus-per-gpu={req.cpus_per_gpu} x --gpus-per-task={gpt}"
    else:
        cpus, cpus_from = 1, ""
    mem: float | None = None
    mem_from = ""
    if req.mem_per_cpu is not None and req.mem_per_cpu.kib:
        mem = req.mem_per_cpu.mib * cpus
        mem_from = f"--mem-per-cpu={req.mem_per_cpu.render()}" + (f" x {cpus} CPUs" if cpus > 1 else "")
    elif req.mem_per_gpu is not None and req.mem_per_gpu.kib and gpt:
        mem = req.mem_per_gpu.mib * gpt
        mem_from = f"--mem-per-gpu={req.mem_per_gpu.render()}" + (f" x {gpt} GPUs" if gpt > 1 else "")
    return TaskShape(cpus, mem, gpt, gtype, cpus_from, mem_from)


def tasks_fitting(
    node: NodeInventory,
    shape: TaskShape,
    *,
    cpus: bool = True,
    memory: bool = True,
    gpus: bool = True,
    per_node: int | None = None,
) -> int:
    """How many tasks of ``shape`` one node holds, counting only the resources switched on."""
    limits = [per_node] if per_node is not None else []
    if cpus:
        limits.append(node.cpus // max(1, shape.cpus))
    if memory and shape.mem_mib:
        limits.append(int(node.memory_mb // shape.mem_mib))
    if gpus and shape.gpus:
        limits.append(node.gpu_count(shape.gpu_type) // shape.gpus)
    return min(limits) if limits else 1 << 30


def _mib(value: float) -> str:
    return f"{value / 1024:.0f} GiB" if value >= 10 * 1024 else f"{value:.0f} MiB"


def _spread(values: Sequence[int], unit: str) -> str:
    """``2 nodes (112 each)`` / ``3 nodes (48, 48, 32)`` / ``10 nodes (at most 112)``."""
    n = len(values)
    nodes = f"{n} node{'s' if n != 1 else ''}"
    if len(set(values)) == 1:
        return f"{nodes} ({values[0]}{unit}{' each' if n > 1 else ''})"
    if n <= 4:
        return f"{nodes} ({', '.join(f'{v}{unit}' for v in sorted(values, reverse=True))})"
    return f"{nodes} (at most {max(values)}{unit} each)"


def check_capacity(req: GpuRequest, part: PartitionInventory) -> list[Problem]:
    """What no node (one task, one node's tasks) or the whole partition (every task) could hold."""
    nodes = list(part.nodes)
    if not nodes or any(n.cpus <= 0 for n in nodes):  # a node of unknown size: no sure answer
        return []
    shape = task_shape(req)
    problems = _per_task(req, part, shape)
    if problems:
        return problems
    problems = _per_node(req, part, shape)
    problems += _all_tasks(req, part, shape)
    problems += _gpus_with_their_share(req, part)
    return problems


def _per_task(req: GpuRequest, part: PartitionInventory, shape: TaskShape) -> list[Problem]:
    where = f"partition {part.name!r}"
    problems = []
    if shape.cpus_from.startswith("--cpus-per-gpu") and shape.cpus > part.most_cpus:
        problems.append(
            Problem(
                f"{shape.cpus_from} = {shape.cpus} CPUs per task: a task's CPUs sit on one node, and no node of "
                f"{where} has more than {part.most_cpus}",
                f"ask for at most --cpus-per-gpu={part.most_cpus // max(1, shape.gpus)}",
            )
        )
    most_gpus = max(n.gpu_count(shape.gpu_type) for n in part.nodes)
    if shape.gpus and shape.gpus > most_gpus and (shape.gpu_type is None or shape.gpu_type in part.gpu_types):
        what = f"{shape.gpu_type} GPUs" if shape.gpu_type else "GPUs"
        problems.append(
            Problem(
                f"--gpus-per-task={req.gpus_per_task.render() if req.gpus_per_task else shape.gpus}: a task's GPUs "
                f"sit on one node, and no node of {where} has more than {most_gpus} {what}",
                f"ask for at most --gpus-per-task={most_gpus}, and more tasks (-n) if you need more GPUs",
            )
        )
    if shape.mem_mib is not None and shape.mem_mib > part.most_memory_mb:
        problems.append(
            Problem(
                f"{shape.mem_from} = {_mib(shape.mem_mib)} per task: no node of {where} has that much memory "
                f"(the most is {part.most_memory_mb} MiB)",
                _mem_fix(req, shape, part.most_memory_mb),
            )
        )
    return problems


def _mem_fix(req: GpuRequest, shape: TaskShape, most_mib: int) -> str:
    if shape.mem_from.startswith("--mem-per-cpu"):
        return f"ask for at most --mem-per-cpu={int(most_mib // max(1, shape.cpus))}M, or fewer CPUs per task"
    return f"ask for at most --mem-per-gpu={int(most_mib // max(1, shape.gpus))}M, or fewer GPUs per task"


def _per_node(req: GpuRequest, part: PartitionInventory, shape: TaskShape) -> list[Problem]:
    """--ntasks-per-node tasks must fit on one node."""
    tpn = req.ntasks_per_node
    if tpn is None or tpn <= 1:
        return []
    where = f"partition {part.name!r}"
    problems = []
    if req.cpus_per_task is None and not overcommit(req) and tpn * shape.cpus > part.most_cpus:
        # with -c, inventory_checks already names --cpus-per-task x --ntasks-per-node
        problems.append(
            Problem(
                f"--ntasks-per-node={tpn}"
                + (f" x {shape.cpus_from}" if shape.cpus_from else "")
                + f" = {tpn * shape.cpus} CPUs per node: no node of {where} has more than {part.most_cpus}",
                f"ask for at most --ntasks-per-node={part.most_cpus // shape.cpus}, or add -O (--overcommit) "
                "to let tasks share CPUs",
            )
        )
    if shape.mem_mib is not None and tpn * shape.mem_mib > part.most_memory_mb:
        problems.append(
            Problem(
                f"--ntasks-per-node={tpn} x {shape.mem_from} = {_mib(tpn * shape.mem_mib)} per node: no node of "
                f"{where} has that much memory (the most is {part.most_memory_mb} MiB)",
                f"ask for at most --ntasks-per-node={int(part.most_memory_mb // shape.mem_mib)}, or less memory "
                "per task",
            )
        )
    return problems


def _biggest(use: int, counts: list[int]) -> int:
    """The sum of the ``use`` biggest counts: O(nodes) when every node may be used (the usual case at 1,000
    nodes), O(nodes log use) when -N limits them."""
    return sum(counts) if use >= len(counts) else sum(heapq.nlargest(use, counts))


def _all_tasks(req: GpuRequest, part: PartitionInventory, shape: TaskShape) -> list[Problem]:
    """-n N: the tasks the partition's nodes can hold, the biggest nodes first, on at most -N nodes."""
    if req.ntasks is None:
        return []
    n, where = req.ntasks, f"partition {part.name!r}"
    use = len(part.nodes)
    if req.nodes is not None:
        use = min(use, req.nodes.max or req.nodes.min)
    tpn = req.ntasks_per_node

    def fits(**which: bool) -> int:
        return _biggest(use, [tasks_fitting(node, shape, per_node=tpn, **which) for node in part.nodes])

    limited = use < len(part.nodes)
    on = f" on {use} node(s)" if limited else ""
    more_nodes = f", or more nodes (-N; the partition has {len(part.nodes)})" if limited else ""
    cpus = heapq.nlargest(use, (node.cpus for node in part.nodes))
    spread = f" ({_spread(cpus, '')})" if len(cpus) > 1 else ""
    has = (
        f"-N {use} gives at most {sum(cpus)} CPUs of {where}{spread}"
        if limited
        else f"{where} has {sum(cpus)} CPUs in {_spread(cpus, '')}"
    )
    if not overcommit(req) and fits(memory=False, gpus=False) < n:
        most = fits(memory=False, gpus=False)
        each = f" x {shape.cpus_from}" if shape.cpus_from else ""
        return [
            Problem(
                f"--ntasks={n}{each} asks for {n} tasks of {shape.cpus} CPU{'s' if shape.cpus > 1 else ''} = "
                f"{n * shape.cpus} CPUs; {has}",
                f"ask for at most -n {most}{more_nodes}, or add -O (--overcommit) to let tasks share CPUs",
            )
        ]
    if shape.mem_mib is not None and fits(cpus=False, gpus=False) < n:
        most = fits(cpus=False, gpus=False)
        mem = heapq.nlargest(use, (node.memory_mb for node in part.nodes))
        return [
            Problem(
                f"--ntasks={n} x {shape.mem_from} = {_mib(n * shape.mem_mib)}: {where} has "
                f"{_mib(sum(mem))} of memory in {_spread(mem, ' MiB')}{on}, room for {most} such tasks",
                f"ask for at most -n {most}, or less memory per task{more_nodes}",
            )
        ]
    total_gpus = _biggest(use, [node.gpu_count(shape.gpu_type) for node in part.nodes])
    if shape.gpus and shape.gpus * n <= total_gpus and fits(cpus=False, memory=False) < n:
        # the plain total fits (inventory_checks says so when it does not); whole tasks per node do not
        most = fits(cpus=False, memory=False)
        return [
            Problem(
                f"--ntasks={n} x --gpus-per-task={shape.gpus}: a task's GPUs sit on one node, and the nodes of "
                f"{where}{on} hold only {most} such tasks",
                f"ask for at most -n {most}, or fewer GPUs per task{more_nodes}",
            )
        ]
    # a GPU total above the partition's is named by inventory_checks, not again here
    most = fits(cpus=not overcommit(req), gpus=shape.gpus * n <= total_gpus)
    if most < n:
        return [
            Problem(
                f"--ntasks={n}: CPUs, memory and GPUs per task together leave room for only {most} tasks on the "
                f"nodes of {where}{on}",
                f"ask for at most -n {most}, or less per task{more_nodes}",
            )
        ]
    return []


def _gpus_with_their_share(req: GpuRequest, part: PartitionInventory) -> list[Problem]:
    """--gpus=G with --cpus-per-gpu / --mem-per-gpu: each node holds only as many GPUs as its CPUs and
    memory give their share to."""
    if req.gpus is None or (
        req.cpus_per_gpu is None and (req.mem_per_gpu is None or not req.mem_per_gpu.kib)
    ):
        return []
    gtype, want = req.gpus.type, req.gpus.count
    if gtype is not None and gtype not in part.gpu_types:
        return []
    total = part.total("gpu", gtype)
    if want > total:
        return []  # inventory_checks names the plain total
    held = 0
    for node in part.nodes:
        k = node.gpu_count(gtype)
        if req.cpus_per_gpu:
            k = min(k, node.cpus // req.cpus_per_gpu)
        if req.mem_per_gpu is not None and req.mem_per_gpu.kib:
            k = min(k, int(node.memory_mb // req.mem_per_gpu.mib))
        held += k
    if held >= want:
        return []
    what = " and ".join(
        w
        for w, asked in (("CPUs", req.cpus_per_gpu), ("memory", req.mem_per_gpu and req.mem_per_gpu.kib))
        if asked
    )
    share = " and ".join(
        s
        for s in (
            f"--cpus-per-gpu={req.cpus_per_gpu}" if req.cpus_per_gpu else "",
            f"--mem-per-gpu={req.mem_per_gpu.render()}" if req.mem_per_gpu and req.mem_per_gpu.kib else "",
        )
        if s
    )
    return [
        Problem(
            f"--gpus={req.gpus.render()} with {share}: the nodes of partition {part.name!r} have the {what} "
            f"for only {held} GPUs with that share ({part.most_cpus} CPUs, {part.most_memory_mb} MiB at most per node)",
            f"ask for at most --gpus={held}, or a smaller share per GPU",
        )
    ]
