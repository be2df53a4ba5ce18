"""Catch what Slurm would reject or silently misread, before anything is submitted.

``validate(request, inventory)`` raises one :class:`~slurmlab.core.request.request.RequestProblems` (a RequestError)
listing every problem, each naming the offending value and the fix; it returns the request with non-fatal
oddities added to ``warnings``. Without an inventory only the static checks run. The rules of the request alone
live here, those against the cluster in :mod:`slurmlab.core.request.inventory_checks`; a request to submit comes
through :func:`slurmlab.core.request.pipeline.check_request`, the one caller of ``validate``.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Iterable, Sequence

from slurmlab.core.request.inventory import ClusterInventory
from slurmlab.core.request.inventory_checks import check_inventory
from slurmlab.core.request.option_versions import (
    VersionBound,
    retired_option_problem,
    retired_option_warning,
    version_text,
)
from slurmlab.core.request.problems import Problem, join_names, raise_problems
from slurmlab.core.request.request import GpuRequest
from slurmlab.core.request.values import GresSpec

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


def _check_retired_options(
    req: GpuRequest, problems: list[Problem], warnings: list[str], version: Sequence[int] | None
) -> None:
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
            problems.append(
                Problem(
                    f"{', '.join(gpu_args)} and {_gres_arg(shared)} ask for the same GPU both whole (gpu) "
                    f"and shared ({'/'.join(sorted({s.name for s in shared}))})",
                    "a GPU is allocated either as gpu or as shard/mps, never both: keep only "
                    f"{_gres_arg(shared)} to share a GPU, or only the GPU count for whole GPUs",
                )
            )
    names = {s.name for s in shared}
    if names == {"shard", "mps"}:
        problems.append(
            Problem(
                f"{_gres_arg(shared)} asks for both shards and MPS",
                "a GPU is shared either by shards (time-slicing) or by MPS, not both: keep one of them",
            )
        )
    if shared:
        if req.gpu_bind is not None and req.gpu_bind.kind not in ("per_task", "none"):
            problems.append(
                Problem(
                    f"--gpu-bind={req.gpu_bind.render()} with {_gres_arg(shared)}: shared GRES binding "
                    "is limited to per_task or none",
                    "drop --gpu-bind, or use --gpu-bind=per_task:1 or --gpu-bind=none",
                )
            )
        if req.gpu_freq is not None:
            problems.append(
                Problem(
                    f"--gpu-freq={req.gpu_freq} with {_gres_arg(shared)}: a shared GPU's clocks belong to every "
                    "job on it",
                    "drop --gpu-freq, or ask for whole GPUs (--gpus=N) to set their frequency",
                )
            )


def _check_gpu_counts(
    req: GpuRequest, problems: list[Problem], warnings: list[str], version: Sequence[int] | None = None
) -> None:
    _check_gpu_types(req, problems)
    _check_gres_beside_gpus_per_node(req, problems, warnings, version)
    _check_gpu_total(req, problems, warnings)
    _check_per_task_and_socket(req, problems)


def _check_gpu_types(req: GpuRequest, problems: list[Problem]) -> None:
    """One GPU type across the --gpus* options and --gres=gpu, each type once."""
    named = {c.type for _, c in req.gpu_options if c.type}
    if len(named) > 1:
        args = ", ".join(f"{n}={c.render()}" for n, c in req.gpu_options)
        problems.append(
            Problem(
                f"{args} name different GPU types ({join_names(sorted(named))})",
                "name one GPU type in all --gpus* options, or use --gres=gpu:TYPE_A:N,gpu:TYPE_B:M for a mix",
            )
        )
    gres_types = {s.type for s in req.gpu_gres if s.amount}
    if len(named) == 1 and gres_types and gres_types != named:
        args = ", ".join(f"{n}={c.render()}" for n, c in req.gpu_options if c.type)
        problems.append(
            Problem(
                f"{args} and {_gres_arg(req.gpu_gres)} name different GPU types",
                "ask for the GPUs in one place: either the --gpus* option or --gres=gpu:TYPE:N",
            )
        )
    seen: dict[str | None, GresSpec] = {}
    for spec in req.gpu_gres:
        if spec.type in seen:
            problems.append(
                Problem(
                    f"--gres names gpu{':' + spec.type if spec.type else ''} twice "
                    f"({seen[spec.type].render()} and {spec.render()})",
                    "give each GPU type once in --gres, with the count you want",
                )
            )
        seen[spec.type] = spec


def _check_gres_beside_gpus_per_node(
    req: GpuRequest, problems: list[Problem], warnings: list[str], version: Sequence[int] | None
) -> None:
    gpn = req.gpus_per_node
    if gpn is not None and req.gpu_gres:
        # both --gres=gpu and --gpus-per-node are per-node counts of the same GPUs
        pair = f"--gpus-per-node={gpn.render()} and {_gres_arg(req.gpu_gres)}"
        refused = GRES_WITH_GPUS_PER_NODE.refuses(version)
        gres_total = sum(s.amount for s in req.gpu_gres)
        if refused:
            assert version  # refuses() is True only for a known version
            problems.append(
                Problem(
                    f"{pair}: Slurm {version_text(version)} refuses the two together "
                    f'("{GRES_WITH_GPUS_PER_NODE_SAYS}")',
                    f"keep one of them: --gpus-per-node={gpn.render()} alone asks for the same GPUs",
                )
            )
        elif gres_total != gpn.count or any(s.type not in (None, gpn.type) for s in req.gpu_gres):
            problems.append(
                Problem(
                    f"{pair} give two different per-node GPU counts",
                    "keep one of them: --gres=gpu:N and --gpus-per-node=N mean the same",
                )
            )
        elif refused is None:
            warnings.append(
                f"{pair} say the same thing twice, and {GRES_WITH_GPUS_PER_NODE.since()} refuse the "
                f'two together ("{GRES_WITH_GPUS_PER_NODE_SAYS}"): keep one of them'
            )
        else:
            warnings.append(f"{pair} say the same thing twice")


def _check_gpu_total(req: GpuRequest, problems: list[Problem], warnings: list[str]) -> None:
    """--gpus against the same count given per task or per node."""
    gpn = req.gpus_per_node
    fixed_nodes = req.nodes.min if req.nodes is not None and req.nodes.max in (None, req.nodes.min) else None
    if req.gpus is not None:
        total = req.gpus.count
        if req.gpus_per_task is not None and req.ntasks is not None:
            implied = req.gpus_per_task.count * req.ntasks
            if implied != total:
                problems.append(
                    Problem(
                        f"--gpus={req.gpus.render()} conflicts with --gpus-per-task={req.gpus_per_task.render()} "
                        f"x --ntasks={req.ntasks} = {implied} GPUs",
                        f"drop --gpus, or make it --gpus={implied}",
                    )
                )
        per_node = gpn.count if gpn is not None else (sum(s.amount for s in req.gpu_gres) or None)
        if per_node is not None and fixed_nodes is not None and per_node * fixed_nodes != total:
            problems.append(
                Problem(
                    f"--gpus={req.gpus.render()} conflicts with {per_node} GPU(s) per node on {fixed_nodes} node(s) "
                    f"= {per_node * fixed_nodes} GPU(s)",
                    "give either the total (--gpus) or the per-node count (--gpus-per-node), not both",
                )
            )
        if total and req.nodes is not None and total < req.nodes.min:
            warnings.append(
                f"--gpus={req.gpus.render()} on at least {req.nodes.min} nodes leaves some nodes without a GPU"
            )


def _check_per_task_and_socket(req: GpuRequest, problems: list[Problem]) -> None:
    """The counts Slurm needs beside --gpus-per-task and --gpus-per-socket."""
    # Slurm counts the tasks from -N or --ntasks-per-node when -n is absent (22.05 accepts `-N2 --gpus-per-task=1`
    # and `--ntasks-per-node=2 --gpus-per-task=1`); only with none of them is there no task count at all
    counted = (
        req.ntasks is not None
        or req.gpus is not None
        or req.nodes is not None
        or req.ntasks_per_node is not None
    )
    if req.gpus_per_task is not None and req.gpus_per_task.count and not counted:
        problems.append(
            Problem(
                f"--gpus-per-task={req.gpus_per_task.render()} without a task count: Slurm rejects "
                "--gpus-per-task without --ntasks or --gpus",
                f"add --ntasks=N (e.g. --ntasks=1 --gpus-per-task={req.gpus_per_task.render()})",
            )
        )
    if req.gpus_per_socket is not None and not any(g[0].startswith("--sockets-per-node") for g in req.extra):
        problems.append(
            Problem(
                f"--gpus-per-socket={req.gpus_per_socket.render()} without --sockets-per-node: Slurm needs the "
                "sockets per node to count GPUs per socket",
                "add --sockets-per-node=N, or use --gpus-per-node instead",
            )
        )


def _check_binding(req: GpuRequest, problems: list[Problem], warnings: list[str]) -> None:
    flags = set(req.gres_flags)
    for a, b in (
        ("enforce-binding", "disable-binding"),
        ("one-task-per-sharing", "multiple-tasks-per-sharing"),
    ):
        if {a, b} <= flags:
            problems.append(
                Problem(
                    f"--gres-flags={','.join(req.gres_flags)} sets both {a} and {b}",
                    f"keep one of {a} or {b}",
                )
            )
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
        warnings.append(
            "--exclusive with shard/mps: the whole node is yours, so sharing one GPU gains nothing"
        )


def _check_cpu_mem(req: GpuRequest, problems: list[Problem], warnings: list[str]) -> None:
    if req.cpus_per_gpu is not None and req.cpus_per_task is not None:
        problems.append(
            Problem(
                f"--cpus-per-gpu={req.cpus_per_gpu} and --cpus-per-task={req.cpus_per_task} are mutually exclusive",
                "keep one of them",
            )
        )
    mems = [
        (n, m)
        for n, m in (
            ("--mem", req.mem),
            ("--mem-per-gpu", req.mem_per_gpu),
            ("--mem-per-cpu", req.mem_per_cpu),
        )
        if m is not None
    ]
    if len(mems) > 1:
        problems.append(
            Problem(
                f"{' and '.join(f'{n}={m.render()}' for n, m in mems)} are mutually exclusive",
                "give memory one way only: per node (--mem), per GPU (--mem-per-gpu) or per CPU (--mem-per-cpu)",
            )
        )
    if not req.wants_gpus:
        for name, value in (("--cpus-per-gpu", req.cpus_per_gpu), ("--mem-per-gpu", req.mem_per_gpu)):
            if value is not None:
                shown = value if isinstance(value, int) else value.render()
                warnings.append(f"{name}={shown} has no effect without whole GPUs (--gpus*/--gres=gpu)")
    if req.nodes is not None and req.ntasks is not None and req.ntasks < req.nodes.min:
        warnings.append(
            f"--ntasks={req.ntasks} on --nodes={req.nodes.render()}: Slurm lowers the node count to the task count"
        )
