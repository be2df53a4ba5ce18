"""``verify(allocation)``: run the isolation checks I1–I10 inside a real allocation.

One step of the allocation runs ``python -m slurmlab.experiments.verify_task`` in every task
(``srun --label -n <tasks> <the job's GPU request>``). Each task prints what it sees: GPUs (CuPy/NVML
when there are real ones), ``CUDA_VISIBLE_DEVICES``/``SLURM_STEP_GPUS``, its CPU affinity, and
the ``Cores=`` that the node's gres.conf ties to each GPU. The :class:`Grant` comes from what
Slurm granted (``allocation.job``), not from what was typed, and :func:`.isolation.run_checks`
judges the reports. A report is longer than the 1 KiB pieces srun interleaves between tasks,
so it travels framed and labelled and is put back together per task (:mod:`.task_reports`).

Without GPU hardware (the sandbox's GPUs are stand-in device files) the checks that need a GPU
SKIP, and I1–I3 and I10 are judged on Slurm's own view instead, said so in each reason: a GPU's
identity is ``slurm:<node>:gpu<global index>`` (the index from ``SLURM_STEP_GPUS``), the only
identity Slurm has for it.

I7 on Slurm's view compares Slurm's abstract ``CPU_IDs`` of the job on each node (``scontrol show
job -d``) with the gres.conf ``Cores=`` of the GPUs the job holds there: both are in Slurm's
numbering, so they are comparable on any host. The real CPU mask of each task is recorded as
evidence only: in a sandbox whose nodes claim more CPUs than the host has (112 claimed on a
2-CPU host) it lies in the host's CPUs, not in the claimed ones. On real GPUs I7 is the hardware
check of :mod:`.isolation` (task mask within the GPU's sysfs ``local_cpulist``), with Slurm's view
added to its evidence.
"""

from __future__ import annotations

import re
import sys
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, replace
from typing import Any

from slurmlab.core.request.step_request import gpu_items, gres_count, shared_items, step_args_for
from slurmlab.core.slurm import hostlist
from slurmlab.errors import ExperimentError
from slurmlab.experiments import task_reports
from slurmlab.experiments.analysis import TimesliceResult
from slurmlab.experiments.isolation import (
    EXCLUSIVE,
    FAIL,
    INFO,
    MIG,
    PASS,
    SHARED,
    SKIP,
    CheckResult,
    Grant,
    IsolationReport,
    check_i1,
    check_i2,
    check_i3,
    check_i10,
    parse_cpulist,
    run_checks,
)

# the task side lives in verify_task (light imports); its names stay importable from here
from slurmlab.experiments.verify_task import gpu_cores_from_gres_conf, main, task_report

__all__ = [
    "ISOLATED",
    "NO_GPUS",
    "VerifyReport",
    "gpu_cores_from_gres_conf",
    "grant_from_job",
    "shard_gpus_of",
    "slurm_view_devices",
    "step_args_for",
    "task_report",
    "verify",
]

ISOLATED, NO_GPUS = "isolated", "no GPUs"
_MIG_TYPE = re.compile(r"\d+g\.\d+gb", re.IGNORECASE)


# ---- the allocation side -------------------------------------------------------------------------
def grant_from_job(job: Any, tasks: int | None = None) -> Grant:
    """What Slurm granted each task, read from the job (``scontrol show job -d``)."""
    tasks = tasks or int(getattr(job, "num_tasks", None) or 1)
    per_task = gpu_items(job.tres_per_task)
    per_node = gpu_items(job.tres_per_node)
    per_job = gpu_items(job.tres_per_job)
    shared = any(shared_items(x) for x in (job.tres_per_task, job.tres_per_node, job.tres_per_job))
    shared = shared or any(shard_gpus_of(job).values())
    types = {t for a in job.gpu_allocs for t in a.gpu_types}
    sharing = MIG if any(_MIG_TYPE.fullmatch(t or "") for t in types) else EXCLUSIVE
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
        gpus_per_task, sharing, next(iter(t for t in types if _MIG_TYPE.fullmatch(t or "")), None), bind, None
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


def _with_slurm_view(
    reports: Sequence[Mapping[str, Any]], shard_gpus: Mapping[str, Sequence[int]] | None = None
) -> list[dict[str, Any]]:
    out = []
    for r in reports:
        ident = dict(r.get("identity") or {})
        ident["devices"] = slurm_view_devices(r, shard_gpus)
        out.append({**r, "identity": ident})
    return out


def _slurm_i7(job: Any, reports: Sequence[Mapping[str, Any]], grant: Grant) -> CheckResult:
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


