"""Isolation checks I1–I10: what each task really got against what Slurm granted.

Pure functions over the JSON reports of the workers (one per task, see :mod:`.node.worker` and
:mod:`.node.gpu_worker`) and a :class:`~.isolation_result.Grant`. Each check returns PASS, FAIL,
SKIP (with the reason) or INFO, always with the evidence it judged. A check that needs a GPU SKIPs
without one. Running them inside an allocation is :func:`slurmlab.experiments.verify.verify`.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

from slurmlab.core.gpu.mig import mig_memory_gb
from slurmlab.core.gpu.sandbox_limits import MIG_NAMES
from slurmlab.core.slurm.ranges import parse_index_list
from slurmlab.experiments.isolation_result import (
    FAIL,
    INFO,
    MIG,
    PASS,
    SHARED,
    SKIP,
    CheckResult,
    Grant,
    IsolationReport,
)
from slurmlab.experiments.timeslice_result import CONCURRENT, TIME_SLICED, TimesliceResult

Report = Mapping[str, Any]


# -- helpers ------------------------------------------------------------------------------------


def _devices(r: Report) -> list[Mapping[str, Any]]:
    return list((r.get("identity") or {}).get("devices") or [])


def _has_gpu(reports: Sequence[Report]) -> bool:
    return any(_devices(r) for r in reports)


def _no_gpu(check_id: str, title: str, reports: Sequence[Report]) -> CheckResult:
    backends = sorted({str(r.get("backend", "?")) for r in reports}) or ["none"]
    return CheckResult(
        check_id, title, SKIP, None, f"no GPU visible to the workers (backend {', '.join(backends)})"
    )


def _label(i: int, r: Report) -> str:
    return str(r.get("label", i))


def _cvd(r: Report) -> str | None:
    env = r.get("slurm_env") or {}
    value = env.get("CUDA_VISIBLE_DEVICES")
    return None if value is None else str(value)


def _uuids(r: Report) -> list[str]:
    return [str(d.get("uuid")) for d in _devices(r)]


def parse_cpulist(text: str) -> set[int]:
    """The kernel's cpulist (``0-3,8``) as a set; raises ValueError (ParseError) on anything else."""
    return set(parse_index_list(text, "cpulist"))


def mig_profile_gb(profile: str) -> float | None:
    gb = mig_memory_gb(profile)
    return float(gb) if gb is not None else None


# -- the checks -----------------------------------------------------------------------------------


def check_i1(reports: Sequence[Report], grant: Grant) -> CheckResult:
    title = "visible GPU count equals what Slurm granted"
    if not _has_gpu(reports):
        return _no_gpu("I1", title, reports)
    seen = {_label(i, r): len(_devices(r)) for i, r in enumerate(reports)}
    if grant.gpus_per_task is None:
        return CheckResult("I1", title, INFO, seen, "the grant's GPU count is unknown")
    wrong = {k: v for k, v in seen.items() if v != grant.gpus_per_task}
    if wrong:
        return CheckResult("I1", title, FAIL, seen, f"granted {grant.gpus_per_task} per task, seen {wrong}")
    return CheckResult("I1", title, PASS, seen)


def check_i2(reports: Sequence[Report], grant: Grant, *, sandbox: bool = False) -> CheckResult:
    """``sandbox``: the step ran in a slurmlab sandbox, where no MIG hardware gives MIG- names (said, not failed)."""
    title = "CUDA_VISIBLE_DEVICES consistent with the count (MIG- for MIG)"
    if not _has_gpu(reports) and all(_cvd(r) is None for r in reports):
        return _no_gpu("I2", title, reports)
    evidence = {_label(i, r): _cvd(r) for i, r in enumerate(reports)}
    problems = []
    unnamed = []
    for i, r in enumerate(reports):
        value = _cvd(r)
        if value is None:
            problems.append(f"{_label(i, r)}: CUDA_VISIBLE_DEVICES is unset, so the task may see every GPU")
            continue
        entries = [e for e in value.split(",") if e.strip()]
        want = grant.gpus_per_task if grant.gpus_per_task is not None else len(_devices(r))
        if len(entries) != want:
            problems.append(f"{_label(i, r)}: {len(entries)} entries for {want} GPU(s)")
        if grant.sharing == MIG and not all(e.strip().startswith("MIG-") for e in entries):
            unnamed.append(f"{_label(i, r)}: MIG granted but {value!r} does not name MIG- devices")
    if sandbox and unnamed:
        note = f"{MIG_NAMES} ({'; '.join(unnamed)})"
        if problems:
            return CheckResult("I2", title, FAIL, evidence, "; ".join(problems) + "; " + note)
        return CheckResult("I2", title, PASS, evidence, note)
    problems += unnamed
    if problems:
        return CheckResult("I2", title, FAIL, evidence, "; ".join(problems))
    return CheckResult("I2", title, PASS, evidence)


