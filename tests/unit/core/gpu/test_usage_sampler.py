"""The sampler program that runs in the step, run here with a fake NVML module injected: it reads THIS job's GPUs
only (by UUID when Slurm put UUIDs in CUDA_VISIBLE_DEVICES, else by the job's global indices = minor numbers),
skips devices the step may not open, and prints framed reports the kernel side reads. nvidia-smi rows are read the same
way. The real NVML runs only under the ``gpu`` marker (tests/integration/slurm/test_usage_nvml.py)."""

from __future__ import annotations

import sys
from types import SimpleNamespace
from typing import Any

import pytest

from slurmlab.core.framing import FrameStream
from slurmlab.core.gpu.usage import SamplerNote, UsageSample, sampler_report
from slurmlab.core.gpu.usage_sampler import SAMPLER_SOURCE, sampler_command


def _read(out: str) -> list[list[UsageSample] | SamplerNote]:
    """What the kernel side reads of the program's output, labelled as srun --label would (one task)."""
    stream = FrameStream()
    items = [item for line in out.splitlines() for item in stream.feed("0: " + line)]
    assert all(item.report is not None for item in items), items  # nothing but whole reports
    return [sampler_report(item.report) for item in items if item.report is not None]


def _program() -> dict[str, Any]:
    namespace: dict[str, Any] = {"__name__": "slurmlab_usage_sampler_test"}
    exec(compile(SAMPLER_SOURCE, "<usage sampler>", "exec"), namespace)
    return namespace


class NVMLError(Exception):
    def __init__(self, value: int) -> None:
        self.value = value


class FakeNVML:
    """Four GPUs: minor numbers 0-3 at NVML indices 0-3 (GPU 3 is another job's and cannot be opened)."""

    def __init__(self, forbidden: tuple[int, ...] = (3,), util: tuple[int, ...] = (5, 60, 70, 99)) -> None:
        self.forbidden = forbidden
        self.util = util
        self.inits = self.shutdowns = 0

    def nvmlInit(self) -> None:
        self.inits += 1

    def nvmlShutdown(self) -> None:
        self.shutdowns += 1

    def nvmlDeviceGetCount(self) -> int:
        return 4

    def nvmlDeviceGetHandleByIndex(self, i: int) -> int:
        if i in self.forbidden:
            raise NVMLError(4)  # NVML_ERROR_NO_PERMISSION under ConstrainDevices
        return i

    def nvmlDeviceGetUUID(self, h: int) -> bytes:
        return f"GPU-{h:04d}".encode()  # old nvidia-ml-py returns bytes

    def nvmlDeviceGetMinorNumber(self, h: int) -> int:
        return h

    def nvmlDeviceGetUtilizationRates(self, h: int) -> SimpleNamespace:
        return SimpleNamespace(gpu=self.util[h], memory=0)

    def nvmlDeviceGetMemoryInfo(self, h: int) -> SimpleNamespace:
        return SimpleNamespace(used=(h + 1) * 1024**3, total=80 * 1024**3, free=0)


def test_the_jobs_gpus_come_from_uuids_first_then_the_kernels_indices_then_slurms_env() -> None:
    wanted = _program()["wanted"]
    env = {"SLURMD_NODENAME": "n1", "CUDA_VISIBLE_DEVICES": "GPU-0001,MIG-abc", "SLURM_STEP_GPUS": "1"}
    assert wanted(env, {"n1": [1, 2]}) == ("n1", {"GPU-0001", "MIG-abc"}, {1, 2})
    env = {"SLURMD_NODENAME": "n1", "CUDA_VISIBLE_DEVICES": "0,1", "SLURM_JOB_GPUS": "2,3"}
    assert wanted(env, {}) == ("n1", set(), {2, 3})
    assert wanted(env, {"n2": [0]})[2] == {2, 3}  # the kernel knows other nodes only: Slurm's env here


