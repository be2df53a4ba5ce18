"""How server and node agree on the kernel's connection: the file the node starts from, what it writes back."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

from slurmlab.provisioner import NodeStep, kernel_file, read_kernel_file, read_node_step

SENT = kernel_file(
    key="secret", signature_scheme="hmac-sha256", address="10.1.2.3", kernel_name="slurmlab-gpu"
)
PORTS = {
    "shell_port": 40001,
    "iopub_port": 40002,
    "stdin_port": 40003,
    "control_port": 40004,
    "hb_port": 40005,
}


def test_the_node_chooses_the_ports() -> None:
    assert SENT["ip"] == "10.1.2.3" and SENT["key"] == "secret" and SENT["transport"] == "tcp"
    assert all(SENT[name] == 0 for name in PORTS)


def test_only_the_ports_are_taken_from_what_the_node_wrote() -> None:
    written = {**SENT, **PORTS, "ip": "0.0.0.0", "key": "another", "signature_scheme": "hmac-md5"}
    info = read_kernel_file(json.dumps(written), SENT)
    assert info == {**SENT, **PORTS}


def test_a_file_not_yet_written_back_is_not_read() -> None:
    assert read_kernel_file("", SENT) is None
    assert read_kernel_file('{"shell_port": 4', SENT) is None  # half written
    assert read_kernel_file(json.dumps(SENT), SENT) is None  # ports still 0
    assert read_kernel_file(json.dumps({**SENT, **PORTS, "hb_port": True}), SENT) is None
    assert read_kernel_file(json.dumps({**SENT, **PORTS, "hb_port": 70000}), SENT) is None
    assert read_kernel_file("[1, 2]", SENT) is None


def test_the_launchers_note() -> None:
    note = read_node_step('{"job_id": "12", "step_id": "3", "node": "node1", "pid": 77}')
    assert note == NodeStep("12", "3", "node1", 77) and note.step == "12.3"
    assert read_node_step('{"job_id": "12", "step_id": "", "node": "node1", "pid": 77}') is None  # not a step
    assert read_node_step('{"job_id": "12; rm", "step_id": "3", "node": "n", "pid": 1}') is None
    assert read_node_step('{"job_id": "12"') is None


def test_the_launcher_notes_its_step_and_becomes_the_kernel(tmp_path: Path) -> None:
    """The launcher's note names the process that then runs the kernel's command (exec: the same pid)."""
    note = tmp_path / "step.json"
    env = {**os.environ, "SLURM_JOB_ID": "12", "SLURM_STEP_ID": "3", "SLURMD_NODENAME": "node1"}
    out = subprocess.run(
        [
            sys.executable,
            "-m",
            "slurmlab.provisioner.node",
            str(note),
            "--",
            sys.executable,
            "-c",
            "import os; print(os.getpid())",
        ],
        capture_output=True,
        text=True,
        env=env,
        check=True,
        timeout=60,
    )
    said = read_node_step(note.read_text())
    assert said == NodeStep("12", "3", "node1", int(out.stdout))
    assert note.stat().st_mode & 0o077 == 0


def test_the_launcher_without_a_command_says_how_to_call_it(tmp_path: Path) -> None:
    out = subprocess.run(
        [sys.executable, "-m", "slurmlab.provisioner.node", str(tmp_path / "n")],
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert out.returncode == 2 and "usage: python -m slurmlab.provisioner.node" in out.stderr
