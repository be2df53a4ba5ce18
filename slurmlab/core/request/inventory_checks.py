"""The checks of a request against what the cluster offers (its partitions, nodes, GPU types and GRES).

Run by :func:`slurmlab.core.request.validate.validate` after the checks of the request alone; each problem names
the offending value and the fix, often another partition that has what was asked for. Whether the tasks fit the
partition's nodes at all (CPUs, memory, GPUs per task) is :mod:`slurmlab.core.request.capacity_checks`.
"""

from __future__ import annotations

import difflib
import re

from slurmlab.core.request.capacity_checks import check_capacity
from slurmlab.core.request.inventory import ClusterInventory, PartitionInventory
from slurmlab.core.request.problems import Problem, join_names
from slurmlab.core.request.request import GpuRequest
from slurmlab.core.request.values import TimeLimit
from slurmlab.core.slurm.hostlist import expand as expand_hostlist
from slurmlab.errors import ParseError

__all__ = ["check_inventory"]


def check_inventory(req: GpuRequest, inv: ClusterInventory) -> tuple[list[Problem], list[str]]:
    """Problems and warnings from comparing the request with what the cluster offers."""
    warnings: list[str] = []
    if req.partition is not None:
        names = req.partition.split(",")
    elif inv.default_partition is not None:
        names = [inv.default_partition.name]
    elif inv.partition_names:
        # Not knowing the default is no reason to refuse (Slurm knows it): the request passes
        # when some partition could run it, as Slurm would then pick one or say why not.
        names = list(inv.partition_names)
        warnings.append(
            "slurmlab could not tell which partition is the default; the request was checked "
            f"against every partition ({join_names(inv.partition_names)}) and Slurm picks one"
        )
    else:
        return [], warnings
    problems: list[Problem] = []
    parts: list[PartitionInventory] = []
    for name in names:
        part = inv.partition(name)
        if part is None:
            close = difflib.get_close_matches(name, inv.partition_names, n=1)
            guess = f"did you mean {close[0]!r}? " if close else ""
            problems.append(
                Problem(
                    f"--partition={name}: the cluster has no partition {name!r}",
                    f"{guess}use one of: {join_names(inv.partition_names)}",
                )
            )
        else:
            parts.append(part)
    if problems:
        return problems, warnings
    per_part = [_check_partition(req, part, inv) for part in parts]
    # with several partitions Slurm uses whichever can run the job, so one that fits is enough
    if any(not found for found in per_part):
        return [], warnings
    for found in per_part:
        problems += found
    return problems, warnings


def _check_partition(req: GpuRequest, part: PartitionInventory, inv: ClusterInventory) -> list[Problem]:
    problems: list[Problem] = []
    where = f"partition {part.name!r}"
    if req.nodes is not None and req.nodes.min > len(part.nodes):
        problems.append(
            Problem(
                f"--nodes={req.nodes.render()}: {where} has only {len(part.nodes)} node(s)",
                f"ask for at most --nodes={len(part.nodes)}, or use a bigger partition",
            )
        )
    problems += _check_gpu_types_offered(req, part, inv, where)
    problems += _check_gres_offered(req, part, inv, where)
    problems += _check_per_node_counts(req, part, where)
    problems += _check_gpu_totals(req, part, where)
    problems += _check_cpus_mem_nodes(req, part)
    problems += check_capacity(req, part)
    return problems


def _check_gpu_types_offered(
    req: GpuRequest, part: PartitionInventory, inv: ClusterInventory, where: str
) -> list[Problem]:
    problems: list[Problem] = []
    typed: list[tuple[str, str]] = [(f"{n}={c.render()}", c.type) for n, c in req.gpu_options if c.type]
    typed += [
        (f"--gres={s.render()}", s.type) for s in req.gres if s.type and s.name in ("gpu", "shard", "mps")
    ]
    for arg, named in typed:
        if named not in part.gpu_types:
            other = [p for p in inv.partitions_with_gpu_type(named) if p != part.name]
            fix = f"use a GPU type of {where}: {join_names(part.gpu_types)}"
            if not inv.partitions_with_gpu_type(named):
                cluster_types = sorted({t for q in inv.partitions for t in q.gpu_types})
                fix += f" (no partition has {named}; the cluster's GPU types are {join_names(cluster_types)})"
            if other:
                fix = f"{named} GPUs are in partition {' or '.join(other)}: add -p {other[0]}; or {fix}"
            problems.append(Problem(f"{arg}: {where} has no {named} GPUs", fix))
    return problems