def _i10_of_timeslice(
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
    result = check_i10(_with_slurm_view(workers, shard_gpus), grant, ts)
    note = f"judged on Slurm's GPU names and the {ts.backend} runs of the workers (no GPU hardware)"
    return replace(result, reason=f"{result.reason}; {note}" if result.reason else note)


def _verdict(devs: Sequence[Sequence[Mapping[str, Any]]]) -> str:
    sets = [{str(d.get("uuid")) for d in ds} for ds in devs]
    if not any(sets):
        return NO_GPUS
    for i, a in enumerate(sets):
        for b in sets[i + 1 :]:
            if a & b:
                return SHARED
    return ISOLATED


@dataclass
class VerifyReport(IsolationReport):
    """The checks, plus ``verdict`` (isolated / shared / no GPUs) and where identities came from."""

    verdict: str = NO_GPUS
    identity_source: str = "hardware"

    def summary(self) -> str:
        head = (
            f"verdict: {self.verdict} (GPU identity from "
            f"{'the GPUs themselves' if self.identity_source == 'hardware' else 'Slurm: no GPU hardware seen'})"
        )
        return head + "\n" + super().summary()

    def _repr_html_(self) -> str:
        return (
            f"<p><b>verdict: {self.verdict}</b> (identity: {self.identity_source})</p>"
            + super()._repr_html_()
        )


def _parse_reports(
    lines: Sequence[str], stderr: Sequence[str], tasks: int, job_id: Any
) -> list[dict[str, Any]]:
    return task_reports.read_reports(
        lines,
        tasks,
        stderr=stderr,
        what=f"the verify step in allocation {job_id}",
        hint="does the allocation have that many tasks, and can its nodes run this Python?",
    )


def _ntasks_in(args: Sequence[str]) -> int | None:
    """The task count an srun option list asks for (``-n2``, ``-n 2``, ``--ntasks=2``, ``--ntasks 2``)."""
    args = [str(a) for a in args]
    for i, a in enumerate(args):
        value = None
        if a in ("-n", "--ntasks") and i + 1 < len(args):
            value = args[i + 1]
        elif a.startswith("--ntasks="):
            value = a.split("=", 1)[1]
        elif a.startswith("-n") and not a.startswith("--"):
            value = a[2:].lstrip("=")
        if value is not None:
            if not value.isdigit() or int(value) < 1:
                raise ExperimentError(
                    f"bad task count in the step options: {a!r}", hint="e.g. -n2 or --ntasks=2"
                )
            return int(value)
    return None


def verify(
    allocation: Any,
    *,
    tasks: int | None = None,
    backend: str = "auto",
    step_args: Sequence[str] | None = None,
    timeslice: TimesliceResult | bool | None = None,
    timeout: float = 300.0,
) -> VerifyReport:
    """Run I1–I10 in ``allocation``: one step of ``tasks`` tasks (default: the job's task count).

    ``step_args`` replaces the srun options derived from the job (:func:`step_args_for`), e.g.
    to add ``--gpu-bind=closest``. ``timeslice``: a result of :func:`.timeslice.run` on this
    allocation for I6 and I10, or True to run a short one here (2 workers sharing one GPU/core).
    """
    if getattr(allocation, "state", None) != "RUNNING":
        raise ExperimentError(
            f"allocation {getattr(allocation, 'job_id', '?')} is {getattr(allocation, 'state', '?')}, not RUNNING",
            hint="wait for it (alloc.wait()) or make a new one with %salloc",
        )
    if allocation.job is None:
        allocation.refresh()
    job = allocation.job
    given = _ntasks_in(step_args or ())
    if tasks and given and tasks != given:
        raise ExperimentError(
            f"tasks={tasks} but the step options ask for {given} tasks", hint="give one of them"
        )
    tasks = tasks or given or int(getattr(job, "num_tasks", None) or 1)
    grant = grant_from_job(job, tasks)
    args = list(step_args) if step_args is not None else step_args_for(job, tasks)
    if not given and step_args is not None:
        args.insert(0, f"--ntasks={tasks}")
    argv = [sys.executable, "-m", "slurmlab.experiments.verify_task", "--backend", backend]
    result = allocation.srun(argv, args=args, on_output=lambda s, ln: None, label=True, timeout=timeout)
    if result.returncode != 0 and not task_reports.has_reports(result.stdout):
        raise ExperimentError(
            f"the verify step in allocation {allocation.job_id} failed (exit {result.returncode}): "
            + " | ".join(result.stderr[-3:]),
            hint="Slurm's message is above; check the step options with %srun first",
        )
    reports = _parse_reports(result.stdout, result.stderr, tasks, allocation.job_id)

    ts: TimesliceResult | None
    if timeslice is True:
        from slurmlab.experiments.timeslice import run as run_timeslice

        ts = run_timeslice(allocation, procs=2, duration=1.0, backend=backend, cores=1)
    else:
        ts = timeslice or None

    checks = run_checks(reports, grant, ts)
    hardware = any((r.get("identity") or {}).get("devices") for r in reports)
    if hardware:
        devs = [list((r.get("identity") or {}).get("devices") or []) for r in reports]
        source = "hardware"
    else:
        seen = _with_slurm_view(reports, shard_gpus_of(job))
        devs = [list(r["identity"]["devices"]) for r in seen]
        source = "slurm"
        note = "judged on Slurm's view (no GPU hardware: identity = node + SLURM_STEP_GPUS index)"
        if any(devs):
            replaced = {"I1": check_i1(seen, grant), "I2": check_i2(seen, grant), "I3": check_i3(seen, grant)}
            for i, c in enumerate(checks.checks):
                if c.id in replaced:
                    new = replaced[c.id]
                    checks.checks[i] = replace(new, reason=f"{new.reason}; {note}" if new.reason else note)
    if ts is not None:
        i10 = _i10_of_timeslice(ts, grant, shard_gpus_of(job))
        checks.checks = [i10 if c.id == "I10" else c for c in checks.checks]
    for i, c in enumerate(checks.checks):
        if c.id == "I7":
            slurm_i7 = _slurm_i7(job, reports, grant)
            if c.status == SKIP or not hardware:
                checks.checks[i] = slurm_i7
            else:
                checks.checks[i] = replace(c, evidence={"hardware": c.evidence, "slurm": slurm_i7.evidence})
    out = VerifyReport(
        checks.checks, grant, dict(checks.meta), verdict=_verdict(devs), identity_source=source
    )
    out.meta.update(
        {
            "job_id": str(allocation.job_id),
            "step_argv": list(result.argv),
            "reports": reports,
            "devices": devs,
        }
    )
    if ts is not None:
        out.meta["timeslice"] = ts.as_dict()
    return out


if __name__ == "__main__":
    sys.exit(main())
