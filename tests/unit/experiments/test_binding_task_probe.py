"""The binding probe's task side, run here with python3 and a stand-in ``nvidia-smi`` on PATH that answers with a
real ``-L`` capture: its devices come back whole in the task's report (one framed line, as srun --label labels it)."""

from __future__ import annotations

import os
import shutil
import subprocess
from pathlib import Path

import pytest
from shared_paths import require_shared

from slurmlab.core.framing import BEGIN, END
from slurmlab.core.gpu.binding import parse_task_reports
from slurmlab.errors import ParseError
from slurmlab.slurm.binding_probe import TASK_PROBE

PY = shutil.which("python3")
pytestmark = pytest.mark.skipif(PY is None, reason="python3 is not on PATH")


def _fake_smi(folder: Path, listing: Path, csv: str) -> None:
    script = folder / "nvidia-smi"
    script.write_text(
        "#!/bin/sh\n"
        f'if [ "$1" = "-L" ]; then cat {listing}; exit 0; fi\n'
        f'case "$1" in --query-gpu=*) echo "{csv}"; exit 0;; esac\n'
        "exit 2\n"
    )
    script.chmod(0o755)


def test_the_task_reports_its_listing_and_pci_bus_ids(tmp_path: Path) -> None:
    listing = require_shared("nvidia-smi", "smi-L-dgx-a100-8gpu-mixed-mig-r470-migguide.txt")
    lines = [ln for ln in listing.read_text().splitlines() if ln.strip()]
    first_uuid = lines[0].split("UUID: ")[1].rstrip(")")
    _fake_smi(tmp_path, listing, f"{first_uuid}, 00000000:07:00.0")
    env = {
        **os.environ,
        "PATH": f"{tmp_path}:{os.environ.get('PATH', '')}",
        "SLURM_PROCID": "1",
        "SLURMD_NODENAME": "n1",
        "SLURM_STEP_GPUS": "0",
        "CUDA_VISIBLE_DEVICES": first_uuid,
    }
    out = subprocess.run(
        [PY or "python3", "-c", TASK_PROBE], env=env, capture_output=True, text=True, timeout=60
    )
    assert out.returncode == 0, out.stderr
    printed = out.stdout.splitlines()
    # one framed report, devices included: srun's labels put its pieces back together however it cuts them
    assert len(printed) == 1 and printed[0].startswith(BEGIN) and printed[0].endswith(END)
    (rep,) = parse_task_reports([f"1: {ln}" for ln in printed])
    assert rep.visible == (first_uuid,) and rep.smi_list is not None
    assert [ln.strip() for ln in rep.smi_list.splitlines()] == [ln.strip() for ln in lines]
    assert rep.pci == ((first_uuid, "00000000:07:00.0"),)


def test_when_nvidia_smi_fails_the_report_has_no_listing(tmp_path: Path) -> None:
    script = tmp_path / "nvidia-smi"
    script.write_text(
        "#!/bin/sh\necho 'NVIDIA-SMI has failed because it could not communicate with the driver'\nexit 9\n"
    )
    script.chmod(0o755)
    env = {
        **os.environ,
        "PATH": f"{tmp_path}:{os.environ.get('PATH', '')}",
        "SLURM_PROCID": "0",
        "SLURMD_NODENAME": "n1",
    }
    out = subprocess.run(
        [PY or "python3", "-c", TASK_PROBE], env=env, capture_output=True, text=True, timeout=60
    )
    (rep,) = parse_task_reports([f"0: {ln}" for ln in out.stdout.splitlines()])
    assert rep.smi_list is None and rep.pci == ()


def test_a_broken_report_is_named() -> None:
    with pytest.raises(ParseError, match="task 0's report arrived broken"):
        parse_task_reports([f'0: {BEGIN}{{"env": {{}}, "L": [{END}'])