def _check_gres_offered(
    req: GpuRequest, part: PartitionInventory, inv: ClusterInventory, where: str
) -> list[Problem]:
    problems: list[Problem] = []
    for spec in req.gres:
        if spec.name == "none" or spec.name in part.gres_names:
            continue
        elsewhere = inv.partitions_with_gres(spec.name)
        if elsewhere:
            hint = f"{spec.name} is offered in partition {' or '.join(elsewhere)}: add -p {elsewhere[0]}"
        else:
            hint = f"this cluster offers the GRES: {join_names(inv.gres_names)}"
        problems.append(Problem(f"--gres={spec.render()}: {where} offers no {spec.name!r} GRES", hint))
    return problems


def _check_per_node_counts(req: GpuRequest, part: PartitionInventory, where: str) -> list[Problem]:
    problems: list[Problem] = []
    per_node: list[tuple[str, str, str | None, int]] = []
    if req.gpus_per_node is not None:
        per_node.append(
            (
                f"--gpus-per-node={req.gpus_per_node.render()}",
                "gpu",
                req.gpus_per_node.type,
                req.gpus_per_node.count,
            )
        )
    per_node += [(f"--gres={s.render()}", s.name, s.type, s.amount) for s in req.gres if s.name != "none"]
    if req.gpus_per_task is not None and req.ntasks_per_node is not None:
        per_node.append(
            (
                f"--gpus-per-task={req.gpus_per_task.render()} x --ntasks-per-node={req.ntasks_per_node}",
                "gpu",
                req.gpus_per_task.type,
                req.gpus_per_task.count * req.ntasks_per_node,
            )
        )
    for arg, name, gtype, count in per_node:
        most = part.most_per_node(name, gtype)
        if count > most and (gtype is None or gtype in part.gpu_types) and name in part.gres_names:
            noun = {"gpu": "GPUs", "shard": "shards", "mps": "MPS shares"}.get(name, name)
            what = f"{gtype} {noun}" if gtype else noun
            holders = part.nodes_with_most(name, gtype)
            problems.append(
                Problem(
                    f"{arg}: no node of {where} has {count} {what} (the most is {most}, on {join_names(holders)})",
                    f"ask for at most {most} per node and more nodes (--nodes) if you need more",
                )
            )
            continue
        need = req.nodes.min if req.nodes is not None else 1
        fit = [n.name for n in part.nodes if n.gres_count(name, gtype) >= count]
        if count and 0 < len(fit) < need:
            noun = {"gpu": "GPUs", "shard": "shards", "mps": "MPS shares"}.get(name, name)
            what = f"{gtype} {noun}" if gtype else noun
            problems.append(
                Problem(
                    f"{arg} on --nodes={req.nodes.render() if req.nodes else need}: only {len(fit)} node(s) of "
                    f"{where} have {count} {what} ({join_names(fit)})",
                    f"ask for at most --nodes={len(fit)}, or fewer {noun} per node",
                )
            )
    return problems


def _check_gpu_totals(req: GpuRequest, part: PartitionInventory, where: str) -> list[Problem]:
    problems: list[Problem] = []
    totals: list[tuple[str, str | None, int]] = []
    if req.gpus is not None:
        totals.append((f"--gpus={req.gpus.render()}", req.gpus.type, req.gpus.count))
    # a task's GPUs more than any node has: capacity_checks names that, the more useful fix
    per_task_fits = req.gpus_per_task is not None and req.gpus_per_task.count <= max(
        (n.gpu_count(req.gpus_per_task.type) for n in part.nodes), default=0
    )
    if req.gpus_per_task is not None and req.ntasks is not None and per_task_fits:
        totals.append(
            (
                f"--gpus-per-task={req.gpus_per_task.render()} x --ntasks={req.ntasks}",
                req.gpus_per_task.type,
                req.gpus_per_task.count * req.ntasks,
            )
        )
    for arg, gtype, count in totals:
        have = part.total("gpu", gtype)
        if count > have and (gtype is None or gtype in part.gpu_types):
            what = f"{gtype} GPUs" if gtype else "GPUs"
            problems.append(
                Problem(
                    f"{arg}: {where} has only {have} {what} in total",
                    f"ask for at most {have}, or use a partition with more GPUs",
                )
            )
    return problems


