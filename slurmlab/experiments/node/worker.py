"""One worker of a time-slicing experiment: ``python -m slurmlab.experiments.node.worker``.

The same protocol for both backends (``--backend cpu`` spins on CLOCK_MONOTONIC with NumPy
fixed work; ``--backend cupy`` runs the CUDA kernels on one GPU):

1. pin to the CPUs asked for, record identity, CPU affinity and the Slurm environment;
2. calibrate the timer (tick, loop cost, rate vs the host clock) and choose the switch
   threshold from it; compile and warm up;
3. agree the common start T0 (wall-clock epoch ns): ``--t0 NS``, or ``--sync-dir DIR`` where the
   worker writes ``ready.<label>`` and waits for the launcher to write ``t0``;
4. log its runs from T0 to T0+D on the shared clock;
5. at T0+D+gap (common to all workers) do a fixed amount of work, then measure copy bandwidth;
6. print one JSON report on stdout (``{"error": ...}`` and exit 1 on failure).
"""

from __future__ import annotations

import argparse
import json
import os
import sys
import time
import traceback
from pathlib import Path
from typing import Any, Protocol

SCHEMA = "slurmlab.worker/1"
# SLURMLAB_SANDBOX: set by a slurmlab sandbox's TaskProlog, so the checks can say where a sandbox differs
ENV_PREFIXES = (
    "SLURM_",
    "CUDA_",
    "NVIDIA_",
    "GPU_DEVICE_ORDINAL",
    "ROCR_VISIBLE_DEVICES",
    "OMPI_",
    "PMI_",
    "SLURMLAB_SANDBOX",
)


class Backend(Protocol):
    name: str
    clock: str

    def identity(self) -> dict[str, Any]: ...
    def now(self) -> int: ...
    def clock_offset_ns(self) -> int: ...
    def calibrate(self) -> dict[str, Any]: ...
    def choose_threshold(self, cal: dict[str, Any]) -> int: ...
    def warm_up(self) -> None: ...
    def log_runs(self, start: int, end: int, threshold: int, capacity: int) -> tuple[list[int], int]: ...
    def fixed_work(self, iters: int) -> dict[str, Any]: ...
    def copy_bandwidth(self, megabytes: int) -> dict[str, Any]: ...


def make_backend(name: str, device: int = 0) -> Backend:
    if name == "cpu":
        from slurmlab.experiments.node.cpu_worker import CpuBackend

        return CpuBackend()
    if name == "cupy":
        from slurmlab.experiments.node.gpu_worker import CupyBackend

        return CupyBackend(device)
    raise ValueError(f"unknown backend {name!r}: use cpu or cupy")


def pick_backend(name: str = "auto") -> str:
    """``auto``: cupy when CuPy is installed and sees a GPU, else cpu."""
    if name != "auto":
        return name
    try:
        import cupy
    except ImportError:
        return "cpu"
    try:
        return "cupy" if cupy.cuda.is_available() else "cpu"
    except Exception:  # a broken driver install: no usable GPU
        return "cpu"


def environment_report(backend: str = "auto", device: int = 0) -> dict[str, Any]:
    """What this task sees, without timing anything: identity, CPU affinity, Slurm environment."""
    name = pick_backend(backend)
    return {
        "schema": SCHEMA,
        "backend": name,
        "label": os.environ.get("SLURM_PROCID") or str(os.getpid()),
        "cpu_affinity": cpu_affinity(),
        "slurm_env": slurm_environment(),
        "identity": make_backend(name, device).identity(),
    }


def parse_cpus(text: str) -> set[int]:
    """``"0,2-3"`` -> {0, 2, 3} (the kernel's cpulist format)."""
    cpus: set[int] = set()
    for part in text.split(","):
        part = part.strip()
        if not part:
            continue
        lo, _, hi = part.partition("-")
        if not lo.isdigit() or (hi and not hi.isdigit()):
            raise ValueError(f"bad CPU list {text!r}: use e.g. 0 or 0,2-3")
        cpus.update(range(int(lo), int(hi or lo) + 1))
    if not cpus:
        raise ValueError(f"empty CPU list {text!r}")
    return cpus


