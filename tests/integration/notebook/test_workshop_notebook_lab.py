"""`make lab` for real (scripts/lab.py): a sandbox and JupyterLab on the workshop notebooks; a kernel of that
JupyterLab allocates on the sandbox at once; Ctrl-C stops the kernel (releasing its job), JupyterLab and the
sandbox, and leaves nothing running."""

from __future__ import annotations

import contextlib
import json
import os
import queue
import re
import shutil
import signal
import subprocess
import sys
import tempfile
import time
import urllib.request
from pathlib import Path

import pytest

from slurmlab.sandbox import processes
from slurmlab.testing.sandbox_fixtures import slurm_missing_reason

pytestmark = [pytest.mark.sandbox, pytest.mark.slow]

REPO = Path(__file__).resolve().parents[3]
SCRIPT = REPO / "scripts" / "lab.py"


def _read_until(proc: subprocess.Popen[str], pattern: str, seen: list[str], timeout: float) -> re.Match[str]:
    deadline = time.monotonic() + timeout
    assert proc.stdout is not None
    while time.monotonic() < deadline:
        line = proc.stdout.readline()
        if not line and proc.poll() is not None:
            break
        seen.append(line)
        found = re.search(pattern, line)
        if found:
            return found
    raise AssertionError(f"no {pattern!r} from make lab:\n{''.join(seen)}")


def test_make_lab_serves_the_notebooks_on_the_sandbox_and_ctrl_c_leaves_nothing(tmp_path: Path) -> None:
    if slurm_missing_reason():
        pytest.skip(slurm_missing_reason() or "")
    jupyter_client = pytest.importorskip("jupyter_client")
    short = Path(tempfile.mkdtemp(prefix="sllab-", dir="/tmp"))  # the munge socket path must stay short
    runtime = tmp_path / "runtime"
    env = {k: v for k, v in os.environ.items() if not k.startswith(("SLURMLAB_", "SLURM_"))}
    env.update(JUPYTER_RUNTIME_DIR=str(runtime), PYTHONUNBUFFERED="1")
    proc = subprocess.Popen(
        [sys.executable, str(SCRIPT), "--sandbox-dir", str(short / "sb"), "--dir", str(tmp_path / "lab")],
        stdout=subprocess.PIPE,
        stderr=subprocess.STDOUT,
        text=True,
        env=env,
    )
    seen: list[str] = []
    try:
        url = _read_until(proc, r"open JupyterLab: (http://127\.0\.0\.1:(\d+)/lab\?token=(\w+))", seen, 150)
        port, token = url.group(2), url.group(3)
        jupyter_pid = int(re.search(r"JupyterLab \(pid (\d+)\)", "".join(seen)).group(1))  # type: ignore[union-attr]
        sandbox_pids = list(json.loads((short / "sb" / "state.json").read_text())["pids"].values())
        assert sorted(p.name for p in (tmp_path / "lab").glob("*.ipynb")) == sorted(
            p.name for p in (REPO / "notebooks").glob("*.ipynb")
        )

        # the token is needed, and given; the server runs with the sandbox's SLURM_CONF
        api = f"http://127.0.0.1:{port}/api"
        with urllib.request.urlopen(f"{api}/status?token={token}", timeout=10) as answer:
            assert answer.status == 200
        with pytest.raises(urllib.error.HTTPError):
            urllib.request.urlopen(f"{api}/kernels", timeout=10)
        environ = Path(f"/proc/{jupyter_pid}/environ").read_bytes().split(b"\0")
        assert f"SLURM_CONF={short / 'sb' / 'slurm.conf'}".encode() in environ

        # a kernel of this JupyterLab allocates on the sandbox with no setup in the notebook
        request = urllib.request.Request(
            f"{api}/kernels?token={token}", data=b'{"name": "python3"}', method="POST"
        )
        with urllib.request.urlopen(request, timeout=30) as answer:
            kernel_id = json.loads(answer.read())["id"]
        client = jupyter_client.BlockingKernelClient(
            connection_file=str(runtime / f"kernel-{kernel_id}.json")
        )
        client.load_connection_file()
        client.start_channels()
        # (wait_for_ready gives up before a just-started kernel's first heartbeat: ask until it answers)
        deadline = time.monotonic() + 60
        while True:
            msg_id = client.kernel_info()
            with contextlib.suppress(queue.Empty):
                if client.get_shell_msg(timeout=2)["parent_header"].get("msg_id") == msg_id:
                    break
            assert time.monotonic() < deadline, "the kernel did not answer"
        out: list[str] = []
        client.execute_interactive(
            "%load_ext slurmlab\na = %salloc --gpus=1 -t 5\na.wait('RUNNING', timeout=60)\nprint('job', a.job_id)",
            timeout=90,
            output_hook=lambda msg: out.append(str(msg["content"].get("text", ""))),
        )
        client.stop_channels()
        job = re.search(r"job (\d+)", "".join(out))
        assert job, out
        kernel_pids = processes.children_of([jupyter_pid]) - {jupyter_pid}
        assert kernel_pids

        proc.send_signal(signal.SIGINT)  # the terminal's Ctrl-C
        rest, _ = proc.communicate(timeout=60)
    finally:
        if proc.poll() is None:  # a failed check: stop it the way a user would, then by force
            proc.send_signal(signal.SIGINT)
            try:
                proc.communicate(timeout=60)
            except subprocess.TimeoutExpired:
                proc.kill()
                proc.communicate(timeout=30)
            subprocess.run(
                [sys.executable, "-m", "slurmlab", "sandbox", "down", "--dir", str(short / "sb")],
                capture_output=True,
                timeout=60,
            )
    assert proc.returncode == 0, "".join(seen) + rest
    assert "Ctrl-C: stopping JupyterLab and the sandbox" in rest, rest
    assert "JupyterLab and the sandbox dgx-h100 stopped; nothing of this run is left running" in rest, rest
    alive = [p for p in [jupyter_pid, *kernel_pids, *sandbox_pids] if processes.alive(p)]
    assert alive == [], (alive, rest)
    assert not (short / "sb" / "state.json").exists()
    shutil.rmtree(short, ignore_errors=True)