def _check_cpus_mem_nodes(req: GpuRequest, part: PartitionInventory) -> list[Problem]:
    problems: list[Problem] = []
    where = f"partition {part.name!r}"
    cpus_needed: list[tuple[str, int]] = []
    if req.cpus_per_task is not None:
        tasks = req.ntasks_per_node or 1
        arg = f"--cpus-per-task={req.cpus_per_task}"
        cpus_needed.append(
            (arg + (f" x --ntasks-per-node={tasks}" if tasks > 1 else ""), req.cpus_per_task * tasks)
        )
    if req.cpus_per_gpu is not None and req.gpus_per_node is not None:
        cpus_needed.append(
            (
                f"--cpus-per-gpu={req.cpus_per_gpu} x --gpus-per-node={req.gpus_per_node.render()}",
                req.cpus_per_gpu * req.gpus_per_node.count,
            )
        )
    for arg, cpus in cpus_needed:
        if cpus > part.most_cpus:
            problems.append(
                Problem(
                    f"{arg} = {cpus} CPUs per node: no node of {where} has more than {part.most_cpus}",
                    f"ask for at most {part.most_cpus} CPUs per node",
                )
            )
    mem_needed: list[tuple[str, float]] = []
    if req.mem is not None and req.mem.kib:
        mem_needed.append((f"--mem={req.mem.render()}", req.mem.mib))
    if req.mem_per_gpu is not None and req.gpus_per_node is not None:
        mem_needed.append(
            (
                f"--mem-per-gpu={req.mem_per_gpu.render()} x --gpus-per-node={req.gpus_per_node.render()}",
                req.mem_per_gpu.mib * req.gpus_per_node.count,
            )
        )
    for arg, mib in mem_needed:
        if mib > part.most_memory_mb:
            problems.append(
                Problem(
                    f"{arg}: no node of {where} has that much memory (the most is {part.most_memory_mb} MiB)",
                    f"ask for at most --mem={part.most_memory_mb}M per node (or --mem=0 for all of it)",
                )
            )
    if req.time is not None and part.max_time_s is not None:
        if req.time.seconds is None or req.time.seconds > part.max_time_s:
            limit = TimeLimit(part.max_time_s).render()
            problems.append(
                Problem(
                    f"--time={req.time.render()} is above the time limit of {where} ({limit}); "
                    "the job would wait forever (PartitionTimeLimit)",
                    f"ask for at most --time={limit}, or use a partition with a longer limit",
                )
            )
    if req.constraint is not None:
        wanted = [w for w in re.split(r"[&|,\[\]()]", req.constraint) if w]
        names = [re.sub(r"\*\d+$", "", w) for w in wanted]
        unknown = [n for n in names if n not in part.features]
        if unknown:
            problems.append(
                Problem(
                    f"--constraint={req.constraint}: no node of {where} has the feature(s) {join_names(unknown)}",
                    f"use features of {where}: {join_names(part.features)}",
                )
            )
    for opt, value in (("--nodelist", req.nodelist), ("--exclude", req.exclude)):
        if value is None or "/" in value:
            continue  # a file of host names: Slurm reads it, we cannot
        try:
            hosts = expand_hostlist(value)
        except ParseError as err:
            fix = f"{err.hint}; " if err.hint else ""
            problems.append(Problem(f"{opt}={value}: {err.message}", f"{fix}write it like node[1-3,7]"))
            continue
        missing = [h for h in hosts if h not in part.node_names]
        if missing and opt == "--nodelist":
            problems.append(
                Problem(
                    f"--nodelist={value}: {join_names(missing)} not in {where}",
                    f"pick nodes of {where}: {join_names(part.node_names)}",
                )
            )
    return problems