def check_i3(reports: Sequence[Report], grant: Grant) -> CheckResult:
    title = "physical identity by UUID / PCI bus id (distinct if exclusive, equal if shared)"
    if not _has_gpu(reports):
        return _no_gpu("I3", title, reports)
    evidence = {
        _label(i, r): [{"uuid": d.get("uuid"), "pci_bus_id": d.get("pci_bus_id")} for d in _devices(r)]
        for i, r in enumerate(reports)
    }
    if len(reports) < 2:
        return CheckResult("I3", title, INFO, evidence, "one task: nothing to compare")
    sets = [set(_uuids(r)) for r in reports]
    if grant.sharing == SHARED:
        same = all(s == sets[0] for s in sets)
        return CheckResult(
            "I3",
            title,
            PASS if same else FAIL,
            evidence,
            "" if same else "shared grant, yet the tasks see different GPUs",
        )
    clashes = sorted({u for i, a in enumerate(sets) for b in sets[i + 1 :] for u in a & b})
    if clashes:
        return CheckResult("I3", title, FAIL, evidence, f"exclusive grant, yet tasks share {clashes}")
    return CheckResult("I3", title, PASS, evidence)


def check_i4(reports: Sequence[Report], grant: Grant) -> CheckResult:
    title = "device cgroup enforced (a child without CUDA_VISIBLE_DEVICES sees only the allocation)"
    if not _has_gpu(reports):
        return _no_gpu("I4", title, reports)
    evidence = {}
    problems = []
    for i, r in enumerate(reports):
        child = (r.get("identity") or {}).get("child_visible_gpus")
        if child is None:
            continue
        evidence[_label(i, r)] = {"child_sees": child, "task_sees": len(_devices(r))}
        if child > len(_devices(r)):
            problems.append(
                f"{_label(i, r)}: a child sees {child} GPUs, the task was given {len(_devices(r))}"
            )
    if not evidence:
        return CheckResult("I4", title, SKIP, None, "no worker measured what a child process sees")
    if problems:
        return CheckResult(
            "I4", title, FAIL, evidence, "; ".join(problems) + " (ConstrainDevices is not in force)"
        )
    return CheckResult("I4", title, PASS, evidence)


def check_i5(reports: Sequence[Report], grant: Grant) -> CheckResult:
    title = "memory isolation"
    if not _has_gpu(reports):
        return _no_gpu("I5", title, reports)
    totals = {_label(i, r): [d.get("memory_total") for d in _devices(r)] for i, r in enumerate(reports)}
    if grant.sharing == MIG:
        want_gb = mig_profile_gb(grant.mig_profile or "")
        if want_gb is None:
            return CheckResult("I5", title, SKIP, totals, f"unknown MIG profile {grant.mig_profile!r}")
        problems = []
        for i, r in enumerate(reports):
            for d in _devices(r):
                gb = float(d.get("memory_total") or 0) / 1e9
                # the driver reserves some of the slice; a whole GPU would be many times larger
                if not 0.8 * want_gb <= gb <= 1.1 * want_gb:
                    problems.append(f"{_label(i, r)}: {gb:.1f} GB visible for a {want_gb:.0f} GB profile")
            over = (r.get("identity") or {}).get("overallocation")
            if over is not None and not over.get("failed"):
                problems.append(f"{_label(i, r)}: allocating past the slice succeeded")
        if problems:
            return CheckResult("I5", title, FAIL, totals, "; ".join(problems))
        return CheckResult("I5", title, PASS, totals)
    if grant.sharing == SHARED:
        return CheckResult(
            "I5", title, INFO, totals, "not memory-isolated: every sharer can allocate the whole GPU"
        )
    return CheckResult("I5", title, INFO, totals, "whole GPUs: memory is the task's own")


def check_i6(reports: Sequence[Report], grant: Grant, timeslice: TimesliceResult | None) -> CheckResult:
    title = "compute: a neighbour's load (MIG: unchanged; time-sliced: about 1/N)"
    if timeslice is None:
        return CheckResult("I6", title, SKIP, None, "no time-slicing run was given")
    n = len(timeslice.processes)
    evidence = {
        "backend": timeslice.backend,
        "shares": timeslice.shares,
        "slowdown": [p.slowdown for p in timeslice.processes],
        "classification": timeslice.classification,
    }
    if grant.sharing == MIG:
        slow = [p.slowdown for p in timeslice.processes]
        if any(s is None for s in slow):
            return CheckResult("I6", title, SKIP, evidence, "MIG needs a fixed-work run with a solo baseline")
        ok = all(s is not None and s <= 1.15 for s in slow)
        return CheckResult(
            "I6", title, PASS if ok else FAIL, evidence, "" if ok else "a neighbour slowed a MIG slice"
        )
    if n < 2:
        return CheckResult("I6", title, INFO, evidence, "one process: no neighbour")
    if timeslice.classification == TIME_SLICED:
        ok = all(0.5 / n <= s <= 1.5 / n for s in timeslice.shares)
        return CheckResult(
            "I6",
            title,
            PASS if ok else FAIL,
            evidence,
            "" if ok else f"shares far from 1/{n} while time-sliced",
        )
    return CheckResult("I6", title, INFO, evidence, f"the processes ran {timeslice.classification}")


