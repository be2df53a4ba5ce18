"""Bringing sandboxes up and down for real: no process or port left, reuse, stale state, ports, other users."""

from __future__ import annotations

import json
import os
import pwd
import random
import re
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
from slurmlab.sandbox.processes import alive
from slurmlab.testing.sandbox_fixtures import slurm_missing_reason
from tests.integration.sandbox.ordinary_user import TEST_USER, ordinary_user

REPO = Path(__file__).resolve().parents[3]
pytestmark = [
    pytest.mark.sandbox,
    pytest.mark.skipif(slurm_missing_reason() is not None, reason=slurm_missing_reason() or ""),
]


@pytest.fixture
def folder() -> Iterator[Path]:
    path = Path(tempfile.mkdtemp(prefix="slsb-", dir="/tmp"))
    yield path / "sb"
    if (path / "sb" / "state.json").exists():
        Sandbox.find(path / "sb").down()
    shutil.rmtree(path, ignore_errors=True)


def cli(*args: str, check: bool = True) -> subprocess.CompletedProcess[str]:
    proc = subprocess.run(
        [sys.executable, "-m", "slurmlab", "sandbox", *args],
        capture_output=True,
        text=True,
        timeout=120,
        cwd=REPO,
    )
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


def _process_table() -> dict[int, tuple[int, str, list[str]]]:
    """pid -> (parent pid, start time, command line) of every live process, read from /proc alone."""
    table = {}
    for d in Path("/proc").iterdir():
        if not d.name.isdigit():
            continue
        try:
            stat = (d / "stat").read_text()
            argv = [a for a in (d / "cmdline").read_bytes().decode(errors="replace").split("\0") if a]
        except OSError:
            continue
        fields = stat[stat.rindex(")") + 2 :].split()
        if fields[0] not in ("Z", "X"):
            table[int(d.name)] = (int(fields[1]), fields[19], argv)
    return table


def _chain(table: dict[int, tuple[int, str, list[str]]], pid: int) -> list[int]:
    """``pid`` and its parents, up to (not including) pid 1."""
    out = []
    while pid in table and pid > 1 and pid not in out:
        out.append(pid)
        pid = table[pid][0]
    return out


def _sandbox_processes(roots: set[int], words: list[str]) -> dict[int, tuple[str, list[str]]]:
    """Every process of the sandbox, judged by parent chains and command lines only (not as processes.py does).

    A process belongs when a known root (a daemon, the test's srun) is in its parent chain, or when its command
    line holds one of ``words`` (the sandbox folder, markers of the test's jobs) — and then so does every parent
    in its chain up to pid 1, except this test's own: that is how a step daemon that left slurmd is caught.
    """
    table = _process_table()
    mine = set(_chain(table, os.getpid()))
    found: set[int] = set()
    for pid, (_, _, argv) in table.items():
        chain = _chain(table, pid)
        if pid in mine:
            continue
        if set(chain) & roots:
            found.add(pid)
        if any(w in arg for w in words for arg in argv):
            found.update(p for p in chain if p not in mine)
    return {p: (table[p][1], table[p][2]) for p in found}


def _is_sleep(line: str, mark: str) -> bool:
    """The sleep process itself (``sleep N`` or ``/usr/bin/sleep N``), not a command line naming it."""
    return re.fullmatch(rf"(?:\S*/)?sleep {mark}", line.strip()) is not None


