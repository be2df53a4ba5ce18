"""A sandbox is its owner's: other Unix users reach neither its munged nor its Slurm unless admitted.

Real users, real munged and Slurm: ``slurmlabtest`` is admitted, ``slurmlabother`` is not (both created here
when missing, as root)."""

from __future__ import annotations

import os
import shutil
import signal
import stat
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
from slurmlab.testing.other_user import ensure_user
from slurmlab.testing.sandbox_fixtures import slurm_missing_reason

REPO = Path(__file__).resolve().parents[3]
GUEST = "slurmlabtest"
OUTSIDER = "slurmlabother"
pytestmark = [
    pytest.mark.sandbox,
    pytest.mark.skipif(slurm_missing_reason() is not None, reason=slurm_missing_reason() or ""),
    pytest.mark.skipif(
        os.geteuid() != 0 or shutil.which("runuser") is None or shutil.which("useradd") is None,
        reason="needs root (useradd, runuser) to act as other Unix users",
    ),
    pytest.mark.skipif(shutil.which("munge") is None, reason="needs munge's client: apt-get install munge"),
]


@pytest.fixture(scope="module")
def sandbox() -> Iterator[Sandbox]:
    ensure_user(GUEST, home=True)
    ensure_user(OUTSIDER)
    base = Path(tempfile.mkdtemp(prefix="slsb-acc-", dir="/tmp"))
    base.chmod(0o755)  # others may pass on the way; the munge folder itself stays closed
    sb = Sandbox.up(profile="seed", nodes=1, directory=base / "sb", admit=[GUEST], accounting=False)
    try:
        yield sb
    finally:
        sb.down()
        shutil.rmtree(base, ignore_errors=True)


def as_user(user: str, sb: Sandbox, *argv: str, timeout: float = 60) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        ["runuser", "-u", user, "--", "env", f"SLURM_CONF={sb.conf_path}", *argv],
        capture_output=True,
        text=True,
        timeout=timeout,
        cwd="/",
    )


def munge_ok(user: str, sb: Sandbox) -> bool:
    proc = as_user(user, sb, "munge", "-n", "-S", str(sb.munge_socket), timeout=20)
    if proc.returncode != 0:
        assert "Permission denied" in proc.stderr, proc.stderr  # refused by the permissions, not broken
    return proc.returncode == 0


def squeue_ok(user: str, sb: Sandbox) -> bool:
    t0 = time.monotonic()
    proc = as_user(user, sb, "squeue", "-h", timeout=30)
    assert time.monotonic() - t0 < 20, "a refused user must not wait for a timeout"
    return proc.returncode == 0


def test_only_the_owner_and_an_admitted_user_reach_munge_and_slurm(sandbox: Sandbox) -> None:
    sock = sandbox.munge_socket
    for path in (sock, sock.parent):
        assert stat.S_IMODE(path.stat().st_mode) & 0o007 == 0, f"{path} is open to every user"
    assert (sock.parent / "munge.key").stat().st_mode & 0o777 == 0o400
    assert subprocess.run(["munge", "-n", "-S", str(sock)], capture_output=True).returncode == 0  # the owner
    assert munge_ok(GUEST, sandbox) and squeue_ok(GUEST, sandbox)
    job = as_user(GUEST, sandbox, "srun", "-N1", "-t", "1", "id", "-un")
    assert job.returncode == 0 and job.stdout.split() == [GUEST], job.stderr
    assert not munge_ok(OUTSIDER, sandbox)
    assert not squeue_ok(OUTSIDER, sandbox)
    sub = as_user(OUTSIDER, sandbox, "sbatch", "--wrap", "true", timeout=30)
    assert sub.returncode != 0 and "munge" in sub.stderr.lower()


def test_admission_follows_the_owner_and_survives_a_munged_restart(sandbox: Sandbox) -> None:
    try:
        # through the CLI, as a user would: up on the running sandbox replaces whom it admits
        up = subprocess.run(
            [
                sys.executable,
                "-m",
                "slurmlab",
                "sandbox",
                "up",
                "--profile",
                "seed",
                "--nodes",
                "1",
                "--dir",
                str(sandbox.directory),
                "--admit",
                OUTSIDER,
            ],
            capture_output=True,
            text=True,
            timeout=60,
            cwd=REPO,
        )
        assert up.returncode == 0, up.stdout + up.stderr
        assert "reusing it" in up.stdout and f"its owner, and {OUTSIDER}" in up.stdout
        assert munge_ok(OUTSIDER, sandbox) and not munge_ok(GUEST, sandbox)
        assert Sandbox.find(sandbox.directory).admitted == (OUTSIDER,)
        sandbox.admit()
        assert not munge_ok(OUTSIDER, sandbox) and not munge_ok(GUEST, sandbox)
        sandbox.admit(GUEST)
        # a restarted munged binds a new socket with mode 0777: restart closes it again
        pid = sandbox.pids["munged"]
        os.kill(pid, signal.SIGKILL)
        deadline = time.monotonic() + 10
        while alive(pid) and time.monotonic() < deadline:
            time.sleep(0.05)
        done = sandbox.restart()
        assert [line.split(":")[0] for line in done] == ["munged"]
        assert stat.S_IMODE(sandbox.munge_socket.stat().st_mode) & 0o007 == 0
        assert munge_ok(GUEST, sandbox) and not munge_ok(OUTSIDER, sandbox)
        assert squeue_ok(GUEST, sandbox)
    finally:
        sandbox.admit(GUEST)


def test_a_user_who_cannot_reach_the_folder_is_refused_before_anything_starts() -> None:
    base = Path(tempfile.mkdtemp(prefix="slsb-acc-", dir="/tmp"))  # 0700: no one else may enter
    try:
        with pytest.raises(SandboxError) as info:
            Sandbox.up(profile="seed", nodes=1, directory=base / "sb", admit=[GUEST], accounting=False)
        assert f"cannot admit {GUEST}" in str(info.value) and str(base) in str(info.value)
        assert f"chmod o+x {base}" in str(info.value)
        assert not (base / "sb" / "state.json").exists()
    finally:
        shutil.rmtree(base, ignore_errors=True)
