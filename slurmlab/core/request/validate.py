"""Catch what Slurm would reject or silently misread, before anything is submitted.

``validate(request, inventory)`` raises one :class:`~slurmlab.core.request.request.RequestProblems` (a RequestError)
listing every problem, each naming the offending value and the fix; it returns the request with non-fatal
oddities added to ``warnings``. Without an inventory only the static checks run. The rules live here; a request
to submit comes through :func:`slurmlab.core.request.pipeline.check_request`, the one caller of ``validate``.
"""

from __future__ import annotations

import dataclasses
import difflib
import re
from collections.abc import Iterable, Sequence

from slurmlab.core.request.inventory import ClusterInventory, PartitionInventory
from slurmlab.core.request.request import (
    GpuRequest,
    GresSpec,
    Problem,
    TimeLimit,
    VersionBound,
    raise_problems,
    retired_option_problem,
    retired_option_warning,
    version_text,
)
from slurmlab.core.slurm.hostlist import expand as expand_hostlist
from slurmlab.errors import ParseError

__all__ = ["check_inventory", "check_static", "validate"]


def validate(
    request: GpuRequest, inventory: ClusterInventory | None = None, *, version: Sequence[int] | None = None
) -> GpuRequest:
    """Raise RequestProblems listing every problem; else return ``request`` with new warnings added.

    ``version`` is the Slurm version of the cluster (``slurmlab.slurm.queries.slurm_version``): what one version
    accepts another refuses (``--uid``, ``--gres=gpu`` beside ``--gpus-per-node``). Without it such a request
    passes with a warning, as slurmlab cannot tell; it is never refused for an unknown version."""
    problems, warnings = check_static(request, version)
    if inventory is not None:
        more, more_warnings = check_inventory(request, inventory)
        problems += more
        warnings += more_warnings
    raise_problems(problems)
    return dataclasses.replace(request, warnings=request.warnings + tuple(warnings))


def _join(names: Iterable[str]) -> str:
    shown = [n if n else "(untyped)" for n in names]
    return ", ".join(shown) if shown else "none"


def _gres_arg(specs: Iterable[GresSpec]) -> str:
    return "--gres=" + ",".join(s.render() for s in specs)


# --------------------------------------------------------------------------- static checks


def check_static(req: GpuRequest, version: Sequence[int] | None = None) -> tuple[list[Problem], list[str]]:
    """Problems and warnings visible from the request alone (and the Slurm ``version``, when known)."""
    problems: list[Problem] = []
    warnings: list[str] = []
    _check_whole_vs_shared(req, problems)
    _check_gpu_counts(req, problems, warnings, version)
    _check_binding(req, problems, warnings)
    _check_cpu_mem(req, problems, warnings)
    _check_retired_options(req, problems, warnings, version)
    return problems, warnings


# 24.11 takes --gres=gpu:N beside --gpus-per-node=N; 26.05's salloc stops with the words below.
GRES_WITH_GPUS_PER_NODE = VersionBound((24, 11), (26, 5))
GRES_WITH_GPUS_PER_NODE_SAYS = "--gpus-per-node and --gres=gpu are mutually exclusive"


def _check_retired_options(req: GpuRequest, problems: list[Problem], warnings: list[str],
                           version: Sequence[int] | None) -> None:
    for group in req.extra:
        problem = retired_option_problem(group, version)
        if problem is not None:
            problems.append(problem)
            continue
        warning = retired_option_warning(group, version)
        if warning is not None:
            warnings.append(warning)


def _types(req: GpuRequest) -> set[str | None]:
    found: set[str | None] = {c.type for _, c in req.gpu_options if c.count}
    found |= {s.type for s in req.gpu_gres if s.amount}
    return found


