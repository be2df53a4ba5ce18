"""The doctor's GPU-node checks as judgement: what the probe step saw (:class:`GpuProbe`) -> one Finding per check.

Checks (ids): ``gpu.smi`` nvidia-smi answers; ``gpu.driver`` the driver runs the CUDA runtime the job's Python
would load; ``gpu.memory`` no process outside the job holds memory on its GPUs; ``gpu.pcie`` every link at its
maximum width (and generation, when the GPU is busy); ``gpu.devices`` the step sees exactly the GPUs Slurm gave
the job. On a slurmlab sandbox (its stand-in nvidia-smi, no GPU) every check SKIPs and says why.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence

from slurmlab.core.diagnosis.findings import Finding, Verdict
from slurmlab.core.gpu.smi import GpuProbe, GpuRow, Section, parse_version
from slurmlab.core.gpu.standin_names import STANDIN_MARK

__all__ = ["GPU_CHECKS", "MINOR_COMPAT_DRIVER", "TOOLKIT_DRIVER", "judge_gpu_probe", "skip_all"]

# id -> title, in the order they run
GPU_CHECKS = {
    "gpu.smi": "nvidia-smi answers",
    "gpu.driver": "driver vs CUDA runtime",
    "gpu.memory": "GPU memory held outside the job",
    "gpu.pcie": "PCIe link speed",
    "gpu.devices": "GPUs Slurm assigned vs GPUs the step sees",
}

# NVIDIA's CUDA Toolkit release notes (Linux x86_64): the driver each toolkit release ships with, which runs
# everything that release builds, PTX included ...
TOOLKIT_DRIVER = {
    (11, 0): "450.36.06",
    (11, 1): "455.23",
    (11, 2): "460.27.03",
    (11, 3): "465.19.01",
    (11, 4): "470.42.01",
    (11, 5): "495.29.05",
    (11, 6): "510.39.01",
    (11, 7): "515.43.04",
    (11, 8): "520.61.05",
    (12, 0): "525.60.13",
    (12, 1): "530.30.02",
    (12, 2): "535.54.03",
    (12, 3): "545.23.06",
    (12, 4): "550.54.14",
    (12, 5): "555.42.02",
    (12, 6): "560.28.03",
    (12, 8): "570.26",
    (12, 9): "575.51.03",
    (13, 0): "580.65.06",
}
# ... and the oldest driver that runs a major release's applications through minor-version compatibility
# (without the PTX JIT of a newer minor release: CuPy's kernels, compiled by NVRTC at run time, may fail there)
MINOR_COMPAT_DRIVER = {11: "450.80.02", 12: "525.60.13", 13: "580"}

_HUNG_FIX = (
    "restart the persistence daemon (`sudo systemctl restart nvidia-persistenced`), then "
    "`sudo nvidia-smi -pm 1`; if it still hangs, ask the admins to reset the GPU (`nvidia-smi -r`) or "
    "drain and reboot the node"
)
_ISOLATION_FIX = (
    "ask the admins to set ConstrainDevices=yes in cgroup.conf (with TaskPlugin=task/cgroup) and "
    "restart slurmd, so that a job can open only the GPUs it was given"
)


_UNLISTED_MIB = 2048  # more than a GPU's own reserved memory: someone holds it
_SMI_CALLS = {
    "query-gpu": "--query-gpu",
    "compute-apps": "--query-compute-apps",
    "header": "plain nvidia-smi",
}


def _v(text: str | None) -> tuple[int, ...]:
    return parse_version(text) or ()


def _finding(
    check: str, verdict: Verdict, evidence: str, fix: str = "", subject: str = "", details: Sequence[str] = ()
) -> Finding:
    return Finding(check, GPU_CHECKS[check], verdict, evidence, fix, subject, tuple(details))


def skip_all(why: str, subject: str = "", fix: str = "") -> list[Finding]:
    """Every GPU check as a SKIP with the same reason (a sandbox, a step that could not run ...)."""
    return [_finding(c, Verdict.SKIP, why, fix, subject) for c in GPU_CHECKS]


def _said(section: Section) -> str:
    text = " / ".join(ln.strip() for ln in section.lines if ln.strip())
    return text[:300] or "nothing"


def check_smi(p: GpuProbe, subject: str) -> Finding:
    query = p.section("query-gpu")
    if query is None:
        if "no-smi" in p.sections:
            return _finding(
                "gpu.smi",
                Verdict.FAIL,
                "nvidia-smi is not on the step's PATH on this GPU node",
                "ask the admins to install the NVIDIA driver utilities on the node (or fix its PATH)",
                subject,
            )
        return _finding(
            "gpu.smi",
            Verdict.FAIL,
            "the probe step ended before nvidia-smi was run",
            "run the doctor again; if it recurs, the node is overloaded or hung",
            subject,
        )
    hung = [name for name in _SMI_CALLS if (s := p.section(name)) is not None and s.timed_out]
    if hung:
        calls = ", ".join(_SMI_CALLS[name] for name in hung)
        return _finding(
            "gpu.smi",
            Verdict.FAIL,
            f"nvidia-smi did not answer within its timeout ({calls}): a hung "
            "GPU or driver (every CUDA call on this node will hang too)",
            _HUNG_FIX,
            subject,
        )
    if query.rc != 0:
        return _finding(
            "gpu.smi",
            Verdict.FAIL,
            f"nvidia-smi failed (exit {query.rc}): {_said(query)}",
            "the NVIDIA driver is not loaded or lost the GPU (look for Xid errors in `dmesg`); "
            "ask the admins to reload the driver or drain the node",
            subject,
        )
    if not p.gpus:
        return _finding(
            "gpu.smi",
            Verdict.FAIL,
            "nvidia-smi answered but listed no GPU the step could read",
            "ask the admins to check the node's GPUs (`nvidia-smi -L` as root)",
            subject,
            p.problems,
        )
    names = sorted({g.name for g in p.gpus})
    evidence = f"answered in the step: {len(p.gpus)} × {', '.join(names)}" + (
        f", driver {p.driver}" if p.driver else ""
    )
    if p.problems:
        return _finding(
            "gpu.smi",
            Verdict.WARN,
            evidence + f"; {len(p.problems)} row(s) could not be read",
            "compare with `nvidia-smi -q` on the node; a GPU reporting garbage may be failing",
            subject,
            p.problems,
        )
    off = [g.label for g in p.gpus if g.persistence is False]
    note = (
        [
            f"persistence mode is off on {', '.join(off)}: each first CUDA call and nvidia-smi re-initialise the "
            "GPU (slow; `sudo nvidia-smi -pm 1` or nvidia-persistenced keeps it up)"
        ]
        if off
        else []
    )
    return _finding("gpu.smi", Verdict.OK, evidence, subject=subject, details=note)


def _supported_by(driver: tuple[int, ...]) -> tuple[int, int] | None:
    """The newest CUDA release whose toolkit driver ``driver`` reaches."""
    fits = [cuda for cuda, need in TOOLKIT_DRIVER.items() if driver >= _v(need)]
    return max(fits) if fits else None


def check_driver(p: GpuProbe, subject: str) -> Finding:
    if p.runtime is None:
        return _finding(
            "gpu.driver",
            Verdict.SKIP,
            f"the job's CUDA runtime is unknown: {p.runtime_source} "
            "(looked for cupy, nvidia-cuda-runtime and libcudart with the step's python3)",
            "install the CUDA Python package the job uses (e.g. cupy-cuda12x) where the step's "
            "python3 finds it, then run the doctor again",
            subject,
        )
    runtime, driver = _v(p.runtime)[:2], _v(p.driver)
    supported = _v(p.header_cuda)[:2] or (_supported_by(driver) if driver else None)
    if not driver and not supported:
        return _finding(
            "gpu.driver",
            Verdict.SKIP,
            f"the job's CUDA runtime is {p.runtime} ({p.runtime_source}) "
            "but nvidia-smi gave no driver version",
            subject=subject,
        )
    drv = f"driver {p.driver or '?'}" + (
        f" supports CUDA {'.'.join(map(str, supported))}" if supported else ""
    )
    said = f"{drv}; the job's runtime is CUDA {p.runtime} ({p.runtime_source})"
    if supported and runtime <= supported:
        return _finding("gpu.driver", Verdict.OK, said, subject=subject)
    full = TOOLKIT_DRIVER.get((runtime[0], runtime[1])) if len(runtime) == 2 else None
    need = MINOR_COMPAT_DRIVER.get(runtime[0])
    upgrade = f"ask the admins for a driver ≥ {full}" if full else "ask the admins for a newer driver"
    top = ".".join(map(str, supported)) if supported else ""
    older = (
        f"or give the job a CUDA ≤ {top} runtime (a CUDA {top} toolkit module, or cupy-cuda{supported[0]}x "
        f"with CUDA {top} libraries)"
        if supported
        else "or give the job an older CUDA runtime"
    )
    if need is not None and driver and driver >= _v(need) and (not supported or supported[0] == runtime[0]):
        return _finding(
            "gpu.driver",
            Verdict.WARN,
            said + f": it runs through CUDA {runtime[0]}'s minor-version "
            f"compatibility (≥ {need}), but PTX a newer toolkit emits — CuPy's kernels compiled by "
            "NVRTC at run time — may fail with cudaErrorUnsupportedPtxVersion",
            f"{upgrade}, {older}",
            subject,
        )
    minimum = f" CUDA {runtime[0]}.x needs a driver ≥ {need}" if need else ""
    return _finding(
        "gpu.driver",
        Verdict.FAIL,
        said + f": too old for it;{minimum}".rstrip(";"),
        f"{upgrade}, {older}",
        subject,
    )


def job_gpus(p: GpuProbe) -> tuple[GpuRow, ...]:
    """The rows of the GPUs the job was given: those CUDA_VISIBLE_DEVICES names (index or UUID), else all the step
    sees (under ConstrainDevices it sees only the job's)."""
    names = [n.strip() for n in p.env.get("CUDA_VISIBLE_DEVICES", "").split(",") if n.strip()]
    mine = [g for g in p.gpus if str(g.index) in names or g.uuid in names]
    return tuple(mine) or p.gpus


def _unexplained(p: GpuProbe) -> list[str]:
    """GPUs of the job whose memory in use is far more than every process nvidia-smi lists there holds."""
    out = []
    for g in job_gpus(p):
        listed = sum(a.used_mib or 0 for a in p.apps if a.gpu_uuid == g.uuid)
        if g.memory_used_mib is not None and g.memory_used_mib - listed > _UNLISTED_MIB:
            out.append(
                f"{g.label}: {g.memory_used_mib} MiB in use, {listed} MiB of it by processes nvidia-smi "
                "lists: the rest is held by a process it cannot see (another container or PID namespace) or "
                "by one that died without freeing it"
            )
    return out


def check_memory(p: GpuProbe, subject: str) -> Finding:
    mine = {g.uuid: g for g in job_gpus(p)}
    apps = [a for a in p.apps if a.gpu_uuid in mine]
    unlisted = _unexplained(p)
    if p.step_pids is None:
        listed = [
            f"pid {a.pid} {a.process}: {a.used_mib if a.used_mib is not None else '?'} MiB on "
            f"{mine[a.gpu_uuid].label}"
            for a in apps
        ]
        return _finding(
            "gpu.memory",
            Verdict.SKIP,
            "cannot tell the job's processes from others: `scontrol "
            f"listpids` did not answer in the step; {len(apps)} process(es) use the job's GPUs",
            subject=subject,
            details=listed,
        )
    foreign = [a for a in apps if a.pid not in p.step_pids]
    if not foreign and not unlisted:
        return _finding(
            "gpu.memory",
            Verdict.OK,
            f"no process outside the job holds memory on its "
            f"{len(mine)} GPU(s) ({len(apps)} process(es) of the job)",
            subject=subject,
        )
    held = sum(a.used_mib or 0 for a in foreign)
    said = (
        f"{len(foreign)} process(es) outside the job hold {held} MiB on its GPUs"
        if foreign
        else "memory on the job's GPUs is held by no process nvidia-smi lists"
    )
    return _finding(
        "gpu.memory",
        Verdict.WARN,
        said,
        "they belong to another job or a stuck process: `scancel` your old job, or ask the admins to end them "
        "(the pids are the node's) or to reset the GPU",
        subject,
        [
            f"pid {a.pid} {a.process}: {a.used_mib if a.used_mib is not None else '?'} MiB on "
            f"{mine[a.gpu_uuid].label} ({a.gpu_uuid})"
            for a in foreign
        ]
        + unlisted,
    )


def _link(gen: int | None, width: int | None) -> str:
    return f"Gen{gen if gen is not None else '?'} x{width if width is not None else '?'}"


def check_pcie(p: GpuProbe, subject: str) -> Finding:
    narrow, slow, idle, unknown = [], [], [], []
    for g in job_gpus(p):
        now, top = _link(g.gen, g.width), _link(g.gen_max, g.width_max)
        if None in (g.gen, g.gen_max, g.width, g.width_max):
            unknown.append(f"{g.label}: nvidia-smi cannot report its link ({now} of {top})")
            continue
        assert g.gen is not None and g.gen_max is not None and g.width is not None and g.width_max is not None
        if g.width < g.width_max:
            narrow.append(
                f"{g.label} runs {now} of {top}: a narrower link than the card has (badly seated card "
                "or riser)"
            )
        if g.gen < g.gen_max:
            if g.utilization:
                slow.append(f"{g.label} runs {now} of {top} while busy ({g.utilization}% utilization)")
            else:
                idle.append(
                    f"{g.label} at {now} of {top} while idle: GPUs train the link down to save power "
                    "and back up under load (normal)"
                )
    details = narrow + slow + idle + unknown
    if narrow or slow:
        return _finding(
            "gpu.pcie",
            Verdict.WARN,
            f"{len(narrow) + len(slow)} GPU(s) below their PCIe maximum",
            "ask the admins to reseat the card or check its riser/slot (`nvidia-smi -q -d PCIE` and "
            "`lspci -vv` show the same numbers)",
            subject,
            details,
        )
    if unknown and not idle and len(unknown) == len(job_gpus(p)):
        return _finding(
            "gpu.pcie",
            Verdict.SKIP,
            "nvidia-smi reports no PCIe link for these GPUs",
            subject=subject,
            details=details,
        )
    links = sorted({_link(g.gen_max, g.width_max) for g in job_gpus(p) if g.width_max})
    note = " (idle GPUs at a lower generation: normal)" if idle else ""
    return _finding(
        "gpu.pcie",
        Verdict.OK,
        f"every link at its maximum width ({', '.join(links)}){note}",
        subject=subject,
        details=details,
    )


def _numbers(text: str) -> list[str]:
    return [n.strip() for n in text.split(",") if n.strip()]


def check_devices(p: GpuProbe, subject: str, slurm_idx: Sequence[int]) -> Finding:
    assigned = (
        [str(i) for i in slurm_idx]
        or _numbers(p.env.get("SLURM_JOB_GPUS", ""))
        or _numbers(p.env.get("SLURM_STEP_GPUS", ""))
    )
    if not assigned:
        return _finding(
            "gpu.devices",
            Verdict.SKIP,
            "Slurm's GPU indices for the job on this node are unknown "
            "(no IDX in the job's GRES, no SLURM_JOB_GPUS or SLURM_STEP_GPUS in the step)",
            subject=subject,
        )
    opened = sorted(d for d, ok in p.devices.items() if ok)
    cvd = p.env.get("CUDA_VISIBLE_DEVICES", "<unset>")
    if "MIG-" in cvd:
        return _finding(
            "gpu.devices",
            Verdict.SKIP,
            f"the job holds MIG slices (CUDA_VISIBLE_DEVICES={cvd}): "
            "nvidia-smi lists their parent GPUs, so the counts do not compare; `nvidia-smi -L` in the "
            "job lists the slices",
            subject=subject,
        )
    seen = (
        f"nvidia-smi in the step sees {len(p.gpus)}, it can open {len(opened)} of {len(p.devices)} "
        f"/dev/nvidiaN, CUDA_VISIBLE_DEVICES={cvd}"
    )
    said = f"Slurm assigned GPU {','.join(assigned)} ({len(assigned)}); {seen}"
    if len(p.gpus) < len(assigned):
        return _finding(
            "gpu.devices",
            Verdict.FAIL,
            said + ": a GPU Slurm gave the job is not usable in it",
            "ask the admins to compare gres.conf's File= lines with `nvidia-smi -L` (a File= naming the "
            "wrong /dev/nvidiaN), and to look for a GPU fallen off the bus (Xid 79 in `dmesg`)",
            subject,
        )
    if len(p.gpus) > len(assigned) or len(opened) > len(assigned):
        return _finding(
            "gpu.devices",
            Verdict.WARN,
            said + ": no device cgroup isolation — the job can use GPUs "
            "Slurm gave to other jobs (only CUDA_VISIBLE_DEVICES keeps it off them)",
            _ISOLATION_FIX,
            subject,
        )
    if cvd != "<unset>" and len(_numbers(cvd)) != len(assigned):
        return _finding(
            "gpu.devices",
            Verdict.WARN,
            said + ": CUDA_VISIBLE_DEVICES names a different count",
            "the step (or your environment) overrides CUDA_VISIBLE_DEVICES: unset it in the job",
            subject,
        )
    return _finding("gpu.devices", Verdict.OK, said, subject=subject)


def _standin_why(p: GpuProbe) -> str:
    how = (
        f"its nvidia-smi is slurmlab's stand-in ({STANDIN_MARK}), answering from the hardware profile"
        if any(STANDIN_MARK in ln for s in p.sections.values() for ln in s.lines)
        else "it has no nvidia-smi"
        if "no-smi" in p.sections
        else "its tasks carry SLURMLAB_SANDBOX"
    )
    return f"the sandbox has no GPU: {how}, so there is no driver, memory or PCIe link to check"


def judge_gpu_probe(p: GpuProbe, subject: str, slurm_idx: Sequence[int] = ()) -> list[Finding]:
    """Every GPU check on what the probe saw on one node (``subject``: ``job J on NODE``)."""
    if p.standin:
        return skip_all(
            _standin_why(p), subject, "run the doctor on a job of a real GPU cluster for these checks"
        )
    smi = check_smi(p, subject)
    if smi.verdict is Verdict.FAIL:
        why = "not checked: nvidia-smi gave nothing to check (see its FAIL above)"
        rest = [_finding(c, Verdict.SKIP, why, subject=subject) for c in GPU_CHECKS if c != "gpu.smi"]
        if p.runtime is not None and p.header_cuda:  # the header may still have answered
            rest[0] = check_driver(p, subject)
        return [smi, *rest]
    checks: list[Callable[[GpuProbe, str], Finding]] = [check_driver, check_memory, check_pcie]
    return [smi, *(c(p, subject) for c in checks), check_devices(p, subject, slurm_idx)]
