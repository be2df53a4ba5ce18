"""The usage sampler program with the real NVML on a real GPU (marker ``gpu``; skipped without one): it finds
the GPU named by SLURM_JOB_GPUS and prints samples the kernel side reads."""

from __future__ import annotations

import os
import subprocess
import sys

import pytest

from slurmlab.core.framing import FrameStream
from slurmlab.core.gpu.usage import SamplerNote, sampler_report
from slurmlab.core.gpu.usage_sampler import SAMPLER_SOURCE


def _reason() -> str | None:
    try:
        import pynvml
    except ImportError:
        return "nvidia-ml-py is not installed (pip install 'slurmlab[gpu]')"
    try:
        pynvml.nvmlInit()
        pynvml.nvmlShutdown()
    except Exception as exc:
        return f"NVML unusable (no NVIDIA driver or GPU): {exc}"
    return None


REASON = _reason()
pytestmark = [pytest.mark.gpu, pytest.mark.skipif(REASON is not None, reason=REASON or "")]


def test_the_sampler_reads_the_gpu_slurm_named_through_nvml() -> None:
    import pynvml

    pynvml.nvmlInit()
    try:
        minor = pynvml.nvmlDeviceGetMinorNumber(pynvml.nvmlDeviceGetHandleByIndex(0))
    finally:
        pynvml.nvmlShutdown()
    env = {k: v for k, v in os.environ.items() if k != "CUDA_VISIBLE_DEVICES"}
    env.update(SLURMD_NODENAME="here", SLURM_JOB_GPUS=str(minor))
    out = subprocess.run(
        [sys.executable, "-c", SAMPLER_SOURCE, "0.2", "1.5", "{}"],
        capture_output=True,
        text=True,
        env=env,
        timeout=60,
    )
    stream = FrameStream()
    items = [item for line in out.stdout.splitlines() for item in stream.feed("0: " + line)]
    parsed = [sampler_report(item.report) for item in items if item.report is not None]
    assert isinstance(parsed[0], SamplerNote) and parsed[0].source == "nvml", out.stdout + out.stderr
    samples = [s for p in parsed if isinstance(p, list) for s in p]
    assert samples and {s.series for s in samples} == {f"here GPU {minor}"}
    assert all(
        0 <= s.util <= 100 and s.mem_total_mb and 0 <= (s.mem_used_mb or 0) <= s.mem_total_mb for s in samples
    )