def _check_whole_vs_shared(req: GpuRequest, problems: list[Problem]) -> None:
    shared = [s for s in req.shared_gres if s.amount]
    whole = _types(req)
    if shared and whole:
        shared_types = {s.type for s in shared}
        if None in whole or None in shared_types or whole & shared_types:
            gpu_args = [f"{n}={c.render()}" for n, c in req.gpu_options if c.count]
            gpu_args += [f"--gres={s.render()}" for s in req.gpu_gres if s.amount]
            problems.append(Problem(
                f"{', '.join(gpu_args)} and {_gres_arg(shared)} ask for the same GPU both whole (gpu) "
                f"and shared ({'/'.join(sorted({s.name for s in shared}))})",
                "a GPU is allocated either as gpu or as shard/mps, never both: keep only "
                f"{_gres_arg(shared)} to share a GPU, or only the GPU count for whole GPUs",
            ))
    names = {s.name for s in shared}
    if names == {"shard", "mps"}:
        problems.append(Problem(
            f"{_gres_arg(shared)} asks for both shards and MPS",
            "a GPU is shared either by shards (time-slicing) or by MPS, not both: keep one of them",
        ))
    if shared:
        if req.gpu_bind is not None and req.gpu_bind.kind not in ("per_task", "none"):
            problems.append(Problem(
                f"--gpu-bind={req.gpu_bind.render()} with {_gres_arg(shared)}: shared GRES binding "
                "is limited to per_task or none",
                "drop --gpu-bind, or use --gpu-bind=per_task:1 or --gpu-bind=none",
            ))
        if req.gpu_freq is not None:
            problems.append(Problem(
                f"--gpu-freq={req.gpu_freq} with {_gres_arg(shared)}: a shared GPU's clocks belong to every "
                "job on it",
                "drop --gpu-freq, or ask for whole GPUs (--gpus=N) to set their frequency",
            ))


