"""Slurm's own view of a step's GPUs, for the checks when no GPU hardware can be asked.

What Slurm granted (:func:`grant_from_job`, from ``scontrol show job -d``), which GPU each task was
handed (:func:`slurm_view_devices`: ``slurm:<node>:gpu<global index>``, the only identity Slurm has
for a GPU), the job's shards (:func:`shard_gpus_of`), and I7/I10 judged on that view. Pure: the
step's reports come in, :mod:`.verify` runs the step.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import replace
from typing import Any

from slurmlab.core.gpu.mig import is_mig_type
from slurmlab.core.request.step_request import gpu_items, gres_count, shared_items
from slurmlab.core.slurm import hostlist
from slurmlab.experiments.isolation import check_i10, parse_cpulist
from slurmlab.experiments.isolation_result import (
    EXCLUSIVE,
    FAIL,
    INFO,
    ISOLATED,
    MIG,
    NO_GPUS,
    NOT_ISOLATED,
    PASS,
    SHARED,
    SKIP,
    CheckResult,
    Grant,
)
from slurmlab.experiments.timeslice_result import TimesliceResult

__all__ = [
    "grant_from_job",
    "gpu_verdict",
    "verdict_of",
    "i10_of_timeslice",
    "shard_gpus_of",
    "slurm_i7",
    "slurm_view_devices",
    "with_slurm_view",
]


def grant_from_job(job: Any, tasks: int | None = None) -> Grant:
    """What Slurm granted each task, read from the job (``scontrol show job -d``)."""
    tasks = tasks or int(getattr(job, "num_tasks", None) or 1)
    per_task = gpu_items(job.tres_per_task)
    per_node = gpu_items(job.tres_per_node)
    per_job = gpu_items(job.tres_per_job)
    shared = any(shared_items(x) for x in (job.tres_per_task, job.tres_per_node, job.tres_per_job))
    shared = shared or any(shard_gpus_of(job).values())
    types = {t for a in job.gpu_allocs for t in a.gpu_types}
    sharing = MIG if any(is_mig_type(t or "") for t in types) else EXCLUSIVE
    gpus_per_task: int | None
    if per_task:
        gpus_per_task = gres_count(per_task)
    elif per_job or per_node:
        held = [len(a.gpu_indices) for a in job.gpu_allocs]
        nodes = max(1, len(held))
        per_node_tasks = -(-tasks // nodes)
        on_node = min(held) if held else gres_count(per_node or per_job)
        # fewer GPUs than tasks on a node: the tasks of one step share them
        gpus_per_task = on_node if on_node < per_node_tasks else max(1, on_node // per_node_tasks)
        if on_node < per_node_tasks and sharing == EXCLUSIVE:
            sharing = SHARED
    else:
        gpus_per_task = 1 if shared else 0
    if shared:
        sharing = SHARED
    bind = job.tres_bind or None
    if bind:
        bind = ",".join(
            part.split(":", 1)[-1] if part.startswith(("gpu:", "gres/gpu:")) else part
            for part in str(bind).split("+")
        )
        if job.gres_binding_enforced:
            bind += ",enforce-binding"
    elif job.gres_binding_enforced:
        bind = "enforce-binding"
    return Grant(
        gpus_per_task, sharing, next(iter(t for t in types if is_mig_type(t or "")), None), bind, None
    )


def _step_gpu_indices(env: Mapping[str, str]) -> list[int]:
    step = [s.strip() for s in (env.get("SLURM_STEP_GPUS") or env.get("SLURM_JOB_GPUS") or "").split(",")]
    step = [s for s in step if s]
    cvd = [c.strip() for c in (env.get("CUDA_VISIBLE_DEVICES") or "").split(",") if c.strip()]
    if not all(s.isdigit() for s in step):
        raise ValueError(f"SLURM_STEP_GPUS={env.get('SLURM_STEP_GPUS')!r} is not a list of GPU indices")
    if not cvd or len(cvd) == len(step) or not all(c.isdigit() for c in cvd):
        return [int(s) for s in step]
    # a --gpu-bind narrowed the task's devices: CUDA_VISIBLE_DEVICES then names a subset, either
    # by global index (no device cgroup) or by position in the step's list (under ConstrainDevices)
    if set(cvd) <= set(step):
        return [int(c) for c in cvd]
    return [int(step[int(c)]) for c in cvd if int(c) < len(step)]


def slurm_view_devices(
    report: Mapping[str, Any], shard_gpus: Mapping[str, Sequence[int]] | None = None
) -> list[dict[str, Any]]:
    """The task's GPUs as Slurm names them: ``slurm:<node>:gpu<index>``, with gres.conf Cores.

    A shard task has no ``SLURM_STEP_GPUS`` (Slurm 22.05 sets only ``GPU_DEVICE_ORDINAL`` and
    ``SLURM_SHARDS_ON_NODE`` there), so its GPU is the one the controller says the job's shards
    sit on, on that node (``shard_gpus``: node -> indices, from ``scontrol show job -d``).
    """
    env = report.get("slurm_env") or {}
    node = str(report.get("node") or env.get("SLURMD_NODENAME") or _single_node(env) or "?")
    cores = ((report.get("gres_conf") or {}).get("cores")) or {}
    indices = _step_gpu_indices(env)
    source = "slurm"
    if not indices and env.get("SLURM_SHARDS_ON_NODE") and shard_gpus:
        indices = list(shard_gpus.get(node, ()))
        source = "slurm-shard"
    return [
        {
            "uuid": f"slurm:{node}:gpu{i}",
            "pci_bus_id": None,
            "index": i,
            "source": source,
            "gres_cores": cores.get(str(i)),
        }
        for i in indices
    ]


def _single_node(env: Mapping[str, str]) -> str | None:
    """The node of a one-node step (the worker's report keeps SLURM_* but not SLURMD_NODENAME)."""
    text = env.get("SLURM_STEP_NODELIST") or ""
    try:
        nodes = hostlist.expand(text) if text else []
    except Exception:  # an unexpandable list names no single node
        return None
    return nodes[0] if len(nodes) == 1 else None


def shard_gpus_of(job: Any) -> dict[str, list[int]]:
    """node -> indices of the GPUs that hold the job's shards (or MPS share) there.

    Read through :meth:`GresAlloc.shares`, which knows both of Slurm's forms: 22.05's
    ``shard:h100:2(IDX:3)`` and 24.11+'s per-GPU ``shard:h100:2(0/4,0/4,0/4,2/4)``.
    """
    out: dict[str, list[int]] = {}
    for alloc in getattr(job, "gpu_allocs", ()) or ():
        held = {i for name in ("shard", "mps") for i in alloc.shares(name)}
        if held:
            out.setdefault(alloc.node, []).extend(sorted(held))
    return out


def with_slurm_view(
    reports: Sequence[Mapping[str, Any]], shard_gpus: Mapping[str, Sequence[int]] | None = None
) -> list[dict[str, Any]]:
    out = []
    for r in reports:
        ident = dict(r.get("identity") or {})
        ident["devices"] = slurm_view_devices(r, shard_gpus)
        out.append({**r, "identity": ident})
    return out


def slurm_i7(job: Any, reports: Sequence[Mapping[str, Any]], grant: Grant) -> CheckResult:
    title = "--gpu-bind=closest: task CPUs within the GPU's local CPUs (Slurm's CPU_IDs vs gres.conf Cores)"
    cores: dict[str, dict[str, str | None]] = {}
    conf_paths: set[str] = set()
    for r in reports:
        node = str(r.get("node") or "")
        gres = r.get("gres_conf") or {}
        cores.setdefault(node, {}).update(gres.get("cores") or {})
        conf_paths.add(str(gres.get("path") or "no gres.conf found"))
    evidence: dict[str, Any] = {}
    problems = []
    missing: list[str] = []
    shards = shard_gpus_of(job)
    for alloc in job.gpu_allocs:
        gpus = list(alloc.gpu_indices) or shards.get(alloc.node, [])
        if not gpus:
            continue
        node_cores = cores.get(alloc.node, {})
        lists = [node_cores.get(str(i)) for i in gpus]
        if alloc.cpu_ids is None:
            missing.append(
                f"Slurm recorded no CPU_IDs for the job on {alloc.node} (scontrol show job -d gave neither "
                "the text CPU_IDs= nor JSON job_resources.nodes.allocation[].sockets[].cores[])"
            )
            continue
        if not all(lists):
            bare = [str(i) for i, x in zip(gpus, lists, strict=True) if not x]
            missing.append(
                f"gres.conf gives no Cores= for GPU {','.join(bare)} on {alloc.node} "
                f"({', '.join(sorted(conf_paths))}; AutoDetect leaves Cores= out)"
            )
            continue
        local = set().union(*(parse_cpulist(str(x)) for x in lists))
        mine = parse_cpulist(alloc.cpu_ids)
        evidence[alloc.node] = {
            "slurm_cpu_ids": alloc.cpu_ids,
            "gpus": gpus,
            "gres_conf_cores": lists,
        }
        if not mine <= local:
            problems.append(f"{alloc.node}: CPU_IDs {sorted(mine - local)} are not tied to its GPUs")
    judged = bool(evidence)
    evidence["task_cpu_mask (real, evidence only)"] = {
        str(r.get("label")): r.get("cpu_affinity") for r in reports
    }
    if not judged:
        why = "; ".join(missing) or "the job holds no GPU Slurm can name on any node"
        return CheckResult("I7", title, SKIP, evidence, why)
    bind = grant.gpu_bind or ""
    asked = "closest" in bind or "enforce-binding" in bind
    partly = f"; not judged: {'; '.join(missing)}" if missing else ""
    if problems:
        status = FAIL if asked else INFO
        why = "; ".join(problems) + ("" if asked else " (no closest/enforce-binding was requested)")
        return CheckResult("I7", title, status, evidence, why + partly)
    if not asked:
        return CheckResult(
            "I7",
            title,
            INFO,
            evidence,
            "CPUs are next to the GPUs, though --gpu-bind=closest was not requested" + partly,
        )
    return CheckResult(
        "I7", title, PASS, evidence, "judged on Slurm's numbering (see the module doc)" + partly
    )


def i10_of_timeslice(
    ts: TimesliceResult, grant: Grant, shard_gpus: Mapping[str, Sequence[int]]
) -> CheckResult:
    """I10 over the workers that made the runs: their GPUs (or Slurm's names for them) and their runs.

    The verify step's tasks are not the time-slicing workers, so their identities say nothing
    about whether the *workers'* runs alternated on one GPU.
    """
    workers = [dict(r) for r in ts.meta.get("reports") or []]
    if not workers:
        return CheckResult(
            "I10",
            "co-location claimed only when UUIDs match and runs alternate",
            SKIP,
            None,
            "the time-slicing result carries no worker reports",
        )
    if any((r.get("identity") or {}).get("devices") for r in workers):
        return check_i10(workers, grant, ts)
    result = check_i10(with_slurm_view(workers, shard_gpus), grant, ts)
    note = f"judged on Slurm's GPU names and the {ts.backend} runs of the workers (no GPU hardware)"
    return replace(result, reason=f"{result.reason}; {note}" if result.reason else note)


def verdict_of(devs: Sequence[Sequence[Mapping[str, Any]]], checks: Sequence[CheckResult]) -> str:
    """The verdict the checks support: distinct GPUs are "isolated" only while no check FAILs (a FAIL next to
    "isolated" would contradict the evidence shown with it)."""
    verdict = gpu_verdict(devs)
    if verdict == ISOLATED and any(c.status == FAIL for c in checks):
        return NOT_ISOLATED
    return verdict


def gpu_verdict(devs: Sequence[Sequence[Mapping[str, Any]]]) -> str:
    sets = [{str(d.get("uuid")) for d in ds} for ds in devs]
    if not any(sets):
        return NO_GPUS
    for i, a in enumerate(sets):
        for b in sets[i + 1 :]:
            if a & b:
                return SHARED
    return ISOLATED