def slurm_environment() -> dict[str, str]:
    return {k: v for k, v in sorted(os.environ.items()) if k.startswith(ENV_PREFIXES)}


def cpu_affinity() -> list[int]:
    try:
        return sorted(os.sched_getaffinity(0))
    except (AttributeError, OSError):  # not Linux
        return []


def _set_priority(nice: int) -> dict[str, Any]:
    """Ask for niceness ``nice`` so unrelated load on the same core eats less of D.

    Under Linux autogroup scheduling niceness only counts inside a session's group, so a
    worker that leads its own session sets its group's niceness too. Refusal is recorded.
    """
    out: dict[str, Any] = {}
    try:
        os.setpriority(os.PRIO_PROCESS, 0, nice)
    except OSError as exc:
        out["nice_refused"] = str(exc)
    autogroup = Path("/proc/self/autogroup")
    if os.getsid(0) == os.getpid() and autogroup.exists():
        try:
            autogroup.write_text(str(nice))
            out["autogroup"] = autogroup.read_text().strip()
        except OSError as exc:
            out["autogroup_refused"] = str(exc)
    out["nice"] = os.getpriority(os.PRIO_PROCESS, 0)
    return out


def _sleep_until_epoch(target_ns: int, margin_ns: int = 20_000_000) -> None:
    """Sleep until ``margin`` before the target; the backend spins the rest."""
    left = (target_ns - margin_ns - time.time_ns()) / 1e9
    if left > 0:
        time.sleep(left)


def _wait_for_t0(sync_dir: Path, label: str, timeout: float) -> int:
    ready = sync_dir / f"ready.{label}"
    tmp = sync_dir / f".ready.{label}.tmp"
    tmp.write_text(str(os.getpid()))
    tmp.replace(ready)
    t0_file = sync_dir / "t0"
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        try:
            text = t0_file.read_text().strip()
        except FileNotFoundError:
            text = ""
        if text:
            return int(text)
        time.sleep(0.002)
    raise TimeoutError(f"no T0 appeared in {t0_file} within {timeout:.0f} s")


def build_parser() -> argparse.ArgumentParser:
    p = argparse.ArgumentParser(
        prog="python -m slurmlab.experiments.node.worker", description=__doc__.split("\n")[0]
    )
    p.add_argument("--backend", choices=("cpu", "cupy"), default="cpu")
    p.add_argument("--label", default=None, help="name of this worker in the report (default: rank/pid)")
    start = p.add_mutually_exclusive_group()
    start.add_argument("--t0", type=int, default=None, help="common start, wall-clock epoch ns")
    start.add_argument("--t0-file", type=Path, default=None, help="file holding the common start (epoch ns)")
    start.add_argument("--sync-dir", type=Path, default=None, help="write ready.<label>, wait for <dir>/t0")
    p.add_argument("--duration", type=float, default=2.0, help="logging window D in seconds (0: no logging)")
    p.add_argument(
        "--threshold-us", type=float, default=None, help="switch threshold (default: from calibration)"
    )
    p.add_argument("--capacity", type=int, default=None, help="runs the log holds (default: enough for D)")
    p.add_argument("--fma-iters", type=int, default=0, help="fixed work size (0: skip)")
    p.add_argument("--work-repeats", type=int, default=1, help="repeat the fixed work, keep the best")
    p.add_argument("--work-gap", type=float, default=0.2, help="seconds after T0+D when fixed work starts")
    p.add_argument("--copy-mb", type=int, default=0, help="copy bandwidth buffer in MiB (0: skip)")
    p.add_argument("--pin", default=None, help="pin to these CPUs, e.g. 0 or 0,2-3")
    p.add_argument("--device", type=int, default=0, help="GPU ordinal for --backend cupy")
    p.add_argument(
        "--nice", type=int, default=None,
        help="set this niceness first (negative needs privilege; refused = recorded, not fatal)",
    )  # fmt: skip
    p.add_argument("--sync-timeout", type=float, default=300.0)
    return p