def test_cli_up_then_down_leaves_no_process_and_no_port(folder: Path) -> None:
    out = cli("up", "--profile", "seed", "--nodes", "2", "--dir", str(folder)).stdout
    assert f"export SLURM_CONF={folder}/slurm.conf" in out
    slurmd = shutil.which("slurmd") or shutil.which("slurmd", path="/usr/sbin:/sbin") or "slurmd"
    release = subprocess.run([slurmd, "-V"], capture_output=True, text=True, timeout=10).stdout.split()[-1]
    assert f"Slurm {release})" in out, out  # the version it started, e.g. "Slurm 24.11.5"
    state = json.loads((folder / "state.json").read_text())
    # without a cgroup filesystem (e.g. SLURMLAB_ROOT_CGROUP=none in a Slurm root) 23.11+ needs cgroups disabled
    mounted = any(
        line.split()[1] == "/sys/fs/cgroup" for line in Path("/proc/self/mounts").read_text().splitlines()
    )
    if not mounted and tuple(state["version"]) >= (23, 11):
        assert (
            "CgroupPlugin=disabled" in (folder / "cgroup.conf").read_text() and "CgroupPlugin=disabled" in out
        )
    pids, ports = list(state["pids"].values()), list(state["ports"].values())
    # munged, slurmctld, two slurmd; and slurmdbd with its MariaDB where accounting is on (the default where
    # both are installed): `down` below must leave none of them
    assert len(pids) == 4 + (2 if state.get("accounting") else 0) and all(alive(p) for p in pids)
    assert all(connects(p) for p in ports) and set(ports) <= listening_ports()
    status = cli("status", "--dir", str(folder)).stdout
    assert "running" in status and f"Slurm {release}" in status
    env = cli("env", "--dir", str(folder)).stdout
    conf = state["conf_path"]
    assert env.strip() == f"export SLURM_CONF={conf}"
    # a running batch job, a running srun step and a pending job, each with a sleep of its own length so that
    # the scan can tell its processes from every other sandbox's on this machine
    marks = [str(random.randint(10**8, 10**9 - 1)) for _ in range(3)]
    slurm_env = {**os.environ, "SLURM_CONF": conf}
    for mark, extra in ((marks[0], []), (marks[2], ["--begin=now+3600"])):
        subprocess.run(
            ["sbatch", "--parsable", "-N1", "-o", "/dev/null", *extra, "--wrap", f"sleep {mark}"],
            capture_output=True,
            text=True,
            env=slurm_env,
            check=True,
            timeout=30,
            cwd="/tmp",
        )
    step = subprocess.Popen(
        ["srun", "-N1", "sleep", marks[1]],
        env=slurm_env,
        cwd="/tmp",
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
    )
    try:
        words = [str(folder), *(f"sleep {m}" for m in marks[:2]), *marks[:2]]
        before: dict[int, tuple[str, list[str]]] = {}
        for _ in range(100):
            before = _sandbox_processes(set(pids) | {step.pid}, words)
            lines = [" ".join(argv) for _, argv in before.values()]
            # the sleeps themselves (srun's own command line names the sleep before the step runs)
            if (
                all(any(_is_sleep(line, m) for line in lines) for m in marks[:2])
                and sum(1 for line in lines if line.startswith("slurmstepd")) >= 2
            ):
                break
            time.sleep(0.1)
        lines = [" ".join(argv) for _, argv in before.values()]
        assert all(any(_is_sleep(line, m) for line in lines) for m in marks[:2]), lines
        # the scan must have seen the step daemons, or it proves nothing about them
        assert sum(1 for line in lines if line.startswith("slurmstepd")) >= 2, lines
        cli("down", "--dir", str(folder))
        step.wait(timeout=30)
        after = _sandbox_processes(set(before) | {step.pid}, words)
        left = {p: argv for p, (start, argv) in before.items() if p in after and after[p][0] == start}
        new = {p: argv for p, (_, argv) in after.items() if p not in before}
        assert not left and not new, f"processes of the sandbox still running: {left} {new}"
    finally:
        if step.poll() is None:
            step.kill()
            step.wait()
    assert not [p for p in ports if connects(p)]
    assert not set(ports) & listening_ports()
    assert not (folder / "state.json").exists()
    status = cli("status", "--dir", str(folder), check=False)
    assert status.returncode == 1 and "no sandbox" in status.stdout


