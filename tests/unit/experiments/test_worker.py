"""The worker protocol: arguments, its JSON report, and how it fails."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import time

import pytest

from slurmlab.experiments.node.worker import environment_report, parse_cpus, pick_backend


def _worker(*args: str, env: dict[str, str] | None = None) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-m", "slurmlab.experiments.node.worker", *args],
        capture_output=True, text=True, timeout=60, env=env, check=False,
    )  # fmt: skip


def test_parse_cpus() -> None:
    assert parse_cpus("0,2-4") == {0, 2, 3, 4}
    for bad in ("", "a", "1-x"):
        with pytest.raises(ValueError):
            parse_cpus(bad)


def test_cpu_worker_reports_one_json_document() -> None:
    t0 = time.time_ns() + 300_000_000
    env = dict(os.environ, SLURM_JOB_ID="42", CUDA_VISIBLE_DEVICES="0")
    pin = str(min(os.sched_getaffinity(0)))
    proc = _worker(
        "--backend", "cpu", "--label", "w0", "--t0", str(t0), "--duration", "0.2",
        "--fma-iters", "50", "--copy-mb", "4", "--pin", pin, env=env,
    )  # fmt: skip
    assert proc.returncode == 0, proc.stderr
    report = json.loads(proc.stdout)
    assert report["label"] == "w0" and report["backend"] == "cpu"
    assert report["cpu_affinity"] == [int(pin)]
    assert report["slurm_env"]["SLURM_JOB_ID"] == "42" and report["slurm_env"]["CUDA_VISIBLE_DEVICES"] == "0"
    cal = report["calibration"]
    assert cal["tick_ns"] > 0 and cal["loop_ns_median"] > 0
    assert cal["threshold_ns"] > 10 * cal["loop_ns_median"]  # well above the loop cost
    assert 0.99 < cal["rate_vs_host"] < 1.01
    ts = report["timeslice"]
    start, end = ts["window_ns"]
    assert end - start == 200_000_000
    runs = ts["runs_ns"]
    assert len(runs) == 2 * ts["n_runs_total"] and not ts["truncated"]
    assert runs[0] >= start and runs[-1] >= end  # logged from T0 to T0+D
    assert report["fixed_work"]["seconds"] > 0 and report["fixed_work"]["flops"] == 2 * 65536 * 50
    assert report["copy"]["gbps"] > 0


def test_a_failing_worker_prints_an_error_report() -> None:
    proc = _worker("--backend", "cpu", "--pin", "9999", "--duration", "0.1")
    assert proc.returncode == 1
    report = json.loads(proc.stdout)
    assert report["error"].startswith("OSError")


def test_t0_file_and_truncation_capacity(tmp_path: pytest.TempPathFactory) -> None:
    t0_file = tmp_path / "t0"  # type: ignore[operator]
    t0_file.write_text(str(time.time_ns() + 2_000_000_000))
    # a threshold below the loop cost makes every read a "switch": the tiny buffer overflows
    proc = _worker(
        "--t0-file", str(t0_file), "--duration", "0.05", "--threshold-us", "0.001", "--capacity", "4"
    )
    assert proc.returncode == 0, proc.stderr
    ts = json.loads(proc.stdout)["timeslice"]
    assert ts["truncated"] and ts["n_runs_total"] > 4 and len(ts["runs_ns"]) == 8, {
        k: v for k, v in ts.items() if k != "runs_ns"
    }


def test_a_worker_that_misses_t0_says_so() -> None:
    proc = _worker("--t0", str(time.time_ns() - 5_000_000_000), "--duration", "0.1")
    report = json.loads(proc.stdout)
    assert report["late_ns"] >= 5_000_000_000
    assert report["timeslice"]["n_runs_total"] == 1  # the window was over before it began


def test_environment_report_without_a_gpu() -> None:
    if pick_backend("auto") != "cpu":
        pytest.skip("a GPU is visible here")
    rep = environment_report("auto")
    assert rep["backend"] == "cpu" and rep["identity"]["devices"] == []
    assert rep["cpu_affinity"]
