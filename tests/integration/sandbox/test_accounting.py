"""Slurm accounting in a real sandbox: slurmdbd with its own MariaDB, sacct, QOS GPU limits, a clean down.

Real daemons only. Run on another Slurm with
``bash scripts/in-slurm-root.sh 24.11 python -m pytest -q -p no:cacheprovider tests/integration/sandbox/test_accounting.py``.
"""

from __future__ import annotations

import json
import os
import pwd
import re
import shutil
import signal
import subprocess
import tempfile
import time
from collections.abc import Callable, Iterator
from pathlib import Path

import pytest

from slurmlab.sandbox import Sandbox
from slurmlab.sandbox.processes import alive, cmdline
from slurmlab.testing.sandbox_fixtures import accounting_missing_reason
from tests.integration.sandbox.ordinary_user import TEST_USER, ordinary_user

REPO = Path(__file__).resolve().parents[3]


pytestmark = [
    pytest.mark.sandbox,
    pytest.mark.skipif(accounting_missing_reason() is not None, reason=accounting_missing_reason() or ""),
]


@pytest.fixture(scope="module")
def sandbox() -> Iterator[Sandbox]:
    base = Path(tempfile.mkdtemp(prefix="slsb-ac-", dir="/tmp"))
    base.chmod(0o711)  # an admitted user passes through on the way to the munge socket
    sb = Sandbox.up(profile="seed", nodes=2, directory=base / "sb", accounting=True)
    try:
        yield sb
    finally:
        if (base / "sb" / "state.json").exists():
            sb.down()
        shutil.rmtree(base, ignore_errors=True)


def slurm(sb: Sandbox, *argv: str, timeout: float = 30) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        list(argv), capture_output=True, text=True, timeout=timeout, env={**os.environ, **sb.env()}, cwd="/"
    )


def eventually(check: Callable[[], str | None], seconds: float = 30) -> str:
    """Poll ``check`` until it returns text; the last answer goes into the failure."""
    deadline = time.monotonic() + seconds
    last: str | None = None
    while time.monotonic() < deadline:
        last = check()
        if last:
            return last
        time.sleep(0.5)
    pytest.fail(f"not seen within {seconds:g} s (last answer: {last!r})")


def accounting_processes(folder: Path, pids: dict[str, int]) -> list[str]:
    """slurmdbd and mariadbd processes of the sandbox in ``folder``: by recorded pid or by a path of the folder."""
    found = []
    for entry in os.listdir("/proc"):
        if not entry.isdigit() or not alive(int(entry)):
            continue
        argv = cmdline(int(entry))
        name = os.path.basename(argv[0]) if argv else ""
        if name in ("slurmdbd", "mariadbd", "mysqld") and (
            int(entry) in pids.values() or any(str(folder) in a for a in argv)
        ):
            found.append(f"{entry} {' '.join(argv)}")
    return found


def test_the_sandbox_runs_slurmdbd_and_mariadb_and_says_so(sandbox: Sandbox) -> None:
    st = sandbox.status()
    assert st.running, str(st)
    assert {"slurmdbd", "mariadbd"} <= set(st.processes)
    assert re.search(
        r"on \(slurmdbd answers on port \d+; mariadbd answers on .*mysqld\.sock\)", st.accounting
    )
    assert "accounting     on" in str(st)
    conf = sandbox.conf_path.read_text()
    assert "AccountingStorageType=accounting_storage/slurmdbd" in conf
    assert f"AccountingStoragePort={sandbox.ports['slurmdbd']}" in conf
    dbd_conf = sandbox.directory / "slurmdbd.conf"
    assert dbd_conf.stat().st_mode & 0o777 == 0o600 and dbd_conf.stat().st_uid == os.geteuid()
    # the database answers on its socket only: mariadbd holds no TCP port of its own
    pid = sandbox.pids["mariadbd"]
    inodes = {os.readlink(f"/proc/{pid}/fd/{fd}") for fd in os.listdir(f"/proc/{pid}/fd")}
    tcp = {
        line.split()[9]
        for name in ("/proc/net/tcp", "/proc/net/tcp6")
        if Path(name).exists()
        for line in Path(name).read_text().splitlines()[1:]
        if line.split()[3] == "0A"
    }
    assert not {f"socket:[{i}]" for i in tcp} & inodes, "mariadbd listens on TCP"