def test_shutting_jupyterlab_down_from_the_browser_stops_the_sandbox_too(tmp_path: Path) -> None:
    if slurm_missing_reason():
        pytest.skip(slurm_missing_reason() or "")
    short = Path(tempfile.mkdtemp(prefix="sllab-", dir="/tmp"))
    env = {k: v for k, v in os.environ.items() if not k.startswith(("SLURMLAB_", "SLURM_"))}
    env.update(JUPYTER_RUNTIME_DIR=str(tmp_path / "runtime"), PYTHONUNBUFFERED="1")
    proc = subprocess.Popen(
        [sys.executable, str(SCRIPT), "--sandbox-dir", str(short / "sb"), "--dir", str(tmp_path / "lab")],
        stdout=subprocess.PIPE,
        stderr=subprocess.STDOUT,
        text=True,
        env=env,
    )
    seen: list[str] = []
    try:
        url = _read_until(proc, r"open JupyterLab: http://127\.0\.0\.1:(\d+)/lab\?token=(\w+)", seen, 150)
        sandbox_pids = list(json.loads((short / "sb" / "state.json").read_text())["pids"].values())
        # File > Shut Down in JupyterLab
        request = urllib.request.Request(
            f"http://127.0.0.1:{url.group(1)}/api/shutdown?token={url.group(2)}", data=b"", method="POST"
        )
        urllib.request.urlopen(request, timeout=10).close()
        rest, _ = proc.communicate(timeout=60)
    finally:
        if proc.poll() is None:
            proc.send_signal(signal.SIGINT)
            proc.communicate(timeout=60)
    assert proc.returncode == 0, "".join(seen) + rest
    assert "JupyterLab exited (0)" in rest and "nothing of this run is left running" in rest, rest
    assert [p for p in sandbox_pids if processes.alive(p)] == []
    shutil.rmtree(short, ignore_errors=True)
