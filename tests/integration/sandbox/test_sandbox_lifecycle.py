"""Bringing sandboxes up and down for real: no process or port left, reuse, stale state, ports, other users."""

from __future__ import annotations

import json
import os
import pwd
import shutil
import signal
import socket
import subprocess
import sys
import tempfile
import time
from collections.abc import Iterator
from pathlib import Path

import pytest

from slurmlab.errors import SandboxError
from slurmlab.sandbox import Sandbox
from slurmlab.sandbox.processes import alive, find_related
from slurmlab.testing.sandbox_fixtures import slurm_missing_reason

REPO = Path(__file__).resolve().parents[3]
pytestmark = [pytest.mark.sandbox, pytest.mark.skipif(slurm_missing_reason() is not None,
                                                      reason=slurm_missing_reason() or "")]
TEST_USER = "slurmlabtest"


@pytest.fixture
def folder() -> Iterator[Path]:
    path = Path(tempfile.mkdtemp(prefix="slsb-", dir="/tmp"))
    yield path / "sb"
    if (path / "sb" / "state.json").exists():
        Sandbox.find(path / "sb").down()
    shutil.rmtree(path, ignore_errors=True)


def cli(*args: str, check: bool = True) -> subprocess.CompletedProcess[str]:
    proc = subprocess.run([sys.executable, "-m", "slurmlab", "sandbox", *args], capture_output=True, text=True,
                          timeout=120, cwd=REPO)
    if check:
        assert proc.returncode == 0, proc.stdout + proc.stderr
    return proc


def listening_ports() -> set[int]:
    """TCP ports in LISTEN state, from /proc/net/tcp and tcp6."""
    ports = set()
    for name in ("/proc/net/tcp", "/proc/net/tcp6"):
        try:
            lines = Path(name).read_text().splitlines()[1:]
        except OSError:
            continue
        for line in lines:
            fields = line.split()
            if fields[3] == "0A":
                ports.add(int(fields[1].rsplit(":", 1)[1], 16))
    return ports


def connects(port: int) -> bool:
    with socket.socket() as s:
        s.settimeout(0.5)
        return s.connect_ex(("127.0.0.1", port)) == 0


def test_cli_up_then_down_leaves_no_process_and_no_port(folder: Path) -> None:
    out = cli("up", "--profile", "seed", "--dir", str(folder)).stdout
    assert f"export SLURM_CONF={folder}/slurm.conf" in out
    state = json.loads((folder / "state.json").read_text())
    pids, ports = list(state["pids"].values()), list(state["ports"].values())
    assert len(pids) == 6 and all(alive(p) for p in pids)
    assert all(connects(p) for p in ports) and set(ports) <= listening_ports()
    # a running job leaves slurmstepd and task processes; down must stop those too
    conf = state["conf_path"]
    sub = subprocess.run(["sbatch", "--parsable", "-N2", "--wrap", "sleep 300"], capture_output=True, text=True,
                         env={**os.environ, "SLURM_CONF": conf}, check=True)
    assert sub.stdout.strip()
    steps: set[int] = set()
    for _ in range(50):
        steps = find_related(pids, conf)
        if any(b"sleep" in Path(f"/proc/{p}/cmdline").read_bytes() for p in steps if alive(p)):
            break
        time.sleep(0.1)
    assert steps, "the job's processes were not found"
    assert "running" in cli("status", "--dir", str(folder)).stdout
    env = cli("env", "--dir", str(folder)).stdout
    assert env.strip() == f"export SLURM_CONF={conf}"
    cli("down", "--dir", str(folder))
    left = [p for p in set(pids) | steps if alive(p)]
    assert not left, f"still running: {left}"
    # nothing anywhere still carries this sandbox's configuration (a slurmstepd double-forks away from
    # slurmd, so only a scan of every process finds one left behind)
    entry = f"SLURM_CONF={conf}".encode()
    carriers = []
    for d in Path("/proc").iterdir():
        if d.name.isdigit() and alive(int(d.name)):
            try:
                if entry in (d / "environ").read_bytes().split(b"\0"):
                    carriers.append(int(d.name))
            except OSError:
                continue
    assert not carriers, f"processes of the sandbox still running: {carriers}"
    assert not [p for p in ports if connects(p)]
    assert not set(ports) & listening_ports()
    assert not (folder / "state.json").exists()
    status = cli("status", "--dir", str(folder), check=False)
    assert status.returncode == 1 and "no sandbox" in status.stdout