def _check_gpu_counts(req: GpuRequest, problems: list[Problem], warnings: list[str],
                      version: Sequence[int] | None = None) -> None:
    named = {c.type for _, c in req.gpu_options if c.type}
    if len(named) > 1:
        args = ", ".join(f"{n}={c.render()}" for n, c in req.gpu_options)
        problems.append(Problem(
            f"{args} name different GPU types ({_join(sorted(named))})",
            "name one GPU type in all --gpus* options, or use --gres=gpu:TYPE_A:N,gpu:TYPE_B:M for a mix",
        ))
    gres_types = {s.type for s in req.gpu_gres if s.amount}
    if len(named) == 1 and gres_types and gres_types != named:
        args = ", ".join(f"{n}={c.render()}" for n, c in req.gpu_options if c.type)
        problems.append(Problem(
            f"{args} and {_gres_arg(req.gpu_gres)} name different GPU types",
            "ask for the GPUs in one place: either the --gpus* option or --gres=gpu:TYPE:N",
        ))
    seen: dict[str | None, GresSpec] = {}
    for spec in req.gpu_gres:
        if spec.type in seen:
            problems.append(Problem(
                f"--gres names gpu{':' + spec.type if spec.type else ''} twice "
                f"({seen[spec.type].render()} and {spec.render()})",
                "give each GPU type once in --gres, with the count you want",
            ))
        seen[spec.type] = spec
    gpn = req.gpus_per_node
    if gpn is not None and req.gpu_gres:
        # both --gres=gpu and --gpus-per-node are per-node counts of the same GPUs
        pair = f"--gpus-per-node={gpn.render()} and {_gres_arg(req.gpu_gres)}"
        refused = GRES_WITH_GPUS_PER_NODE.refuses(version)
        gres_total = sum(s.amount for s in req.gpu_gres)
        if refused:
            assert version  # refuses() is True only for a known version
            problems.append(Problem(
                f"{pair}: Slurm {version_text(version)} refuses the two together "
                f"(\"{GRES_WITH_GPUS_PER_NODE_SAYS}\")",
                f"keep one of them: --gpus-per-node={gpn.render()} alone asks for the same GPUs",
            ))
        elif gres_total != gpn.count or any(s.type not in (None, gpn.type) for s in req.gpu_gres):
            problems.append(Problem(
                f"{pair} give two different per-node GPU counts",
                "keep one of them: --gres=gpu:N and --gpus-per-node=N mean the same",
            ))
        elif refused is None:
            warnings.append(f"{pair} say the same thing twice, and {GRES_WITH_GPUS_PER_NODE.since()} refuse the "
                            f"two together (\"{GRES_WITH_GPUS_PER_NODE_SAYS}\"): keep one of them")
        else:
            warnings.append(f"{pair} say the same thing twice")
    fixed_nodes = req.nodes.min if req.nodes is not None and req.nodes.max in (None, req.nodes.min) else None
    if req.gpus is not None:
        total = req.gpus.count
        if req.gpus_per_task is not None and req.ntasks is not None:
            implied = req.gpus_per_task.count * req.ntasks
            if implied != total:
                problems.append(Problem(
                    f"--gpus={req.gpus.render()} conflicts with --gpus-per-task={req.gpus_per_task.render()} "
                    f"x --ntasks={req.ntasks} = {implied} GPUs",
                    f"drop --gpus, or make it --gpus={implied}",
                ))
        per_node = gpn.count if gpn is not None else (sum(s.amount for s in req.gpu_gres) or None)
        if per_node is not None and fixed_nodes is not None and per_node * fixed_nodes != total:
            problems.append(Problem(
                f"--gpus={req.gpus.render()} conflicts with {per_node} GPU(s) per node on {fixed_nodes} node(s) "
                f"= {per_node * fixed_nodes} GPU(s)",
                "give either the total (--gpus) or the per-node count (--gpus-per-node), not both",
            ))
        if total and req.nodes is not None and total < req.nodes.min:
            warnings.append(
                f"--gpus={req.gpus.render()} on at least {req.nodes.min} nodes leaves some nodes without a GPU"
            )
    if req.gpus_per_task is not None and req.gpus_per_task.count and req.ntasks is None and req.gpus is None:
        problems.append(Problem(
            f"--gpus-per-task={req.gpus_per_task.render()} without a task count: Slurm rejects "
            "--gpus-per-task without --ntasks or --gpus",
            f"add --ntasks=N (e.g. --ntasks=1 --gpus-per-task={req.gpus_per_task.render()})",
        ))
    if req.gpus_per_socket is not None and not any(g[0].startswith("--sockets-per-node") for g in req.extra):
        problems.append(Problem(
            f"--gpus-per-socket={req.gpus_per_socket.render()} without --sockets-per-node: Slurm needs the "
            "sockets per node to count GPUs per socket",
            "add --sockets-per-node=N, or use --gpus-per-node instead",
        ))


def _check_binding(req: GpuRequest, problems: list[Problem], warnings: list[str]) -> None:
    flags = set(req.gres_flags)
    for a, b in (("enforce-binding", "disable-binding"), ("one-task-per-sharing", "multiple-tasks-per-sharing")):
        if {a, b} <= flags:
            problems.append(Problem(
                f"--gres-flags={','.join(req.gres_flags)} sets both {a} and {b}",
                f"keep one of {a} or {b}",
            ))
    any_gpu = req.wants_gpus or req.wants_shared_gpu
    if not any_gpu:
        if req.gpu_bind is not None:
            warnings.append(f"--gpu-bind={req.gpu_bind.render()} has no effect: the request asks for no GPUs")
        if flags & {"enforce-binding", "disable-binding"}:
            warnings.append("--gres-flags binding has no effect: the request asks for no GPUs")
        if req.gpu_freq is not None:
            warnings.append(f"--gpu-freq={req.gpu_freq} has no effect: the request asks for no GPUs")
    if flags & {"one-task-per-sharing", "multiple-tasks-per-sharing"} and not req.wants_shared_gpu:
        warnings.append("--gres-flags=*-per-sharing only matters for shared GRES (shard/mps)")
    if req.exclusive is not None and req.wants_shared_gpu:
        warnings.append("--exclusive with shard/mps: the whole node is yours, so sharing one GPU gains nothing")