def test_sacct_shows_a_completed_job_with_the_gpus_it_held(sandbox: Sandbox) -> None:
    job = slurm(sandbox, "sbatch", "--parsable", "--gres=gpu:2", "-t", "1", "--wrap", "true")
    assert job.returncode == 0, job.stderr
    jobid = job.stdout.strip().split(";")[0]

    def row() -> str | None:
        out = slurm(sandbox, "sacct", "-X", "-n", "-P", "-j", jobid, "-o", "JobID,State,AllocTRES").stdout
        return out if "COMPLETED" in out else None

    line = eventually(row).strip()
    got_id, state, tres = line.split("|")
    assert (got_id, state) == (jobid, "COMPLETED")
    assert "gres/gpu=2" in tres.split(","), tres

    # the plain listing (today's jobs) selects by eligible time, which slurmctld sends a moment after the end
    def listed() -> str | None:
        out = slurm(sandbox, "sacct", "-X", "-n", "-P", "-o", "JobID,State").stdout
        return out if f"{jobid}|COMPLETED" in out.split() else None

    eventually(listed)


def test_the_qos_carry_the_gpu_limit_and_the_short_debug_wall(sandbox: Sandbox) -> None:
    out = slurm(sandbox, "sacctmgr", "-n", "-P", "show", "qos", "format=Name,MaxTRESPU,MaxWall,Priority")
    assert out.returncode == 0, out.stderr
    rows = {r.split("|")[0]: r.split("|")[1:] for r in out.stdout.split()}
    assert rows["normal"][0] == "gres/gpu=4"
    assert rows["debug"][1] == "00:30:00" and int(rows["debug"][2]) > int(rows["normal"][2])
    user = pwd.getpwuid(os.geteuid()).pw_name
    assoc = slurm(sandbox, "sacctmgr", "-n", "-P", "show", "user", user, "format=User,DefaultAccount").stdout
    assert assoc.split() == [f"{user}|research"]
    share = slurm(sandbox, "sshare", "-n", "-P", "-A", "research", "-o", "Account,User")
    assert share.returncode == 0 and f"research|{user}" in share.stdout.replace(" ", ""), (
        share.stdout + share.stderr
    )
    tres = slurm(sandbox, "sacctmgr", "-n", "-P", "show", "tres", "format=Type,Name").stdout.split()
    assert "gres|gpu" in tres, tres
    if sandbox.version >= (23, 2):  # GPU memory and utilisation are accounted where Slurm has them
        assert {"gres|gpumem", "gres|gpuutil"} <= set(tres), tres


def _pending_reason(sb: Sandbox, *sbatch: str) -> str:
    job = slurm(sb, "sbatch", "--parsable", *sbatch, "--wrap", "sleep 5")
    assert job.returncode == 0, job.stderr
    jobid = job.stdout.strip().split(";")[0]
    try:

        def reason() -> str | None:
            out = slurm(sb, "squeue", "-h", "-j", jobid, "-o", "%T|%r").stdout.strip()
            return out if out.startswith("PENDING|") and "None" not in out and "Priority" not in out else None

        return eventually(reason)
    finally:
        slurm(sb, "scancel", jobid)


def test_a_job_over_the_qos_gpu_limit_pends_with_the_limit_named(sandbox: Sandbox) -> None:
    # 2 nodes x 3 GPUs = 6 GPUs, over normal's MaxTRESPerUser=gres/gpu=4 though the nodes have 8 free
    got = _pending_reason(sandbox, "-N2", "--gres=gpu:3", "-t", "1")
    assert re.fullmatch(r"PENDING\|QOSMaxG[Rr][Ee][Ss]PerUser(Limit)?", got), got


def test_the_gpu_cap_is_read_from_the_live_database_and_one_more_gpu_pends(sandbox: Sandbox) -> None:
    """slurmlab.teach.gpu_cap (what a lesson sizes its requests to): normal's MaxTRESPerUser, from sacctmgr; a job
    of the cap fits, one of a GPU more pends for that very limit."""
    from slurmlab.slurm.gpu_cap import gpu_cap

    cap = gpu_cap(sandbox.runner())
    assert (cap.account, cap.qos, cap.gpus) == ("research", "normal", 4), cap
    assert cap.allows(4) and not cap.allows(5) and "QOS normal MaxTRESPU" in str(cap)
    # the seed nodes have the GPUs free: only the cap holds the job
    got = _pending_reason(sandbox, "-N2", "--gpus=5", "-t", "1")
    assert re.fullmatch(r"PENDING\|QOSMaxG[Rr][Ee][Ss]PerUser(Limit)?", got), got


def test_a_debug_job_longer_than_its_wall_limit_pends_on_it(sandbox: Sandbox) -> None:
    got = _pending_reason(sandbox, "--qos=debug", "-t", "60")
    assert re.fullmatch(r"PENDING\|QOSMaxWallDurationPerJobLimit", got), got


@pytest.mark.skipif(os.geteuid() != 0, reason="needs root (useradd, runuser) to act as another user")
def test_a_user_admitted_later_gets_an_association_and_runs_jobs(sandbox: Sandbox) -> None:
    from slurmlab.testing.other_user import OTHER_USER, submit_as

    res = submit_as(
        sandbox, OTHER_USER, ["sbatch", "--parsable", "-o", "/dev/null", "-t", "1", "--wrap", "true"]
    )
    jobid = res.stdout.strip()

    def row() -> str | None:
        out = slurm(sandbox, "sacct", "-X", "-n", "-P", "-j", jobid, "-o", "JobID,State,User,Account").stdout
        return out if "COMPLETED" in out else None

    assert eventually(row).split() == [f"{jobid}|COMPLETED|{OTHER_USER}|research"]


