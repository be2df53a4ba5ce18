"""``verify(allocation)``: run the isolation checks I1–I10 inside a real allocation.

One step of the allocation runs ``python -m slurmlab.experiments.node.verify_task`` in every task
(``srun --label -n <tasks> <the job's GPU request>``). Each task prints what it sees: GPUs (CuPy/NVML
when there are real ones), ``CUDA_VISIBLE_DEVICES``/``SLURM_STEP_GPUS``, its CPU affinity, and
the ``Cores=`` that the node's gres.conf ties to each GPU. The :class:`Grant` comes from what
Slurm granted (``allocation.job``), not from what was typed, and :func:`.isolation.run_checks`
judges the reports, with Slurm's own view (:mod:`.slurm_view`) where no GPU hardware answers. A report is longer than the 1 KiB pieces srun interleaves between tasks,
so it travels framed and labelled and is put back together per task (:mod:`slurmlab.core.framing`).

Without GPU hardware (the sandbox's GPUs are stand-in device files) the checks that need a GPU
SKIP, and I1–I3 and I10 are judged on Slurm's own view instead, said so in each reason: a GPU's
identity is ``slurm:<node>:gpu<global index>`` (the index from ``SLURM_STEP_GPUS``), the only
identity Slurm has for it.

The verdict is derived from the checks: distinct GPUs read "isolated" only while no check FAILs
("not isolated" otherwise, naming the failed checks). A step that ran in a slurmlab sandbox (its
tasks have ``SLURMLAB_SANDBOX``) gets the sandbox's limits as notes next to the verdict
(:mod:`slurmlab.core.gpu.sandbox_limits`), and I2 does not fail a MIG slice for lacking a MIG- name
there (no MIG hardware can give one): it says so instead.

I7 on Slurm's view compares Slurm's abstract ``CPU_IDs`` of the job on each node (``scontrol show
job -d``) with the gres.conf ``Cores=`` of the GPUs the job holds there: both are in Slurm's
numbering, so they are comparable on any host. The real CPU mask of each task is recorded as
evidence only: in a sandbox whose nodes claim more CPUs than the host has (112 claimed on a
2-CPU host) it lies in the host's CPUs, not in the claimed ones. On real GPUs I7 is the hardware
check of :mod:`.isolation` (task mask within the GPU's sysfs ``local_cpulist``), with Slurm's view
added to its evidence.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import replace
from typing import Any

from slurmlab.core import framing
from slurmlab.core.gpu.sandbox_limits import SANDBOX_ENV, sandbox_notes
from slurmlab.core.request.step_request import step_args_for
from slurmlab.errors import ExperimentError
from slurmlab.experiments.gres_conf import with_gres_cores
from slurmlab.experiments.isolation import check_i1, check_i2, check_i3, run_checks
from slurmlab.experiments.isolation_result import MIG, SKIP, Grant, IsolationReport, VerifyReport
from slurmlab.experiments.plan import TimeslicePlan
from slurmlab.experiments.protocols import ExperimentAllocation
from slurmlab.experiments.slurm_view import (
    grant_from_job,
    i10_of_timeslice,
    shard_gpus_of,
    slurm_i7,
    verdict_of,
    with_slurm_view,
)
from slurmlab.experiments.timeslice import run as run_timeslice
from slurmlab.experiments.timeslice_result import TimesliceResult

__all__ = ["TASK_MODULE", "in_sandbox", "read_task_reports", "verify"]

# what every task of the verify step runs: python -m TASK_MODULE
TASK_MODULE = "slurmlab.experiments.node.verify_task"


def read_task_reports(
    lines: Sequence[str], stderr: Sequence[str], tasks: int, job_id: Any
) -> list[dict[str, Any]]:
    """The verify step's task reports, each with its node's gres.conf Cores (numbered here, see gres_conf)."""
    reports = framing.read_reports(
        lines,
        tasks,
        stderr=stderr,
        what=f"the verify step in allocation {job_id}",
        hint="does the allocation have that many tasks, and can its nodes run this Python?",
    )
    return [with_gres_cores(r) for r in reports]


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
    allocation: ExperimentAllocation,
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
    job = _running_job(allocation)
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
    step_argv, reports = _run_step(allocation, args, tasks, backend, timeout)

    ts: TimesliceResult | None
    if timeslice is True:
        ts = run_timeslice(allocation, TimeslicePlan(procs=2, duration=1.0, backend=backend, cores=1))
    else:
        ts = timeslice or None

    sandbox = in_sandbox(reports)
    checks, devs, source = _judge(job, reports, grant, ts, sandbox=sandbox)
    out = VerifyReport(
        checks.checks,
        grant,
        dict(checks.meta),
        verdict=verdict_of(devs, checks.checks),
        identity_source=source,
        notes=list(sandbox_notes(mig=grant.sharing == MIG)) if sandbox else [],
    )
    out.meta.update(
        {
            "job_id": str(allocation.job_id),
            "step_argv": step_argv,
            "reports": reports,
            "devices": devs,
        }
    )
    if ts is not None:
        out.meta["timeslice"] = ts.as_dict()
    return out


# -- gathering: the job as Slurm granted it, and what each task of the step reports -----------------


def _running_job(allocation: ExperimentAllocation) -> Any:
    """The detail of a RUNNING allocation's job (``scontrol show job -d``), refreshed when missing."""
    if allocation.state != "RUNNING":
        raise ExperimentError(
            f"allocation {allocation.job_id} is {allocation.state}, not RUNNING",
            hint="wait for it (alloc.wait()) or make a new one with %salloc",
        )
    if allocation.job is None:
        allocation.refresh()
    job = allocation.job
    if job is None:
        raise ExperimentError(
            f"Slurm gave no detail of allocation {allocation.job_id} (scontrol show job -d)",
            hint="check that the job still exists with %squeue, then try again",
        )
    return job