def _check_cpu_mem(req: GpuRequest, problems: list[Problem], warnings: list[str]) -> None:
    if req.cpus_per_gpu is not None and req.cpus_per_task is not None:
        problems.append(Problem(
            f"--cpus-per-gpu={req.cpus_per_gpu} and --cpus-per-task={req.cpus_per_task} are mutually exclusive",
            "keep one of them",
        ))
    mems = [(n, m) for n, m in (("--mem", req.mem), ("--mem-per-gpu", req.mem_per_gpu),
                                ("--mem-per-cpu", req.mem_per_cpu)) if m is not None]
    if len(mems) > 1:
        problems.append(Problem(
            f"{' and '.join(f'{n}={m.render()}' for n, m in mems)} are mutually exclusive",
            "give memory one way only: per node (--mem), per GPU (--mem-per-gpu) or per CPU (--mem-per-cpu)",
        ))
    if not req.wants_gpus:
        for name, value in (("--cpus-per-gpu", req.cpus_per_gpu), ("--mem-per-gpu", req.mem_per_gpu)):
            if value is not None:
                shown = value if isinstance(value, int) else value.render()
                warnings.append(f"{name}={shown} has no effect without whole GPUs (--gpus*/--gres=gpu)")
    if req.nodes is not None and req.ntasks is not None and req.ntasks < req.nodes.min:
        warnings.append(
            f"--ntasks={req.ntasks} on --nodes={req.nodes.render()}: Slurm lowers the node count to the task count"
        )


