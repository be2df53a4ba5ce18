"""The probe scripts that run inside steps, run here with this machine's python3 (no Slurm involved)."""

from __future__ import annotations

import json
import os
import shutil
import subprocess

import pytest

from slurmlab.core.gpu.binding import parse_task_reports
from slurmlab.slurm.binding_probe import TASK_PROBE
from slurmlab.slurm.probes import NVML_PROBE

PY = shutil.which("python3")
pytestmark = pytest.mark.skipif(PY is None, reason="python3 is not on PATH")


def test_task_probe_reports_env_and_real_affinity() -> None:
    env = {**os.environ, "SLURM_PROCID": "3", "SLURMD_NODENAME": "nodeX", "SLURM_STEP_GPUS": "2,5",
           "CUDA_VISIBLE_DEVICES": "5"}
    out = subprocess.run([PY or "python3", "-c", TASK_PROBE], env=env, capture_output=True, text=True, timeout=30)
    assert out.returncode == 0, out.stderr
    (rep,) = parse_task_reports(out.stdout.splitlines())
    assert (rep.rank, rep.node, rep.step_gpus, rep.visible) == (3, "nodeX", (2, 5), ("5",))
    assert rep.affinity == frozenset(os.sched_getaffinity(0)) and rep.host_cpus == os.cpu_count()


def test_nvml_probe_says_when_nvidia_ml_py_is_missing() -> None:
    out = subprocess.run([PY or "python3", "-c", NVML_PROBE], capture_output=True, text=True, timeout=30)
    assert out.returncode == 0, out.stderr
    (line,) = [x for x in out.stdout.splitlines() if x.startswith("SLURMLAB_NVML ")]
    report = json.loads(line.split(" ", 1)[1])
    has_nvml = subprocess.run([PY or "python3", "-c", "import pynvml; pynvml.nvmlInit()"],
                              capture_output=True).returncode == 0
    if has_nvml:  # a GPU machine: a real report
        assert report.get("gpus"), report
    else:
        assert "error" in report and "nvidia-ml-py" in report["error"]


def test_nvml_probe_is_valid_python() -> None:
    compile(NVML_PROBE, "<nvml probe>", "exec")