def test_second_up_reuses_the_running_sandbox(folder: Path) -> None:
    first = Sandbox.up(profile="seed", nodes=2, directory=folder)
    second = Sandbox.up(profile="seed", nodes=2, directory=folder)
    assert second.reused and not first.reused and second.pids == first.pids
    assert "already running" in cli("up", "--profile", "seed", "--nodes", "2", "--dir", str(folder)).stdout
    with pytest.raises(SandboxError, match="already runs") as info:
        Sandbox.up(profile="seed", nodes=3, directory=folder)
    assert "sandbox down" in str(info.value)
    assert Sandbox.find(folder).status().running


def test_partly_running_sandbox_says_how_to_recover(folder: Path) -> None:
    sb = Sandbox.up(profile="seed", nodes=2, directory=folder)
    os.kill(sb.pids["slurmd:node2"], signal.SIGKILL)
    for _ in range(50):
        if not alive(sb.pids["slurmd:node2"]):
            break
        time.sleep(0.05)
    with pytest.raises(SandboxError, match="partly running") as info:
        Sandbox.up(profile="seed", nodes=2, directory=folder)
    assert "slurmd:node2 not running" in str(info.value) and f"sandbox restart --dir {folder}" in str(info.value)
    assert f"sandbox down --dir {folder}" in str(info.value)  # starting afresh stays possible
    sb.down()
    assert not any(alive(p) for p in sb.pids.values())


def test_stale_state_of_a_dead_sandbox_is_replaced(folder: Path) -> None:
    dead = subprocess.Popen(["true"])
    dead.wait()
    folder.mkdir(parents=True)
    (folder / "state.json").write_text(json.dumps({
        "profile": "seed", "nodes": 2, "node_names": ["node1", "node2"], "conf_path": str(folder / "slurm.conf"),
        "version": [22, 5], "ports": {"slurmctld": 1}, "pids": {"munged": dead.pid, "slurmctld": dead.pid}}))
    sb = Sandbox.up(profile="seed", nodes=2, directory=folder)
    assert not sb.reused and sb.status().running


def test_a_taken_port_is_refused(folder: Path) -> None:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        s.listen()
        port = s.getsockname()[1]
        with pytest.raises(SandboxError, match=f"{port}.*already in use") as info:
            Sandbox.up(profile="seed", nodes=1, directory=folder, port=port)
        assert "--port" in str(info.value)
    assert not (folder / "state.json").exists()


def _user_python(home: Path) -> list[str]:
    """A python the test user can run with slurmlab importable (the sandbox needs only the standard library).

    The checkout may sit where that user cannot read (a 0700 temporary folder, root's home): then the
    package is copied into ``home``, a folder the user owns, as a workshop user would have it installed."""
    probe = subprocess.run(["runuser", "-u", TEST_USER, "--", sys.executable, "-c", "import slurmlab"],
                           capture_output=True, cwd="/")
    if probe.returncode == 0:
        return [sys.executable]
    site = home / "site"
    shutil.copytree(REPO / "slurmlab", site / "slurmlab",
                    ignore=shutil.ignore_patterns("__pycache__", "labextension", "*.pyc"))
    return ["env", f"PYTHONPATH={site}", "/usr/bin/python3"]