def run(args: argparse.Namespace) -> dict[str, Any]:
    label = args.label or os.environ.get("SLURM_PROCID") or str(os.getpid())
    report: dict[str, Any] = {"schema": SCHEMA, "backend": args.backend, "label": label, "pid": os.getpid()}
    if args.pin is not None:
        os.sched_setaffinity(0, parse_cpus(args.pin))
    if args.nice is not None:
        report.update(_set_priority(args.nice))
    report["cpu_affinity"] = cpu_affinity()
    report["slurm_env"] = slurm_environment()
    backend = make_backend(args.backend, args.device)
    report["identity"] = backend.identity()
    cal = backend.calibrate()
    threshold = int(args.threshold_us * 1000) if args.threshold_us else backend.choose_threshold(cal)
    cal["threshold_ns"] = threshold
    # the smallest gap the logger could mistake for a switch without being one
    cal["noise_floor_ns"] = max(cal["tick_ns"], cal["loop_ns_p999"])
    report["calibration"] = cal
    backend.warm_up()
    # measured now, while no logger spins: on a shared GPU a read kernel would otherwise wait
    # for its time slice and blur the bracket (the clocks drift by ~1e-5 over the seconds until T0)
    offset = backend.clock_offset_ns()

    if args.t0 is not None:
        t0 = args.t0
    elif args.t0_file is not None:
        t0 = int(args.t0_file.read_text().strip())
    elif args.sync_dir is not None:
        t0 = _wait_for_t0(args.sync_dir, label, args.sync_timeout)
    else:
        t0 = time.time_ns() + 200_000_000
    report["t0_epoch_ns"] = t0
    report["late_ns"] = max(0, time.time_ns() - t0)
    duration_ns = int(args.duration * 1e9)

    if duration_ns > 0:
        _sleep_until_epoch(t0)
        start = t0 - offset
        capacity = args.capacity or max(1024, duration_ns // max(threshold, 1) + 2)
        flat, total = backend.log_runs(start, start + duration_ns, threshold, capacity)
        report["timeslice"] = {
            "clock": backend.clock,
            "window_ns": [start, start + duration_ns],
            "clock_offset_ns": offset,
            "runs_ns": flat,
            "n_runs_total": total,
            "capacity": capacity,
            "truncated": total > capacity,
        }
    if args.fma_iters > 0:
        work_at = t0 + duration_ns + int(args.work_gap * 1e9)
        _sleep_until_epoch(work_at, margin_ns=0)
        while time.time_ns() < work_at:
            pass
        work = backend.fixed_work(args.fma_iters)
        # a baseline repeats and keeps its best: the undisturbed time is the reference
        tries = [work["seconds"]]
        for _ in range(args.work_repeats - 1):
            again = backend.fixed_work(args.fma_iters)
            tries.append(again["seconds"])
            if again["seconds"] < work["seconds"]:
                work = again
        work["started_epoch_ns"] = work_at
        work["tries_seconds"] = tries
        report["fixed_work"] = work
    if args.copy_mb > 0:
        report["copy"] = backend.copy_bandwidth(args.copy_mb)
    return report


def main(argv: list[str] | None = None) -> int:
    args = build_parser().parse_args(argv)
    try:
        report = run(args)
    except Exception as exc:  # the launcher must get a report, not a bare traceback
        err = {
            "schema": SCHEMA,
            "backend": args.backend,
            "label": args.label,
            "error": f"{type(exc).__name__}: {exc}",
            "traceback": traceback.format_exc(limit=5),
        }
        print(json.dumps(err), flush=True)
        return 1
    print(json.dumps(report), flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
