"""processes.find_related on real (fake-named) processes: step daemons found by the files they hold open."""

from __future__ import annotations

import contextlib
import os
import signal
import subprocess
import time
from collections.abc import Iterator
from pathlib import Path

import pytest

from slurmlab.sandbox.processes import alive, find_related, stop


def _detached(
    name: str,
    pidfile: Path,
    *,
    fd_file: Path | None = None,
    env: dict[str, str] | None = None,
    argument: str = "",
) -> int:
    """A process running as ``name`` that left its parent (as slurmstepd leaves slurmd), optionally holding
    ``fd_file`` open or with ``argument`` on its command line; its environment is exactly ``env``."""
    hold = f" 3>>{fd_file}" if fd_file else ""
    program = f'bash -c "sleep 60; :" {argument}' if argument else "sleep 60"
    script = f'echo $$ > {pidfile}; exec -a "{name}" {program}{hold}'
    subprocess.run(
        ["setsid", "-f", "bash", "-c", script],
        env={"PATH": os.environ["PATH"], **(env or {})},
        check=True,
        timeout=10,
    )
    for _ in range(100):
        if pidfile.exists() and pidfile.read_text().strip():
            pid = int(pidfile.read_text())
            if alive(pid) and Path(f"/proc/{pid}/cmdline").read_bytes().startswith(name.encode()):
                return pid
        time.sleep(0.02)
    raise AssertionError(f"{name} did not start")


@pytest.fixture
def started() -> Iterator[list[int]]:
    pids: list[int] = []
    yield pids
    for pid in pids:
        # each leads its own session and process group (setsid): its sleep goes too
        with contextlib.suppress(ProcessLookupError, PermissionError):
            os.killpg(pid, signal.SIGKILL)


def test_step_daemons_and_job_clients_are_found_by_what_they_are(tmp_path: Path, started: list[int]) -> None:
    ours, other = tmp_path / "sb", tmp_path / "sb2"  # sb2: a neighbour whose name starts like ours
    for d in (ours, other):
        (d / "log").mkdir(parents=True)
    conf = str(ours / "slurm.conf")
    stepd = _detached("slurmstepd: [1.batch]", tmp_path / "a", fd_file=ours / "log" / "slurmd-node1.log")
    neighbour = _detached("slurmstepd: [1.batch]", tmp_path / "b", fd_file=other / "log" / "slurmd-node1.log")
    client = _detached("srun", tmp_path / "c", env={"SLURM_CONF": conf})
    shell = _detached("bash", tmp_path / "d", env={"SLURM_CONF": conf})  # only exported SLURM_CONF
    orphan = _detached("/bin/sh", tmp_path / "e", argument=f"{ours}/spool/node1/job00001/slurm_script")
    started += [stepd, neighbour, client, shell, orphan]
    found = find_related([], conf, ours)
    assert {stepd, client, orphan} <= found
    assert neighbour not in found and shell not in found
    assert not stop(found & {stepd, client, orphan}, grace=1.0)
    assert alive(neighbour) and alive(shell)


def test_stop_escalates_to_kill_and_wakes_frozen_processes(tmp_path: Path, started: list[int]) -> None:
    deaf = subprocess.Popen(["bash", "-c", "trap '' TERM; exec sleep 60"])  # ignores SIGTERM, as slurmstepd
    frozen = _detached("frozen", tmp_path / "f")
    started += [deaf.pid, frozen]
    os.kill(frozen, signal.SIGSTOP)
    time.sleep(0.1)
    assert stop([deaf.pid, frozen], grace=0.5) == []
    assert deaf.poll() is not None and not alive(frozen)


def test_a_daemon_starts_in_its_own_session_logging_both_streams_and_holding_nothing_of_ours(
    tmp_path: Path, started: list[int]
) -> None:
    import warnings

    from slurmlab.sandbox.processes import spawn_daemon

    log = tmp_path / "daemon.out"
    log.write_text("earlier run\n")  # appended to, never truncated: a restart keeps the last one's words
    keep_r, keep_w = os.pipe()  # a descriptor this process got as inheritable (as make's jobserver pipe)
    os.set_inheritable(keep_w, True)
    try:
        with warnings.catch_warnings():
            warnings.simplefilter(
                "error"
            )  # a dropped Popen's "still running" ResourceWarning would fail here
            pid, code = spawn_daemon(
                "/bin/sh",
                ["sh", "-c", "echo out; echo err >&2; exec sleep 60"],
                log,
                {"PATH": os.environ["PATH"]},
            )
            started.append(pid)
            deadline = time.monotonic() + 10
            while (
                cmdline_of(pid)[:1] != ["sleep"] and time.monotonic() < deadline
            ):  # both lines written by then
                time.sleep(0.02)
        assert os.getsid(pid) == pid and code is None and alive(pid)
        assert log.read_text().splitlines() == ["earlier run", "out", "err"]
        assert not any(
            os.readlink(f"/proc/{pid}/fd/{fd}") == os.readlink(f"/proc/self/fd/{keep_w}")
            for fd in os.listdir(f"/proc/{pid}/fd")
        ), "the daemon holds our pipe open"
    finally:
        os.close(keep_r)
        with contextlib.suppress(OSError):
            os.close(keep_w)
    quick, code = spawn_daemon("/bin/sh", ["sh", "-c", "exit 3"], log, {}, settle=10)
    assert code == 3 and not alive(quick)
    # a daemon that ends later is collected by subprocess (at its next start of a process): no zombie stays
    os.kill(pid, signal.SIGTERM)
    deadline = time.monotonic() + 10
    while os.path.exists(f"/proc/{pid}") and time.monotonic() < deadline:
        subprocess.run(["true"], check=True)
        time.sleep(0.05)
    assert not os.path.exists(f"/proc/{pid}"), (
        f"{pid} is left as a zombie: {Path(f'/proc/{pid}/stat').read_text()}"
    )


def cmdline_of(pid: int) -> list[str]:
    from slurmlab.sandbox.processes import cmdline

    return cmdline(pid)