@pytest.mark.parametrize(
    "uuids, idx, expected",
    [
        (set(), {1, 2}, [1, 2]),  # by global index = minor number
        ({"GPU-0002"}, {0, 1, 2}, [2]),  # UUIDs win over indices
        (set(), {3}, []),  # the one we may not open is never read
        (set(), set(), []),
    ],
)
def test_only_this_jobs_gpus_are_matched(uuids: set[str], idx: set[int], expected: list[int]) -> None:
    devices = _program()["nvml_devices"](FakeNVML(), uuids, idx)
    assert [d[0] for d in devices] == expected and all(d[1] == f"GPU-{d[0]:04d}" for d in devices)


def test_the_program_prints_lines_the_kernel_side_reads(
    monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    fake = FakeNVML()
    monkeypatch.setitem(sys.modules, "pynvml", fake)
    monkeypatch.setenv("SLURMD_NODENAME", "n1")
    monkeypatch.delenv("CUDA_VISIBLE_DEVICES", raising=False)
    _program()["main"](["0.01", "0.15", '{"n1": [1, 2]}'])
    parsed = _read(capsys.readouterr().out)
    assert parsed[0] == SamplerNote("nvml", None, ("GPU-0001", "GPU-0002"))
    samples = [s for p in parsed[1:] if isinstance(p, list) for s in p]
    assert len(samples) >= 4 and {s.series for s in samples} == {"n1 GPU 1", "n1 GPU 2"}
    by = {s.series: s for s in samples}
    assert by["n1 GPU 1"].util == fake.util[1] and by["n1 GPU 2"].mem_used_mb == 3072.0
    assert by["n1 GPU 2"].mem_total_mb == 80 * 1024 and fake.shutdowns == fake.inits == 1


def test_no_gpu_of_this_job_visible_is_an_error_line_not_another_jobs_gpu(
    monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    monkeypatch.setitem(sys.modules, "pynvml", FakeNVML())
    monkeypatch.setenv("SLURMD_NODENAME", "n1")
    monkeypatch.delenv("CUDA_VISIBLE_DEVICES", raising=False)
    _program()["main"](["0.01", "0.05", '{"n1": [3]}'])
    [note] = _read(capsys.readouterr().out)
    assert isinstance(note, SamplerNote) and note.error
    assert "none of this job's GPUs (3)" in note.error and "n1" in note.error
    monkeypatch.delenv("SLURM_JOB_GPUS", raising=False)
    monkeypatch.delenv("SLURM_STEP_GPUS", raising=False)
    _program()["main"](["0.01", "0.05", "{}"])
    [note] = _read(capsys.readouterr().out)
    assert isinstance(note, SamplerNote) and note.error and note.error.startswith("no GPU of this job on n1")


def test_nvidia_smi_rows_are_read_for_this_jobs_gpus_only() -> None:
    row = _program()["smi_row"]
    assert row("1, GPU-0001, 57, 1200, 81559", set(), {1}) == {
        "index": 1,
        "uuid": "GPU-0001",
        "util": 57.0,
        "mem_used_mb": 1200.0,
        "mem_total_mb": 81559.0,
    }
    assert row("3, GPU-0003, 99, 1, 2", set(), {1}) is None
    assert row("3, GPU-0003, 99, 1, 2", {"GPU-0003"}, set()) is not None
    for bad in (
        "",
        "index, uuid, utilization.gpu [%], a, b",
        "0, GPU-0, [N/A], 1, 2",
        "0, GPU-0, 1, 2",
        "No devices were found",
    ):
        assert row(bad, set(), {0}) is None


def test_the_command_carries_the_program_and_the_gpus_as_json() -> None:
    argv = sampler_command(2.0, 3600.0, {"n1": [0, 2]})
    assert argv[:3] == ["python3", "-c", SAMPLER_SOURCE] and argv[3:] == ["2", "3600", '{"n1":[0,2]}']
