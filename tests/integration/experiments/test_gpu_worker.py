"""The CuPy backend on a real GPU (skipped without one): the same protocol and analysis as the CPU."""

from __future__ import annotations

import json
import subprocess
import sys
import time

import pytest

from slurmlab.experiments.timeslice import run
from slurmlab.experiments.timeslice_result import TIME_SLICED


def _gpu_reason() -> str | None:
    try:
        import cupy
    except ImportError:
        return "cupy is not installed (pip install 'slurmlab[gpu]')"
    try:
        if not cupy.cuda.is_available():
            return "no CUDA GPU visible"
    except Exception as exc:  # a driver that is present but broken
        return f"CUDA unusable: {exc}"
    return None


REASON = _gpu_reason()
pytestmark = [pytest.mark.gpu, pytest.mark.skipif(REASON is not None, reason=REASON or "")]


def test_cupy_worker_report() -> None:
    t0 = time.time_ns() + 15_000_000_000  # cupy import + NVRTC compile come first
    proc = subprocess.run(
        [sys.executable, "-m", "slurmlab.experiments.node.worker", "--backend", "cupy", "--t0", str(t0),
         "--duration", "0.5", "--fma-iters", "1000", "--copy-mb", "256"],
        capture_output=True, text=True, timeout=120, check=False,
    )  # fmt: skip
    report = json.loads(proc.stdout)
    assert "error" not in report, report
    cal = report["calibration"]
    assert cal["clock"] == "globaltimer" and cal["tick_ns"] > 0
    assert 2_000 <= cal["threshold_ns"] <= 100_000
    assert 0.98 < cal["rate_vs_host"] < 1.02  # %globaltimer runs at wall-clock speed
    dev = report["identity"]["devices"][0]
    assert dev["uuid"].startswith(("GPU-", "MIG-")) and dev["sms"] > 0 and dev["memory_total"] > 0
    assert report["timeslice"]["n_runs_total"] >= 1 and report["late_ns"] == 0
    assert report["copy"]["gbps"] > 10


def test_two_processes_on_one_gpu_are_time_sliced() -> None:
    r = run(None, procs=2, duration=2.0, backend="cupy", fma_iters=2_000_000, solo=True)
    assert r.classification == TIME_SLICED, r.summary()
    for p in r.processes:
        assert p.share == pytest.approx(0.5, abs=0.15), r.summary()
        assert p.slowdown is not None and p.slowdown > 1.5, r.summary()
    assert r.jain > 0.9