def check_i7(reports: Sequence[Report], grant: Grant) -> CheckResult:
    title = "--gpu-bind=closest: task CPUs within the GPU's local CPUs"
    if not grant.gpu_bind or "closest" not in grant.gpu_bind:
        return CheckResult("I7", title, SKIP, None, "--gpu-bind=closest was not requested")
    if not _has_gpu(reports):
        return _no_gpu("I7", title, reports)
    evidence = {}
    problems = []
    for i, r in enumerate(reports):
        lists = [d.get("local_cpulist") for d in _devices(r)]
        if not all(lists):
            continue
        local = set().union(*(parse_cpulist(str(x)) for x in lists))
        mine = set(r.get("cpu_affinity") or [])
        evidence[_label(i, r)] = {"affinity": sorted(mine), "gpu_local_cpulist": lists}
        if not mine <= local:
            problems.append(f"{_label(i, r)}: CPUs {sorted(mine - local)} are not local to its GPU")
    if not evidence:
        return CheckResult("I7", title, SKIP, None, "the GPU's local_cpulist was not readable (sysfs)")
    if problems:
        return CheckResult("I7", title, FAIL, evidence, "; ".join(problems))
    return CheckResult("I7", title, PASS, evidence)


def check_i8(reports: Sequence[Report], grant: Grant) -> CheckResult:
    title = "GPU clocks vs --gpu-freq"
    if not grant.gpu_freq:
        return CheckResult("I8", title, SKIP, None, "--gpu-freq was not requested")
    if not _has_gpu(reports):
        return _no_gpu("I8", title, reports)
    clocks = {_label(i, r): [(d.get("clocks") or {}) for d in _devices(r)] for i, r in enumerate(reports)}
    app = [float(c["applications_mhz"]) for cs in clocks.values() for c in cs if c.get("applications_mhz")]
    if not app:
        return CheckResult("I8", title, SKIP, clocks, "no application clock was read (nvidia-smi absent)")
    requested = grant.gpu_freq.split(",")[0].split("=")[-1]
    if not requested.isdigit():
        return CheckResult("I8", title, INFO, clocks, f"symbolic frequency {requested!r}: compare by eye")
    want = int(requested)
    # the driver rounds to a supported step
    ok = all(abs(a - want) <= max(0.05 * want, 30) for a in app)
    return CheckResult(
        "I8", title, PASS if ok else FAIL, clocks, "" if ok else f"application clocks {app} MHz, asked {want}"
    )


def check_i9(reports: Sequence[Report], grant: Grant) -> CheckResult:
    title = "compute mode (Exclusive_Process forbids sharing)"
    if not _has_gpu(reports):
        return _no_gpu("I9", title, reports)
    modes = {_label(i, r): [d.get("compute_mode") for d in _devices(r)] for i, r in enumerate(reports)}
    exclusive = any(str(m).lower().startswith("exclusive") for ms in modes.values() for m in ms)
    if exclusive and grant.sharing == SHARED:
        return CheckResult(
            "I9", title, FAIL, modes, "the GPU is Exclusive_Process: sharers cannot open it together"
        )
    return CheckResult("I9", title, PASS, modes)


def check_i10(reports: Sequence[Report], grant: Grant, timeslice: TimesliceResult | None) -> CheckResult:
    title = "co-location claimed only when UUIDs match and runs alternate"
    if not _has_gpu(reports):
        return _no_gpu("I10", title, reports)
    if timeslice is None or len(reports) < 2:
        return CheckResult("I10", title, SKIP, None, "needs a time-slicing run of two or more tasks")
    sets = [set(_uuids(r)) for r in reports]
    same = all(s == sets[0] for s in sets)
    evidence = {"same_uuids": same, "classification": timeslice.classification}
    if same and timeslice.classification == TIME_SLICED:
        return CheckResult("I10", title, PASS, evidence, "co-located on one GPU and time-sliced")
    if same and timeslice.classification == CONCURRENT:
        return CheckResult("I10", title, INFO, evidence, "same GPU yet runs overlap: MPS or MIG shares it")
    if not same and timeslice.classification == TIME_SLICED:
        return CheckResult(
            "I10", title, FAIL, evidence, "runs alternate but the GPUs differ: the clock evidence is wrong"
        )
    if grant.sharing == SHARED and not same:
        return CheckResult(
            "I10", title, FAIL, evidence, "a shared grant, but the tasks are on different GPUs"
        )
    return CheckResult("I10", title, PASS, evidence, "not co-located, and the runs say so")


def run_checks(
    reports: Sequence[Report], grant: Grant, timeslice: TimesliceResult | None = None
) -> IsolationReport:
    """All ten checks over the per-task worker reports."""
    checks = [
        check_i1(reports, grant),
        check_i2(reports, grant),
        check_i3(reports, grant),
        check_i4(reports, grant),
        check_i5(reports, grant),
        check_i6(reports, grant, timeslice),
        check_i7(reports, grant),
        check_i8(reports, grant),
        check_i9(reports, grant),
        check_i10(reports, grant, timeslice),
    ]
    return IsolationReport(checks, grant, {"tasks": len(reports)})
