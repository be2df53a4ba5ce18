"""The lease of allocations held over SSH (:mod:`slurmlab.slurm.ssh.lease`, :mod:`slurmlab.slurm.ssh.holder`)
without a server: its arithmetic, the panel's words, the renewal script run by a real ``sh`` on real files, and the
holder run as a real process on pipes. The whole over a real sshd and Slurm: tests/integration/ssh/
test_remote_guardian.py.
"""

from __future__ import annotations

import os
import stat
import subprocess
import sys
import time
from collections.abc import Sequence
from pathlib import Path

import pytest

from slurmlab.slurm.ssh import SshLink, SshTarget
from slurmlab.slurm.ssh.holder import lease_expired, session_gone
from slurmlab.slurm.ssh.lease import (
    DEFAULT_LEASE,
    LeaseKeeper,
    held_lease,
    holder_argv,
    lease_expiry,
    lease_words,
    parse_lease,
    renew_every,
)


@pytest.mark.parametrize(
    ("text", "seconds"),
    [
        ("45", 2700.0),
        ("90:30", 5430.0),
        ("2:00:00", 7200.0),
        ("1-00", 86400.0),
        ("1-0:30", 88200.0),
        (" 30 ", 1800.0),
    ],
)
def test_a_lease_length_is_read_as_slurm_reads_a_time_limit(text: str, seconds: float) -> None:
    assert parse_lease(text) == seconds  # a bare number is minutes, as for salloc -t


@pytest.mark.parametrize(
    ("text", "words"),
    [
        ("", "not a lease length"),
        ("2h", "not a lease length"),
        ("-5", "not a lease length"),
        ("1e9", "not a lease length"),
        ("45; rm -rf ~", "not a lease length"),
        ("0", "no time"),
        ("00:00:00", "no time"),
        ("UNLIMITED", "must run out"),
        ("400-00", "over 366 days"),
        ("9" * 12, "over 366 days"),
    ],
)
def test_a_bad_lease_length_is_said_with_the_forms_it_takes(text: str, words: str) -> None:
    with pytest.raises(ValueError, match="salloc -t") as caught:
        parse_lease(text)
    assert words in str(caught.value) and "2:00:00" in str(caught.value)
    assert "\n" not in str(caught.value)  # one line


def test_a_lease_is_renewed_four_times_within_it_and_at_least_every_minute() -> None:
    assert renew_every(DEFAULT_LEASE) == 60.0
    assert renew_every(12.0) == 3.0
    assert renew_every(0.4) == 0.5  # never a busy loop
    assert DEFAULT_LEASE >= 1800.0  # generous: a laptop's sleep or a train's tunnel releases nothing


def test_the_panel_says_when_the_cluster_releases_which_jobs() -> None:
    renewed = time.mktime((2026, 12, 5, 14, 2, 30, 0, 0, -1))
    assert lease_expiry(renewed, 1800.0) == renewed + 1800.0
    assert lease_words(["12"], renewed, 1800.0) == "if it stays down past 14:32 the cluster releases job 12"
    assert lease_words(["12", "13"], renewed, 7200.0) == (
        "if it stays down past 16:02 the cluster releases jobs 12, 13"
    )
    assert lease_words([], renewed, 1800.0) is None  # nothing held: nothing to say
    assert lease_words(["12"], None, 1800.0) is None  # never renewed: no time to give


def test_a_lease_runs_out_after_its_grace_or_when_its_file_is_gone() -> None:
    assert not lease_expired(0.0, 10.0) and not lease_expired(10.0, 10.0)
    assert lease_expired(10.5, 10.0)
    assert lease_expired(None, 10.0)


def test_the_holder_is_the_clusters_python_running_this_source_with_the_lease() -> None:
    argv = holder_argv("abc123", 7200.0)
    assert argv[:2] == ["python3", "-c"] and argv[3:] == ["~/.cache/slurmlab/leases", "abc123", "7200.0"]
    compile(argv[2], "holder", "exec")  # a whole program, stdlib only
    assert "slurmlab" not in [line.split()[1] for line in argv[2].splitlines() if line.startswith("import ")]


def test_a_link_carries_its_lease_to_the_guardians_copy() -> None:
    link = SshLink(SshTarget("login.example", "alice"), lease=7200.0)
    again = SshLink.from_settings(link.settings())
    assert again is not None and again.lease == 7200.0
    assert SshLink.from_settings({"url": "ssh://login.example", "lease": "soon"}).lease == DEFAULT_LEASE  # type: ignore[union-attr]


# ---- the renewal, by a real sh on real files ----------------------------------------------------------
def _sh_in(home: Path):  # type: ignore[no-untyped-def]
    def run(argv: Sequence[str]) -> subprocess.CompletedProcess[bytes]:
        return subprocess.run(
            list(argv), capture_output=True, env={**os.environ, "HOME": str(home)}, timeout=30
        )

    return run