@pytest.mark.skipif(os.geteuid() != 0 or shutil.which("runuser") is None, reason="needs root to act as another user")
def test_an_unprivileged_user_brings_a_sandbox_up_and_down() -> None:
    try:
        pwd.getpwnam(TEST_USER)
    except KeyError:
        subprocess.run(["useradd", "-m", TEST_USER], check=True)
    user = pwd.getpwnam(TEST_USER)
    base = Path(tempfile.mkdtemp(prefix="slsb-u-", dir="/tmp"))
    os.chown(base, user.pw_uid, user.pw_gid)
    folder = base / "sb"
    as_user = ["runuser", "-u", TEST_USER, "--"]
    run = as_user + _user_python(base) + ["-m", "slurmlab", "sandbox"]
    try:
        up = subprocess.run(run + ["up", "--profile", "seed", "--nodes", "2", "--dir", str(folder)],
                            capture_output=True, text=True, timeout=120, cwd="/")
        assert up.returncode == 0, up.stdout + up.stderr
        state = json.loads((folder / "state.json").read_text())
        assert state["user"] == TEST_USER
        for pid in state["pids"].values():
            assert os.stat(f"/proc/{pid}").st_uid == user.pw_uid
        key = folder / "munge" / "munge.key"
        assert key.stat().st_mode & 0o777 == 0o400 and key.stat().st_uid == user.pw_uid
        conf = (folder / "slurm.conf").read_text()
        assert f"SlurmUser={TEST_USER}" in conf and "File=/dev/tty" in (folder / "gres.conf").read_text()
        env = {"SLURM_CONF": str(folder / "slurm.conf")}
        job = subprocess.run(as_user + ["env", f"SLURM_CONF={env['SLURM_CONF']}", "srun", "-N2", "--gpus-per-node=1",
                                        "id", "-un"], capture_output=True, text=True, timeout=60, cwd="/")
        assert job.stdout.split() == [TEST_USER, TEST_USER], job.stderr
        down = subprocess.run(run + ["down", "--dir", str(folder)], capture_output=True, text=True, timeout=60,
                              cwd="/")
        assert down.returncode == 0, down.stderr
        assert not [p for p in state["pids"].values() if alive(p)]
        assert not [p for p in state["ports"].values() if connects(p)]
    finally:
        if (folder / "state.json").exists():
            subprocess.run(run + ["down", "--dir", str(folder)], capture_output=True, timeout=60, cwd="/")
        shutil.rmtree(base, ignore_errors=True)


def test_down_spares_a_shell_that_only_exported_slurm_conf(folder: Path) -> None:
    sb = Sandbox.up(profile="seed", nodes=1, directory=folder)
    bystander = subprocess.Popen(["sleep", "60"], env={**os.environ, **sb.env()})
    try:
        sb.down()
        assert bystander.poll() is None, "down killed a process that only had SLURM_CONF set"
    finally:
        bystander.kill()
        bystander.wait()


def test_factory_caches_one_sandbox_per_profile_with_its_own_folder_and_ports(sandbox_factory) -> None:
    seed = sandbox_factory("seed", nodes=1)
    assert sandbox_factory("seed", nodes=1) is seed
    dgx = sandbox_factory("dgx-h100")
    assert seed.directory != dgx.directory
    assert not set(seed.ports.values()) & set(dgx.ports.values())
    assert seed.status().running and dgx.status().running


def test_demo_runs_and_leaves_nothing(folder: Path) -> None:
    proc = subprocess.run([sys.executable, "-m", "slurmlab.demo", "--dir", str(folder)], capture_output=True,
                          text=True, timeout=300, cwd=REPO)
    assert proc.returncode == 0, proc.stdout + proc.stderr
    out = proc.stdout
    assert "Granted" not in out and "granted: job" in out
    assert len([line for line in out.splitlines() if "GRES=gpu:h100:" in line and "CPU_IDs=" in line]) == 2
    rows = [line.split() for line in out.splitlines() if line.strip()[:1].isdigit() and "node" in line]
    assert sorted(int(r[0]) for r in rows) == [0, 1, 2, 3]
    assert len({(r[1], r[3]) for r in rows}) == 4, "tasks did not get distinct GPUs"
    assert "nothing left running" in out
    assert not (folder / "state.json").exists()