# --------------------------------------------------------------------------- checks against an inventory


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
        warnings.append("slurmlab could not tell which partition is the default; the request was checked "
                        f"against every partition ({_join(inv.partition_names)}) and Slurm picks one")
    else:
        return [], warnings
    problems: list[Problem] = []
    parts: list[PartitionInventory] = []
    for name in names:
        part = inv.partition(name)
        if part is None:
            close = difflib.get_close_matches(name, inv.partition_names, n=1)
            guess = f"did you mean {close[0]!r}? " if close else ""
            problems.append(Problem(
                f"--partition={name}: the cluster has no partition {name!r}",
                f"{guess}use one of: {_join(inv.partition_names)}",
            ))
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
        problems.append(Problem(
            f"--nodes={req.nodes.render()}: {where} has only {len(part.nodes)} node(s)",
            f"ask for at most --nodes={len(part.nodes)}, or use a bigger partition",
        ))
    # --- GPU types
    typed: list[tuple[str, str]] = [(f"{n}={c.render()}", c.type) for n, c in req.gpu_options if c.type]
    typed += [(f"--gres={s.render()}", s.type) for s in req.gres if s.type and s.name in ("gpu", "shard", "mps")]
    for arg, named in typed:
        if named not in part.gpu_types:
            other = [p for p in inv.partitions_with_gpu_type(named) if p != part.name]
            fix = f"use a GPU type of {where}: {_join(part.gpu_types)}"
            if not inv.partitions_with_gpu_type(named):
                cluster_types = sorted({t for q in inv.partitions for t in q.gpu_types})
                fix += f" (no partition has {named}; the cluster's GPU types are {_join(cluster_types)})"
            if other:
                fix = f"{named} GPUs are in partition {' or '.join(other)}: add -p {other[0]}; or {fix}"
            problems.append(Problem(f"{arg}: {where} has no {named} GPUs", fix))
    # --- GRES names
    for spec in req.gres:
        if spec.name == "none" or spec.name in part.gres_names:
            continue
        elsewhere = inv.partitions_with_gres(spec.name)
        if elsewhere:
            hint = f"{spec.name} is offered in partition {' or '.join(elsewhere)}: add -p {elsewhere[0]}"
        else:
            hint = f"this cluster offers the GRES: {_join(inv.gres_names)}"
        problems.append(Problem(f"--gres={spec.render()}: {where} offers no {spec.name!r} GRES", hint))
    # --- per-node counts
    per_node: list[tuple[str, str, str | None, int]] = []
    if req.gpus_per_node is not None:
        per_node.append((f"--gpus-per-node={req.gpus_per_node.render()}", "gpu", req.gpus_per_node.type,
                         req.gpus_per_node.count))
    per_node += [(f"--gres={s.render()}", s.name, s.type, s.amount) for s in req.gres if s.name != "none"]
    if req.gpus_per_task is not None and req.ntasks_per_node is not None:
        per_node.append((f"--gpus-per-task={req.gpus_per_task.render()} x --ntasks-per-node={req.ntasks_per_node}",
                         "gpu", req.gpus_per_task.type, req.gpus_per_task.count * req.ntasks_per_node))
    for arg, name, gtype, count in per_node:
        most = part.most_per_node(name, gtype)
        if count > most and (gtype is None or gtype in part.gpu_types) and name in part.gres_names:
            noun = {"gpu": "GPUs", "shard": "shards", "mps": "MPS shares"}.get(name, name)
            what = f"{gtype} {noun}" if gtype else noun
            holders = part.nodes_with_most(name, gtype)
            problems.append(Problem(
                f"{arg}: no node of {where} has {count} {what} (the most is {most}, on {_join(holders)})",
                f"ask for at most {most} per node and more nodes (--nodes) if you need more",
            ))
            continue
        need = req.nodes.min if req.nodes is not None else 1
        fit = [n.name for n in part.nodes if n.gres_count(name, gtype) >= count]
        if count and 0 < len(fit) < need:
            noun = {"gpu": "GPUs", "shard": "shards", "mps": "MPS shares"}.get(name, name)
            what = f"{gtype} {noun}" if gtype else noun
            problems.append(Problem(
                f"{arg} on --nodes={req.nodes.render() if req.nodes else need}: only {len(fit)} node(s) of "
                f"{where} have {count} {what} ({_join(fit)})",
                f"ask for at most --nodes={len(fit)}, or fewer {noun} per node",
            ))
    # --- totals
    totals: list[tuple[str, str | None, int]] = []
    if req.gpus is not None:
        totals.append((f"--gpus={req.gpus.render()}", req.gpus.type, req.gpus.count))
    if req.gpus_per_task is not None and req.ntasks is not None:
        totals.append((f"--gpus-per-task={req.gpus_per_task.render()} x --ntasks={req.ntasks}",
                       req.gpus_per_task.type, req.gpus_per_task.count * req.ntasks))
    for arg, gtype, count in totals:
        have = part.total("gpu", gtype)
        if count > have and (gtype is None or gtype in part.gpu_types):
            what = f"{gtype} GPUs" if gtype else "GPUs"
            problems.append(Problem(
                f"{arg}: {where} has only {have} {what} in total",
                f"ask for at most {have}, or use a partition with more GPUs",
            ))
    problems += _check_cpus_mem_nodes(req, part)
    return problems


_OVERCOMMIT = ("--overcommit", "-O")