def test_a_renewal_touches_the_leases_learns_their_jobs_and_forgets_ended_ones(tmp_path: Path) -> None:
    keeper = LeaseKeeper(600.0, _sh_in(tmp_path), background=False)  # this test renews by hand
    held, pending = keeper.new(), keeper.new()
    folder = tmp_path / ".cache" / "slurmlab" / "leases"
    folder.mkdir(parents=True)
    (folder / held).write_text("4242\n")  # the holder made it at the grant
    old = time.time() - 500
    os.utime(folder / held, (old, old))
    assert keeper.renew() and keeper.renewed_at is not None
    assert time.time() - (folder / held).stat().st_mtime < 5  # renewed
    assert not (folder / pending).exists()  # a lease whose job is not granted yet is not made by a renewal
    assert keeper.jobs() == ["4242"]
    assert keeper.words() is not None and "releases job 4242" in str(keeper.words())
    (folder / held).unlink()  # its holder ended with the job
    keeper.renew()
    assert keeper.jobs() == []
    (folder / pending).write_text("4243\n")
    keeper.renew()
    assert keeper.jobs() == ["4243"]  # the pending one was kept until its holder started


def test_a_renewal_the_link_did_not_carry_forgets_nothing(tmp_path: Path) -> None:
    keeper = LeaseKeeper(
        600.0, lambda argv: subprocess.CompletedProcess(list(argv), 255, b"", b""), background=False
    )
    keeper.new()
    assert not keeper.renew() and keeper.renewed_at is None


# ---- the holder, as a real process on pipes -----------------------------------------------------------
def test_session_gone_tells_a_pipe_whose_reader_closed() -> None:
    rfd, wfd = os.pipe()
    try:
        assert not session_gone(wfd)
        os.close(rfd)
        assert session_gone(wfd)
    finally:
        os.close(wfd)


def _holder(tmp_path: Path, grace: float, *, job: str = "77") -> subprocess.Popen[bytes]:
    bin_dir = tmp_path / "bin"
    bin_dir.mkdir(exist_ok=True)
    scancel = bin_dir / "scancel"  # records what the holder asked of Slurm (the real one: the sandbox test)
    scancel.write_text(f'#!/bin/sh\necho "$@" >> {tmp_path / "scancel.argv"}\n')
    scancel.chmod(scancel.stat().st_mode | stat.S_IXUSR)
    env = {
        **os.environ,
        "HOME": str(tmp_path),
        "SLURM_JOB_ID": job,
        "PATH": f"{bin_dir}:{os.environ['PATH']}",
    }
    argv = holder_argv("lease1", grace)
    return subprocess.Popen(
        [sys.executable, *argv[1:]],
        stdin=subprocess.PIPE,
        stderr=subprocess.PIPE,
        stdout=subprocess.DEVNULL,
        env=env,
    )


def _lease(tmp_path: Path) -> Path:
    return tmp_path / ".cache" / "slurmlab" / "leases" / "lease1"


def _wait_for(path: Path) -> None:
    end = time.monotonic() + 20
    while not path.exists():
        assert time.monotonic() < end, f"{path} never made"
        time.sleep(0.05)


def test_the_holder_lets_go_at_once_when_the_kernel_closes_its_pipe_over_a_working_link(
    tmp_path: Path,
) -> None:
    proc = _holder(tmp_path, 600.0)
    _wait_for(_lease(tmp_path))
    assert _lease(tmp_path).read_text() == "77\n"
    assert proc.stdin is not None
    proc.stdin.close()  # the kernel's release; the session (its stderr's reader) is still there
    assert proc.wait(timeout=20) == 0
    assert not _lease(tmp_path).exists() and not (tmp_path / "scancel.argv").exists()
    assert proc.stderr is not None
    proc.stderr.close()


def test_the_holder_holds_while_its_lease_is_young_then_cancels_its_own_job(tmp_path: Path) -> None:
    import pwd

    proc = _holder(tmp_path, 3.0)
    _wait_for(_lease(tmp_path))
    assert proc.stdin is not None and proc.stderr is not None
    proc.stderr.close()  # the session ends under it: the link dropped
    proc.stdin.close()
    gone = time.monotonic()
    for _ in range(4):  # the kernel renews it for a while (a link that came back)
        time.sleep(0.5)
        os.utime(_lease(tmp_path))
    renewed = time.monotonic()
    assert proc.poll() is None and not (tmp_path / "scancel.argv").exists()
    assert proc.wait(timeout=30) == 0
    assert time.monotonic() - renewed >= 3.0, "released before the lease ran out"
    assert time.monotonic() - gone >= 5.0
    me = pwd.getpwuid(os.getuid()).pw_name
    assert (tmp_path / "scancel.argv").read_text().split() == [f"--user={me}", "77"]
    assert not _lease(tmp_path).exists()


