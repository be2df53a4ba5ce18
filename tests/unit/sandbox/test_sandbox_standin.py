"""The stand-in tools a sandbox writes beside slurm.conf: they run with no slurmlab installed, and get on PATH."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

from slurmlab.core.gpu.hardware_profile import HARDWARE_FILE
from slurmlab.core.gpu.sandbox_limits import SANDBOX_ENV
from slurmlab.core.gpu.smi import parse_smi_list
from slurmlab.core.gpu.standin_names import STANDIN_MARK
from slurmlab.sandbox.folder import write_standins
from slurmlab.sandbox.profile import load_profile
from slurmlab.sandbox.render import render_hardware_file
from slurmlab.slurm.runner import Runner


def _sandbox(tmp_path: Path, profile: str = "dgx-h100") -> Path:
    (tmp_path / HARDWARE_FILE).write_text(render_hardware_file(load_profile(profile)))
    (tmp_path / "slurm.conf").write_text("# test\n")
    write_standins(tmp_path)
    return tmp_path


def _smi(folder: Path, *argv: str, **env: str) -> subprocess.CompletedProcess[str]:
    # -I: no site-packages, no PYTHONPATH, no current folder: slurmlab cannot be imported, as on a bare node
    return subprocess.run(
        [sys.executable, "-I", str(folder / "bin" / "nvidia-smi"), *argv],
        capture_output=True,
        text=True,
        timeout=30,
        env={"PATH": "/usr/bin:/bin", **env},
        check=False,
    )


def test_the_stand_in_runs_without_slurmlab_and_answers_for_the_step(tmp_path: Path) -> None:
    folder = _sandbox(tmp_path)
    res = _smi(folder, "-L", CUDA_VISIBLE_DEVICES="2,6", SLURM_JOB_ID="4", SLURMD_NODENAME="node2")
    assert res.returncode == 0, res.stderr
    assert res.stdout.startswith(STANDIN_MARK) and "on node2" in res.stdout
    assert [d.name for d in parse_smi_list(res.stdout)[0]] == ["NVIDIA H100 80GB HBM3"] * 2
    assert os.access(folder / "bin" / "nvidia-smi", os.X_OK)


def test_an_unknown_option_exits_2_with_the_note(tmp_path: Path) -> None:
    res = _smi(_sandbox(tmp_path), "nvlink", "-e", CUDA_VISIBLE_DEVICES="0")
    assert res.returncode == 2
    assert (
        "Invalid combination of input arguments" in res.stdout and f"{STANDIN_MARK}: it answers" in res.stdout
    )


def test_a_missing_hardware_file_is_named(tmp_path: Path) -> None:
    folder = _sandbox(tmp_path)
    (folder / HARDWARE_FILE).unlink()
    res = _smi(folder, "-L")
    assert res.returncode == 9 and HARDWARE_FILE in res.stderr and "Traceback" not in res.stderr


def test_the_task_prolog_exports_path_and_the_sandbox_once(tmp_path: Path) -> None:
    folder = _sandbox(tmp_path)
    prolog = str(folder / "bin" / "task-prolog")
    out = subprocess.run(
        [prolog], capture_output=True, text=True, env={"PATH": "/usr/bin:/bin"}, timeout=30, check=True
    ).stdout
    assert out.splitlines() == [f"export PATH={folder}/bin:/usr/bin:/bin", f"export {SANDBOX_ENV}={folder}"]
    again = subprocess.run(
        [prolog], capture_output=True, text=True, env={"PATH": f"{folder}/bin:/bin"}, timeout=30, check=True
    ).stdout
    assert again.splitlines()[0] == f"export PATH={folder}/bin:/bin"


def test_a_runner_pointed_at_a_sandbox_puts_its_tools_first_on_srun_path(tmp_path: Path) -> None:
    folder = _sandbox(tmp_path)
    path = Runner(slurm_conf=str(folder / "slurm.conf")).environ()["PATH"].split(os.pathsep)
    assert path[0] == str(folder / "bin") and path.count(str(folder / "bin")) == 1
    other = tmp_path / "real"
    other.mkdir()
    (other / "slurm.conf").write_text("# a real cluster\n")
    assert str(other / "bin") not in Runner(slurm_conf=str(other / "slurm.conf")).environ()["PATH"]