def _check_task_cpus(req: GpuRequest, part: PartitionInventory) -> list[Problem]:
    """More task CPUs than the partition's nodes hold at all: Slurm 24.11 refuses it at submit, 22.05 and
    26.05 leave it pending (PartitionConfig) for ever. Overcommit (-O) lets tasks share CPUs, so it passes."""
    if req.ntasks is None or any(g[0].split("=")[0] in _OVERCOMMIT for g in req.extra):
        return []
    cpus = sorted((n.cpus for n in part.nodes), reverse=True)
    if not cpus or 0 in cpus:  # a node whose CPU count is unknown: no sure answer
        return []
    most_nodes = (req.nodes.max or req.nodes.min) if req.nodes is not None else len(cpus)
    have = sum(cpus[:most_nodes])
    per_task = req.cpus_per_task or 1
    need = req.ntasks * per_task
    if need <= have:
        return []
    arg = f"--ntasks={req.ntasks}" + (f" x --cpus-per-task={per_task}" if per_task > 1 else "")
    on = f" on {most_nodes} node(s)" if most_nodes < len(cpus) else ""
    fix = f"ask for at most --ntasks={have // per_task}"
    if most_nodes < len(cpus):
        fix += f", or more nodes (the partition has {len(cpus)})"
    return [Problem(
        f"{arg} = {need} CPUs: partition {part.name!r} has only {have} CPUs{on}; Slurm would refuse it "
        "or leave it pending for ever (PartitionConfig)",
        fix + " (--overcommit lets tasks share CPUs)",
    )]


def _check_cpus_mem_nodes(req: GpuRequest, part: PartitionInventory) -> list[Problem]:
    problems: list[Problem] = []
    where = f"partition {part.name!r}"
    cpus_needed: list[tuple[str, int]] = []
    if req.cpus_per_task is not None:
        tasks = req.ntasks_per_node or 1
        arg = f"--cpus-per-task={req.cpus_per_task}"
        cpus_needed.append((arg + (f" x --ntasks-per-node={tasks}" if tasks > 1 else ""), req.cpus_per_task * tasks))
    if req.cpus_per_gpu is not None and req.gpus_per_node is not None:
        cpus_needed.append((f"--cpus-per-gpu={req.cpus_per_gpu} x --gpus-per-node={req.gpus_per_node.render()}",
                            req.cpus_per_gpu * req.gpus_per_node.count))
    for arg, cpus in cpus_needed:
        if cpus > part.most_cpus:
            problems.append(Problem(
                f"{arg} = {cpus} CPUs per node: no node of {where} has more than {part.most_cpus}",
                f"ask for at most {part.most_cpus} CPUs per node",
            ))
    problems += _check_task_cpus(req, part)
    mem_needed: list[tuple[str, float]] = []
    if req.mem is not None and req.mem.kib:
        mem_needed.append((f"--mem={req.mem.render()}", req.mem.mib))
    if req.mem_per_gpu is not None and req.gpus_per_node is not None:
        mem_needed.append((f"--mem-per-gpu={req.mem_per_gpu.render()} x --gpus-per-node="
                           f"{req.gpus_per_node.render()}", req.mem_per_gpu.mib * req.gpus_per_node.count))
    for arg, mib in mem_needed:
        if mib > part.most_memory_mb:
            problems.append(Problem(
                f"{arg}: no node of {where} has that much memory (the most is {part.most_memory_mb} MiB)",
                f"ask for at most --mem={part.most_memory_mb}M per node (or --mem=0 for all of it)",
            ))
    if req.time is not None and part.max_time_s is not None:
        if req.time.seconds is None or req.time.seconds > part.max_time_s:
            limit = TimeLimit(part.max_time_s).render()
            problems.append(Problem(
                f"--time={req.time.render()} is above the time limit of {where} ({limit}); "
                "the job would wait forever (PartitionTimeLimit)",
                f"ask for at most --time={limit}, or use a partition with a longer limit",
            ))
    if req.constraint is not None:
        wanted = [w for w in re.split(r"[&|,\[\]()]", req.constraint) if w]
        names = [re.sub(r"\*\d+$", "", w) for w in wanted]
        unknown = [n for n in names if n not in part.features]
        if unknown:
            problems.append(Problem(
                f"--constraint={req.constraint}: no node of {where} has the feature(s) {_join(unknown)}",
                f"use features of {where}: {_join(part.features)}",
            ))
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
            problems.append(Problem(
                f"--nodelist={value}: {_join(missing)} not in {where}",
                f"pick nodes of {where}: {_join(part.node_names)}",
            ))
    return problems