def test_down_stops_slurmdbd_then_mariadb_and_leaves_nothing() -> None:
    base = Path(tempfile.mkdtemp(prefix="slsb-ad-", dir="/tmp"))
    folder = base / "sb"
    try:
        sb = Sandbox.up(profile="seed", nodes=1, directory=folder, accounting=True)
        assert len(accounting_processes(folder, sb.pids)) == 2
        # both die: status says so, restart brings the database and then slurmdbd back
        for name in ("slurmdbd", "mariadbd"):
            os.kill(sb.pids[name], signal.SIGKILL)
        eventually(lambda: "dead" if not any(alive(sb.pids[n]) for n in ("slurmdbd", "mariadbd")) else None)
        st = sb.status()
        assert set(st.dead) == {"slurmdbd", "mariadbd"} and "DOES NOT ANSWER" in st.accounting
        done = sb.restart()
        assert [line.split(":")[0] for line in done] == ["mariadbd", "slurmdbd"]
        assert sb.status().running and sb.status().accounting.startswith("on (slurmdbd answers")
        assert slurm(sb, "sacctmgr", "-n", "-P", "show", "qos", "format=Name").stdout.split() == [
            "normal",
            "debug",
        ]
        pids = sb.pids
        sb.down()
        assert accounting_processes(folder, pids) == []
        assert not [n for n, p in pids.items() if alive(p)]
        assert not (folder / "db" / "mysqld.sock").exists() or not _connects(folder / "db" / "mysqld.sock")
        # the database stays: a second up in the folder starts from it and still accounts
        again = Sandbox.up(profile="seed", nodes=1, directory=folder, accounting=True)
        assert again.status().accounting.startswith("on (slurmdbd answers")
        again.down()
        assert accounting_processes(folder, again.pids) == []
    finally:
        if (folder / "state.json").exists():
            Sandbox.find(folder).down()
        shutil.rmtree(base, ignore_errors=True)


def _connects(path: Path) -> bool:
    import socket

    with socket.socket(socket.AF_UNIX) as s:
        try:
            s.connect(str(path))
        except OSError:
            return False
    return True


@pytest.mark.skipif(
    os.geteuid() != 0 or shutil.which("runuser") is None, reason="needs root to act as another user"
)
def test_an_ordinary_user_runs_a_sandbox_with_accounting() -> None:
    who = ordinary_user("slsb-au-")
    user, base, as_user, run = pwd.getpwnam(TEST_USER), who.base, who.as_user, who.sandbox
    folder = base / "sb"
    state: dict[str, dict[str, int]] = {"pids": {}}
    try:
        up = subprocess.run(
            run + ["up", "--accounting", "--profile", "seed", "--nodes", "1", "--dir", str(folder)],
            capture_output=True,
            text=True,
            timeout=180,
            cwd="/",
        )
        assert up.returncode == 0, up.stdout + up.stderr
        assert "accounting: on" in up.stdout
        state = json.loads((folder / "state.json").read_text())
        for name in ("slurmdbd", "mariadbd"):
            assert os.stat(f"/proc/{state['pids'][name]}").st_uid == user.pw_uid, name
        env = ["env", f"SLURM_CONF={folder / 'slurm.conf'}"]
        job = subprocess.run(
            as_user
            + env
            + ["sbatch", "--parsable", "-o", "/dev/null", "--gres=gpu:1", "-t", "1", "--wrap", "true"],
            capture_output=True,
            text=True,
            timeout=60,
            cwd="/",
        )
        assert job.returncode == 0, job.stderr
        jobid = job.stdout.strip()

        def row() -> str | None:
            out = subprocess.run(
                as_user + env + ["sacct", "-X", "-n", "-P", "-j", jobid, "-o", "JobID,State,User"],
                capture_output=True,
                text=True,
                timeout=30,
                cwd="/",
            ).stdout
            return out if "COMPLETED" in out else None

        assert eventually(row).split() == [f"{jobid}|COMPLETED|{TEST_USER}"]
        down = subprocess.run(
            run + ["down", "--dir", str(folder)], capture_output=True, text=True, timeout=90, cwd="/"
        )
        assert down.returncode == 0, down.stdout + down.stderr
        assert accounting_processes(folder, state["pids"]) == []
        assert not [p for p in state["pids"].values() if alive(p)]
    finally:
        if (folder / "state.json").exists():
            subprocess.run(run + ["down", "--dir", str(folder)], capture_output=True, timeout=90, cwd="/")
        shutil.rmtree(base, ignore_errors=True)
