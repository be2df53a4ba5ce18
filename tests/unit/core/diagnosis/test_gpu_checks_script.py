"""The probe script itself, run by /bin/sh here with stand-in nvidia-smi programs (no Slurm needed): its sections
read back, and a hung nvidia-smi is ended by its own timeout and judged a hung GPU."""

from __future__ import annotations

import os
import subprocess
from pathlib import Path

import pytest

from slurmlab.core.diagnosis.findings import Verdict
from slurmlab.core.diagnosis.gpu_checks import judge_gpu_probe
from slurmlab.core.gpu.smi import read_probe
from slurmlab.slurm import doctor_gpu

ROW = "{i}, GPU-{i}, NVIDIA H100 80GB HBM3, 550.54.15, 5, 5, {w}, 16, 600, 81559, 0, Enabled"


def fake_smi(folder: Path, *, hang: bool = False, width: int = 16) -> None:
    rows = "\\n".join(ROW.format(i=i, w=width if i == 1 else 16) for i in range(2))
    (folder / "nvidia-smi").write_text(
        "#!/bin/sh\n" + ("sleep 60\n" if hang else "") + 'case "$1" in\n'
        f'  --query-gpu=*) printf "{rows}\\n" ;;\n'
        "  --query-compute-apps=*) ;;\n"
        '  "") echo "| NVIDIA-SMI 550.54.15   Driver Version: 550.54.15   CUDA Version: 12.4 |" ;;\n'
        "esac\n"
    )
    (folder / "nvidia-smi").chmod(0o755)


def run_probe(folder: Path, timeout: int = 20) -> str:
    """The probe with ``timeout`` seconds per command: generous where nothing hangs (a loaded machine starts
    Python slowly), short where the hang is the point."""
    env = {k: v for k, v in os.environ.items() if not k.startswith(("SLURM", "CUDA_VISIBLE"))}
    env.update(
        PATH=f"{folder}{os.pathsep}{env.get('PATH', '')}", CUDA_VISIBLE_DEVICES="0,1", SLURM_JOB_GPUS="2,3"
    )
    done = subprocess.run(
        ["/bin/sh", "-c", doctor_gpu.GPU_PROBE, "probe", str(timeout), "print('cudart 12.4 test')"],
        capture_output=True,
        text=True,
        env=env,
        timeout=60,
        check=False,
    )
    return done.stdout


@pytest.mark.parametrize("width", [16, 8])
def test_the_script_reports_what_nvidia_smi_says(tmp_path: Path, width: int) -> None:
    fake_smi(tmp_path, width=width)
    probe = read_probe(run_probe(tmp_path))
    assert [g.uuid for g in probe.gpus] == ["GPU-0", "GPU-1"] and probe.gpus[1].width == width
    assert probe.header_cuda == "12.4" and probe.runtime == "12.4"
    assert probe.env["CUDA_VISIBLE_DEVICES"] == "0,1" and probe.env["SLURM_JOB_GPUS"] == "2,3"
    found = {f.check: f for f in judge_gpu_probe(probe, "here", (2, 3))}
    assert found["gpu.smi"].verdict is Verdict.OK and found["gpu.driver"].verdict is Verdict.OK
    assert found["gpu.pcie"].verdict is (Verdict.OK if width == 16 else Verdict.WARN)


def test_a_hung_nvidia_smi_is_ended_by_its_timeout(tmp_path: Path) -> None:
    fake_smi(tmp_path, hang=True)
    text = run_probe(tmp_path, timeout=1)
    probe = read_probe(text)
    assert probe.sections["query-gpu"].timed_out
    assert "compute-apps" not in probe.sections and "header" not in probe.sections  # not asked again
    assert "env" in probe.sections  # the rest of the probe still ran
    smi = judge_gpu_probe(probe, "here", (2, 3))[0]
    assert smi.verdict is Verdict.FAIL and "nvidia-persistenced" in smi.fix