def test_the_holder_of_a_detached_job_ends_its_salloc_unreleased_and_cancels_nothing(tmp_path: Path) -> None:
    bin_dir = tmp_path / "bin"
    bin_dir.mkdir()
    (bin_dir / "scancel").write_text(f'#!/bin/sh\necho "$@" >> {tmp_path / "scancel.argv"}\n')
    (bin_dir / "scancel").chmod(0o755)
    env = {
        **os.environ,
        "HOME": str(tmp_path),
        "SLURM_JOB_ID": "78",
        "PATH": f"{bin_dir}:{os.environ['PATH']}",
    }
    argv = holder_argv("lease1", 600.0)
    # a stand-in for salloc: the holder's parent, which it must end with SIGKILL (no time to relinquish)
    salloc = subprocess.Popen(
        ["sh", "-c", '"$@"; echo "holder ended"', "salloc", sys.executable, *argv[1:]],
        stdin=subprocess.PIPE,
        stdout=subprocess.PIPE,
        env=env,
    )
    _wait_for(_lease(tmp_path))
    _lease(tmp_path).write_text("detached\n")  # the kernel's detach (LeaseKeeper.let_go)
    assert salloc.stdin is not None and salloc.stdout is not None
    salloc.stdin.close()  # then the kernel lets go of its pipe
    assert salloc.wait(timeout=20) == -9  # killed, before it could say anything of its own
    assert not (tmp_path / "scancel.argv").exists()
    end = time.monotonic() + 10
    while _lease(tmp_path).exists() and time.monotonic() < end:
        time.sleep(0.05)
    assert not _lease(tmp_path).exists()
    salloc.stdout.close()


def test_a_detach_tells_the_holder_through_its_lease_file(tmp_path: Path) -> None:
    keeper = LeaseKeeper(600.0, _sh_in(tmp_path), background=False)
    name = keeper.new()
    folder = tmp_path / ".cache" / "slurmlab" / "leases"
    folder.mkdir(parents=True)
    (folder / name).write_text("4242\n")
    keeper.renew()
    assert keeper.let_go(holder_argv(name, 600.0))
    assert (folder / name).read_text() == "detached\n"
    assert keeper.jobs() == []  # no longer renewed nor said on the panel
    assert keeper.let_go(["python3", "-c", "other"])  # not one of this link's: nothing to do


# ---- a job still pending when the link drops ----------------------------------------------------------
def test_the_wrapper_of_a_held_salloc_makes_its_lease_before_salloc_and_removes_it_if_no_job_was_named(
    tmp_path: Path,
) -> None:
    link = SshLink(SshTarget("login.example", "alice"))
    name = LeaseKeeper(600.0, _sh_in(tmp_path), background=False).new()
    # a stand-in for salloc: lists the leases as it starts, then ends without a grant (no holder ever ran)
    held = ["sh", "-c", 'ls -A "$HOME/.cache/slurmlab/leases"', "salloc", *holder_argv(name, 600.0)]
    assert held_lease(held) == name and held_lease(["sh", "-c", "true"]) is None
    command = link.command(held, pid_name="abc")
    remote = command[command.index("--") + 1 :]
    env = {"PATH": os.environ["PATH"], "HOME": str(tmp_path), "XDG_RUNTIME_DIR": str(tmp_path)}
    proc = subprocess.run(["/bin/sh", "-c", " ".join(remote)], capture_output=True, env=env, timeout=30)
    assert proc.returncode == 0, proc.stderr
    assert proc.stdout.decode().split() == [name]  # there before salloc started
    assert not (tmp_path / ".cache" / "slurmlab" / "leases" / name).exists()  # and gone after


def test_the_holder_of_a_job_granted_after_its_lease_ran_out_cancels_it_at_once(tmp_path: Path) -> None:
    lease = _lease(tmp_path)
    lease.parent.mkdir(parents=True)
    lease.write_text("")  # made as salloc started; not renewed since the link dropped while the job pended
    old = time.time() - 60
    os.utime(lease, (old, old))
    started = time.monotonic()
    proc = _holder(tmp_path, 30.0)  # the grant, with the session already gone
    assert proc.stdin is not None and proc.stderr is not None
    proc.stderr.close()
    proc.stdin.close()
    try:
        assert proc.wait(timeout=20) == 0
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.wait()
    assert time.monotonic() - started < 10, "held a lease's length past the grant"
    assert (tmp_path / "scancel.argv").read_text().split()[-1] == "77"
    assert not lease.exists()


def test_the_holder_keeps_the_date_of_a_lease_made_before_the_grant(tmp_path: Path) -> None:
    lease = _lease(tmp_path)
    lease.parent.mkdir(parents=True)
    lease.write_text("")
    old = time.time() - 5
    os.utime(lease, (old, old))
    proc = _holder(tmp_path, 600.0)
    try:
        end = time.monotonic() + 20
        while lease.read_text() != "77\n":
            assert time.monotonic() < end, "the holder never named its job"
            time.sleep(0.05)
        assert abs(lease.stat().st_mtime - old) < 0.01  # the grant renewed nothing
        assert proc.stdin is not None and proc.stderr is not None
        proc.stdin.close()  # a release over a working link
        assert proc.wait(timeout=20) == 0
        proc.stderr.close()
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.wait()