def _run_step(
    allocation: ExperimentAllocation, args: list[str], tasks: int, backend: str, timeout: float
) -> tuple[list[str], list[dict[str, Any]]]:
    """(the step's argv, each task's report): the verify step run once with srun options ``args``."""
    argv = [allocation.runner.python(), "-m", TASK_MODULE, "--backend", backend]
    result = allocation.srun(argv, args=args, on_output=lambda s, ln: None, label=True, timeout=timeout)
    # a step whose tasks began reporting ran its command: their own failures are in their reports
    if result.returncode != 0 and not framing.has_reports(result.stdout):
        raise ExperimentError(
            f"the verify step in allocation {allocation.job_id} failed (exit {result.returncode}): "
            + " | ".join(result.stderr[-3:]),
            hint="Slurm's message is above; check the step options with %srun first",
        )
    return list(result.argv), read_task_reports(result.stdout, result.stderr, tasks, allocation.job_id)


# -- checks: the hardware judgement, with Slurm's view where no GPU hardware answers ----------------


def in_sandbox(reports: Sequence[Mapping[str, Any]]) -> bool:
    """Whether the step ran in a slurmlab sandbox (its TaskProlog sets SLURMLAB_SANDBOX in every task)."""
    return any((r.get("slurm_env") or {}).get(SANDBOX_ENV) for r in reports)


def _judge(
    job: Any,
    reports: list[dict[str, Any]],
    grant: Grant,
    ts: TimesliceResult | None,
    *,
    sandbox: bool = False,
) -> tuple[IsolationReport, list[list[Any]], str]:
    """(the checks I1–I10, the devices each task saw, where their identity came from)."""
    checks = run_checks(reports, grant, ts)
    if sandbox:
        checks.checks = [check_i2(reports, grant, sandbox=True) if c.id == "I2" else c for c in checks.checks]
    hardware = any((r.get("identity") or {}).get("devices") for r in reports)
    if hardware:
        devs = [list((r.get("identity") or {}).get("devices") or []) for r in reports]
        source = "hardware"
    else:
        devs = _on_slurm_view(checks, job, reports, grant, sandbox=sandbox)
        source = "slurm"
    if ts is not None:
        i10 = i10_of_timeslice(ts, grant, shard_gpus_of(job))
        checks.checks = [i10 if c.id == "I10" else c for c in checks.checks]
    for i, c in enumerate(checks.checks):
        if c.id == "I7":
            on_slurm = slurm_i7(job, reports, grant)
            if c.status == SKIP or not hardware:
                checks.checks[i] = on_slurm
            else:
                checks.checks[i] = replace(c, evidence={"hardware": c.evidence, "slurm": on_slurm.evidence})
    return checks, devs, source


def _on_slurm_view(
    checks: IsolationReport, job: Any, reports: list[dict[str, Any]], grant: Grant, *, sandbox: bool = False
) -> list[list[Any]]:
    """I1–I3 judged again on Slurm's view (in place, said so in each reason); returns each task's devices."""
    seen = with_slurm_view(reports, shard_gpus_of(job))
    devs = [list(r["identity"]["devices"]) for r in seen]
    note = "judged on Slurm's view (no GPU hardware: identity = node + SLURM_STEP_GPUS index)"
    if any(devs):
        replaced = {
            "I1": check_i1(seen, grant),
            "I2": check_i2(seen, grant, sandbox=sandbox),
            "I3": check_i3(seen, grant),
        }
        for i, c in enumerate(checks.checks):
            if c.id in replaced:
                new = replaced[c.id]
                checks.checks[i] = replace(new, reason=f"{new.reason}; {note}" if new.reason else note)
    return devs
