"""Driver of ``device_check.sh``: every step is timed, guarded, and recorded in one JSON report.

A step that fails records its error and the run goes on; a step that cannot run records SKIP
with the reason. The summary printed at the end is built from measured values only.
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import signal
import subprocess
import sys
import tempfile
import time
import traceback
from collections.abc import Callable
from pathlib import Path
from typing import Any

REPO = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(REPO))

OUT_FILE = Path(os.environ.get("OUT") or ".") / "device_check.json"
REPORT: dict[str, Any] = {"started": time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime()), "steps": {}}
DEADLINE = 0.0


def save() -> None:
    OUT_FILE.parent.mkdir(parents=True, exist_ok=True)
    OUT_FILE.write_text(json.dumps(REPORT, indent=2, default=str))


def step(name: str, fn: Callable[[], Any], *, need_s: float = 20.0) -> Any:
    try:
        return _step(name, fn, need_s=need_s)
    finally:
        save()  # a run cut short by the outer timeout still leaves every finished step


def _step(name: str, fn: Callable[[], Any], *, need_s: float = 20.0) -> Any:
    left = DEADLINE - time.monotonic()
    if left < need_s:
        REPORT["steps"][name] = {"status": "SKIP", "reason": f"only {left:.0f} s of the budget left"}
        print(f"[{name}] SKIP: out of time", flush=True)
        return None
    t = time.monotonic()
    print(f"[{name}] ...", flush=True)
    try:
        value = fn()
    except SkipStep as exc:
        REPORT["steps"][name] = {"status": "SKIP", "reason": str(exc), "seconds": time.monotonic() - t}
        print(f"[{name}] SKIP: {exc}", flush=True)
        return None
    except Exception as exc:
        REPORT["steps"][name] = {
            "status": "ERROR",
            "error": f"{type(exc).__name__}: {exc}",
            "traceback": traceback.format_exc(limit=6),
            "seconds": time.monotonic() - t,
        }
        print(f"[{name}] ERROR: {type(exc).__name__}: {exc}", flush=True)
        return None
    REPORT["steps"][name] = {"status": "OK", "seconds": time.monotonic() - t, "result": value}
    print(f"[{name}] ok in {time.monotonic() - t:.1f} s", flush=True)
    return value


class SkipStep(Exception):
    pass


def smi() -> dict[str, Any]:
    if shutil.which("nvidia-smi") is None:
        raise SkipStep("nvidia-smi not found")
    q = "name,uuid,pci.bus_id,driver_version,compute_mode,mig.mode.current,memory.total,clocks.max.sm"
    out = subprocess.run(
        ["nvidia-smi", f"--query-gpu={q}", "--format=csv,noheader"],
        capture_output=True,
        text=True,
        timeout=30,
    )
    return {"query": q, "rows": out.stdout.strip().splitlines(), "stderr": out.stderr.strip()}


def environment() -> dict[str, Any]:
    try:
        import cupy
    except ImportError as exc:
        raise SkipStep(f"cupy is not installed and could not be installed: {exc}") from exc
    info: dict[str, Any] = {"python": sys.version.split()[0], "cupy": cupy.__version__}
    info["cuda_available"] = bool(cupy.cuda.is_available())
    if not info["cuda_available"]:
        raise SkipStep(f"CuPy {cupy.__version__} sees no usable GPU (driver missing or too old)")
    info["runtime"] = cupy.cuda.runtime.runtimeGetVersion()
    info["driver"] = cupy.cuda.runtime.driverGetVersion()
    info["devices"] = cupy.cuda.runtime.getDeviceCount()
    return info


def compile_kernels() -> dict[str, Any]:
    import cupy

    from slurmlab.experiments.node.compile import KERNELS, compile_nvrtc

    props = cupy.cuda.runtime.getDeviceProperties(0)
    arch = f"sm_{props['major']}{props['minor']}"
    return {"arch": arch, "cubin_bytes": {k: len(compile_nvrtc(k, arch)) for k in KERNELS}}


def worker(extra: list[str], timeout: float = 120) -> dict[str, Any]:
    t0 = time.time_ns() + 20_000_000_000
    argv = [
        sys.executable,
        "-m",
        "slurmlab.experiments.node.worker",
        "--backend",
        "cupy",
        "--t0",
        str(t0),
        *extra,
    ]
    proc = subprocess.run(argv, capture_output=True, text=True, timeout=timeout)
    lines = [ln for ln in proc.stdout.splitlines() if ln.strip()]
    if not lines:
        raise RuntimeError(f"worker printed nothing; stderr: {proc.stderr[-2000:]}")
    report: dict[str, Any] = json.loads(lines[-1])
    if "error" in report:
        raise RuntimeError(report["error"])
    return report


def calibrate() -> dict[str, Any]:
    rep = worker(["--duration", "0.5", "--copy-mb", "1024"])
    return {
        "calibration": rep["calibration"],
        "identity": rep["identity"],
        "solo_log": {k: v for k, v in rep["timeslice"].items() if k != "runs_ns"},
        "copy": rep["copy"],
    }


def summarise(result: Any) -> dict[str, Any]:
    data: dict[str, Any] = result.as_dict(include_runs=False)
    data["summary"] = result.summary()
    print(result.summary(), flush=True)
    return data


SOLO: dict[str, Any] = {}


def solo(iters: int) -> dict[str, Any]:
    from slurmlab.experiments.plan import TimeslicePlan, WorkerPlan
    from slurmlab.experiments.workers import run_workers

    plan = TimeslicePlan(1, 1.0, "cupy", fma_iters=iters)
    rep = run_workers(WorkerPlan(plan, (None,), ("solo",), work_repeats=3))[0]
    SOLO.update(rep)
    fw = rep["fixed_work"]
    return {
        "fixed_work": fw,
        "fp32_tflops_measured": fw["tflops"],
        "log": {k: v for k, v in rep["timeslice"].items() if k != "runs_ns"},
    }


def shared(procs: int, iters: int, duration: float) -> dict[str, Any]:
    from slurmlab.experiments.timeslice import TimeslicePlan, measure

    plan = TimeslicePlan(procs, duration, "cupy", fma_iters=iters, solo=not SOLO)
    r = measure(plan, solo_report=SOLO or None)
    return summarise(r)


def mps(iters: int, duration: float) -> dict[str, Any]:
    ctl = shutil.which("nvidia-cuda-mps-control")
    if ctl is None:
        raise SkipStep("nvidia-cuda-mps-control not found")
    base = Path(tempfile.mkdtemp(prefix="slurmlab-mps-"))
    env = dict(
        os.environ, CUDA_MPS_PIPE_DIRECTORY=str(base / "pipe"), CUDA_MPS_LOG_DIRECTORY=str(base / "log")
    )
    (base / "pipe").mkdir()
    (base / "log").mkdir()
    start = subprocess.run([ctl, "-d"], env=env, capture_output=True, text=True, timeout=30)
    if start.returncode != 0:
        raise SkipStep(f"MPS daemon did not start (exit {start.returncode}): {start.stderr.strip()[:300]}")
    saved = {k: os.environ.get(k) for k in ("CUDA_MPS_PIPE_DIRECTORY", "CUDA_MPS_LOG_DIRECTORY")}
    try:
        os.environ.update({k: env[k] for k in saved})
        time.sleep(1.0)
        from slurmlab.experiments.timeslice import TimeslicePlan, measure

        try:
            plan = TimeslicePlan(2, duration, "cupy", fma_iters=iters, solo=not SOLO)
            r = measure(plan, solo_report=SOLO or None)
        except Exception as exc:
            log = base / "log" / "control.log"
            tail = log.read_text()[-1500:] if log.exists() else ""
            raise SkipStep(f"workers could not run under MPS: {exc}; control.log: {tail}") from exc
        return summarise(r)
    finally:
        subprocess.run([ctl], input="quit\n", env=env, capture_output=True, text=True, timeout=30)
        for k, v in saved.items():
            if v is None:
                os.environ.pop(k, None)
            else:
                os.environ[k] = v


def bandwidth_verdicts() -> dict[str, Any]:
    from slurmlab.experiments.bandwidth import check_device_copy

    cal = (REPORT["steps"].get("calibrate") or {}).get("result")
    if not cal:
        raise SkipStep("no copy measurement (calibrate failed)")
    name = cal["identity"]["devices"][0]["name"]
    verdict = check_device_copy(name, cal["copy"]["gbps"])
    return {
        "device": name,
        "copy_gbps_measured": cal["copy"]["gbps"],
        "verdict": None if verdict is None else str(verdict),
    }


def print_summary() -> None:
    print("\n== device check summary (all values measured) ==")
    for name, s in REPORT["steps"].items():
        res = s.get("result") or {}
        line = f"{name:<14} {s['status']:<5} {s.get('seconds', 0):6.1f} s"
        if name == "calibrate" and res:
            c = res["calibration"]
            line += (f"  tick {c['tick_ns']:.0f} ns, loop {c['loop_ns_median']:.0f} ns, threshold "
                     f"{c['threshold_ns'] / 1e3:.1f} us, rate {c['rate_vs_host']:.6f}, copy {res['copy']['gbps']:.0f} GB/s")  # fmt: skip
        elif name == "solo" and res:
            line += f"  FP32 {res['fp32_tflops_measured']:.1f} TFLOP/s, fixed work {res['fixed_work']['seconds']:.3f} s"
        elif name.startswith(("timeslice", "mps")) and res:
            m = res["measured"]
            slices = [q["slices_ns"]["median"] for q in m["processes"]]
            line += (f"  {res['classification']}, shares {[round(q['share'], 3) for q in m['processes']]}, "
                     f"slice medians {[None if x is None else round(x / 1e3) for x in slices]} us, "
                     f"slowdown {[q['slowdown'] and round(q['slowdown'], 2) for q in m['processes']]}, "
                     f"aggregate {m['aggregate_efficiency'] and round(m['aggregate_efficiency'], 2)}")  # fmt: skip
        elif name == "bandwidth" and res:
            line += f"  {res['verdict'] or res['copy_gbps_measured']}"
        else:
            line += f"  {s.get('reason') or s.get('error') or ''}"
        print(line)


def _on_term(signum: int, frame: Any) -> None:
    raise KeyboardInterrupt(f"signal {signum}")


def main() -> int:
    global DEADLINE
    p = argparse.ArgumentParser()
    p.add_argument("--budget", type=float, default=270.0, help="seconds for all steps")
    p.add_argument("--fma-iters", type=int, default=4_000_000)
    p.add_argument("--duration", type=float, default=2.0)
    args = p.parse_args()
    DEADLINE = time.monotonic() + args.budget
    out = OUT_FILE
    # the shell wrapper's timeout sends SIGTERM: turn it into an exception so `finally` runs
    signal.signal(signal.SIGTERM, _on_term)
    try:
        step("nvidia_smi", smi, need_s=5)
        env = step("environment", environment, need_s=10)
        if not env or not env.get("cuda_available"):
            REPORT["verdict"] = "SKIP: no usable GPU through CuPy"
        else:
            step("compile_nvrtc", compile_kernels, need_s=10)
            step("calibrate", calibrate, need_s=30)
            step("solo", lambda: solo(args.fma_iters), need_s=30)
            step("timeslice_2", lambda: shared(2, args.fma_iters, args.duration), need_s=40)
            step("timeslice_3", lambda: shared(3, args.fma_iters, args.duration), need_s=40)
            step("mps_2", lambda: mps(args.fma_iters, args.duration), need_s=45)
            step("bandwidth", bandwidth_verdicts, need_s=1)
    finally:
        REPORT["finished"] = time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime())
        save()
    print_summary()
    print(f"report: {out}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
