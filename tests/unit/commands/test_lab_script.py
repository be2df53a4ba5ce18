"""`make lab` (scripts/lab.py) without starting anything: what it would run, where it listens, and its errors."""

from __future__ import annotations

import os
import re
import socket
import subprocess
import sys
from pathlib import Path

REPO = Path(__file__).resolve().parents[3]
SCRIPT = REPO / "scripts" / "lab.py"


def _dry_run(*args: str, **env: str) -> subprocess.CompletedProcess[str]:
    clean = {k: v for k, v in os.environ.items() if not k.startswith("SLURMLAB_")}
    return subprocess.run(
        [sys.executable, str(SCRIPT), "--dry-run", *args],
        capture_output=True,
        text=True,
        timeout=60,
        env={**clean, **env},
    )


def test_dry_run_says_what_it_would_start_on_localhost_by_default(tmp_path: Path) -> None:
    res = _dry_run("--sandbox-dir", str(tmp_path / "sb"), "--dir", str(tmp_path / "nb"))
    assert res.returncode == 0, res.stderr
    out = res.stdout
    assert f"copy the workshop notebooks to {tmp_path / 'nb'}" in out
    assert f"start the sandbox dgx-h100 in {tmp_path / 'sb'}" in out
    assert f"SLURM_CONF={tmp_path / 'sb' / 'slurm.conf'}" in out
    assert "--ServerApp.ip=127.0.0.1" in out and f"--ServerApp.root_dir={tmp_path / 'nb'}" in out
    assert re.search(r"http://127\.0\.0\.1:\d+/lab\?token=<token>", out)
    assert "on Ctrl-C: stop JupyterLab and its kernels, then the sandbox" in out
    assert not (tmp_path / "nb").exists() and not (tmp_path / "sb").exists()  # a dry run starts nothing


def test_the_environment_chooses_address_port_profile_and_folder(tmp_path: Path) -> None:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
    res = _dry_run(
        SLURMLAB_LAB_IP="127.0.0.2",
        SLURMLAB_LAB_PORT=str(port),
        SLURMLAB_PROFILE="h200-mig",
        SLURMLAB_LAB_DIR=str(tmp_path / "lab"),
        SLURMLAB_SANDBOX_DIR=str(tmp_path / "sb"),
    )
    assert res.returncode == 0, res.stderr
    assert f"--ServerApp.ip=127.0.0.2 --ServerApp.port={port} " in res.stdout
    assert f"http://127.0.0.2:{port}/lab?token=<token>" in res.stdout
    assert f"start the sandbox h200-mig in {tmp_path / 'sb'}" in res.stdout
    assert f"copy the workshop notebooks to {tmp_path / 'lab'}" in res.stdout


def test_a_port_in_use_is_refused_in_one_line_with_the_fix() -> None:
    with socket.socket() as busy:
        busy.bind(("127.0.0.1", 0))
        busy.listen()
        port = busy.getsockname()[1]
        res = _dry_run(SLURMLAB_LAB_PORT=str(port))
    assert res.returncode == 2
    assert f"make lab: port {port} on 127.0.0.1 is in use" in res.stderr
    assert "SLURMLAB_LAB_PORT=" in res.stderr and "Traceback" not in res.stderr


def test_an_unknown_profile_names_the_known_ones_before_anything_starts(tmp_path: Path) -> None:
    res = _dry_run("--dir", str(tmp_path / "nb"), SLURMLAB_PROFILE="h200_mig")
    assert res.returncode == 2 and "Traceback" not in res.stderr
    assert "make lab: unknown sandbox profile 'h200_mig'" in res.stderr and "h200-mig" in res.stderr


def test_the_makefile_runs_it_and_still_builds_the_lab_extension_in_setup() -> None:
    make = (REPO / "Makefile").read_text()
    assert re.search(r"^setup: .*\blabextension\b", make, re.M)
    assert re.search(r"^labextension: venv\n\t@bash scripts/build-labextension\.sh", make, re.M)
    assert re.search(r"^lab: setup\n\t@\$\(PY\) scripts/lab\.py", make, re.M)


def test_make_demo_ends_by_naming_make_lab_and_the_notebooks_command() -> None:
    from slurmlab.demo import NEXT_STEPS

    assert NEXT_STEPS.lstrip().startswith("next:\n  make lab ")
    assert "slurmlab notebooks DIR" in NEXT_STEPS and "Ctrl-C stops both" in NEXT_STEPS


def test_make_demos_next_lines_keep_the_sandbox_folder_and_profile_it_was_given(tmp_path: Path) -> None:
    import shlex

    from slurmlab.demo import next_steps

    folder = str(tmp_path / "my sandboxes" / "mig")
    text = next_steps("h200-mig", folder)
    lines = [line.strip() for line in text.splitlines()]
    for verb in ("up", "env", "down"):
        line = next(x for x in lines if f"slurmlab sandbox {verb}" in x)
        assert f"--dir {shlex.quote(folder)}" in line, line
    assert "--profile h200-mig" in next(x for x in lines if "slurmlab sandbox up" in x)
    assert f"`%slurm sandbox up --profile h200-mig --dir {shlex.quote(folder)}`" in text
    # the `make lab` line, run as printed (its variables), starts that sandbox in that folder
    lab = shlex.split(next(x for x in lines if "make lab" in x).split("make lab")[0])
    env = dict(assignment.split("=", 1) for assignment in lab)
    res = _dry_run("--dir", str(tmp_path / "nb"), **env)
    assert res.returncode == 0, res.stderr
    assert f"start the sandbox h200-mig in {folder} " in res.stdout