def test_second_up_reuses_the_running_sandbox(folder: Path) -> None:
    first = Sandbox.up(profile="seed", nodes=2, directory=folder, accounting=False)
    second = Sandbox.up(profile="seed", nodes=2, directory=folder, accounting=False)
    assert second.reused and not first.reused and second.pids == first.pids
    assert (
        "already running"
        in cli("up", "--profile", "seed", "--nodes", "2", "--dir", str(folder), "--no-accounting").stdout
    )
    with pytest.raises(SandboxError, match="already runs") as info:
        Sandbox.up(profile="seed", nodes=3, directory=folder, accounting=False)
    assert "sandbox down" in str(info.value)
    assert Sandbox.find(folder).status().running


def test_partly_running_sandbox_says_how_to_recover(folder: Path) -> None:
    sb = Sandbox.up(profile="seed", nodes=2, directory=folder, accounting=False)
    os.kill(sb.pids["slurmd:node2"], signal.SIGKILL)
    for _ in range(50):
        if not alive(sb.pids["slurmd:node2"]):
            break
        time.sleep(0.05)
    with pytest.raises(SandboxError, match="partly running") as info:
        Sandbox.up(profile="seed", nodes=2, directory=folder, accounting=False)
    assert "slurmd:node2 not running" in str(info.value) and f"sandbox restart --dir {folder}" in str(
        info.value
    )
    assert f"sandbox down --dir {folder}" in str(info.value)  # starting afresh stays possible
    sb.down()
    assert not any(alive(p) for p in sb.pids.values())


def test_stale_state_of_a_dead_sandbox_is_replaced(folder: Path) -> None:
    dead = subprocess.Popen(["true"])
    dead.wait()
    folder.mkdir(parents=True)
    (folder / "state.json").write_text(
        json.dumps(
            {
                "profile": "seed",
                "nodes": 2,
                "node_names": ["node1", "node2"],
                "conf_path": str(folder / "slurm.conf"),
                "version": [22, 5],
                "ports": {"slurmctld": 1},
                "pids": {"munged": dead.pid, "slurmctld": dead.pid},
            }
        )
    )
    sb = Sandbox.up(profile="seed", nodes=2, directory=folder, accounting=False)
    assert not sb.reused and sb.status().running


def test_a_taken_port_is_refused(folder: Path) -> None:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        s.listen()
        port = s.getsockname()[1]
        with pytest.raises(SandboxError, match=f"{port}.*already in use") as info:
            Sandbox.up(profile="seed", nodes=1, directory=folder, port=port, accounting=False)
        assert "--port" in str(info.value)
    assert not (folder / "state.json").exists()


@pytest.mark.skipif(
    os.geteuid() != 0 or shutil.which("runuser") is None, reason="needs root to act as another user"
)
def test_an_unprivileged_user_brings_a_sandbox_up_and_down() -> None:
    who = ordinary_user("slsb-u-")
    user, base, as_user, run = pwd.getpwnam(TEST_USER), who.base, who.as_user, who.sandbox
    folder = base / "sb"
    try:
        up = subprocess.run(
            run + ["up", "--profile", "seed", "--nodes", "2", "--dir", str(folder)],
            capture_output=True,
            text=True,
            timeout=120,
            cwd="/",
        )
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
        job = subprocess.run(
            as_user
            + ["env", f"SLURM_CONF={env['SLURM_CONF']}", "srun", "-N2", "--gpus-per-node=1", "id", "-un"],
            capture_output=True,
            text=True,
            timeout=60,
            cwd="/",
        )
        assert job.stdout.split() == [TEST_USER, TEST_USER], job.stderr
        down = subprocess.run(
            run + ["down", "--dir", str(folder)], capture_output=True, text=True, timeout=60, cwd="/"
        )
        assert down.returncode == 0, down.stderr
        assert not [p for p in state["pids"].values() if alive(p)]
        assert not [p for p in state["ports"].values() if connects(p)]
    finally:
        if (folder / "state.json").exists():
            subprocess.run(run + ["down", "--dir", str(folder)], capture_output=True, timeout=60, cwd="/")
        shutil.rmtree(base, ignore_errors=True)


def test_down_spares_a_shell_that_only_exported_slurm_conf(folder: Path) -> None:
    sb = Sandbox.up(profile="seed", nodes=1, directory=folder, accounting=False)
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
