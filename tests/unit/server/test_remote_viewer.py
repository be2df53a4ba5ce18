"""Whose jobs are "mine" on a cluster the server reaches over SSH: the login's uid and name as that login node's own
``id`` prints them, asked once through the runner and kept on the link, never this machine's passwd (which may not
know the cluster's uid at all, or know another person by it).

Slurm's answers are the recorded 22.05 cluster (every job root's, uid 0); ``id`` printed ``0`` and ``root`` there.
This machine's passwd is made to know no uid (a laptop that has none of the cluster's users): on the code before,
the whole poll named the viewer by this machine's name of the uid (``"0"``) and listed none of the login's jobs
as mine. Nothing here connects: the link points at a loopback port where nothing listens, and the recorded
answers come from the FakeRunner.
"""

from __future__ import annotations

import asyncio
import json
import pwd
import socket
import subprocess
from collections.abc import Iterator
from pathlib import Path

import pytest
from fake_slurm import cluster

from slurmlab.server.data import WHO_ARGV, ClusterSource, login_from_id
from slurmlab.server.poller import ClusterPoller
from slurmlab.server.recent import RecentJobs
from slurmlab.server.worker import PollOutcome, PollWorker
from slurmlab.slurm.ssh import SshLink, SshTarget
from slurmlab.testing import FakeRunner, recorded

ROOT_ID = "\0" + "0\nroot\n"  # what WHO_ARGV prints for root: the NUL, then `id -u` and `id -un`
SACCT = recorded("22.05/sacct/a02_sacct_recent.txt").stdout


def _closed_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


@pytest.fixture
def no_local_users(monkeypatch: pytest.MonkeyPatch) -> None:
    """This machine's passwd has no entry for any uid (the cluster's users are not this laptop's)."""

    def unknown(uid: int) -> pwd.struct_passwd:
        raise KeyError(f"getpwuid(): uid not found: {uid}")

    monkeypatch.setattr(pwd, "getpwuid", unknown)


@pytest.fixture
def over_ssh(tmp_path: Path) -> Iterator[FakeRunner]:
    """The recorded cluster, as a runner whose Slurm is on a login node over SSH (its link never connects)."""
    fake = FakeRunner()
    folder = tmp_path / "private"
    folder.mkdir(mode=0o700)
    fake.ssh = SshLink(
        SshTarget("127.0.0.1", "alice", _closed_port()),
        options={"ControlPath": str(folder / "master")},
        config="/dev/null",
    )
    cluster(fake)
    try:
        yield fake
    finally:
        fake.ssh.disconnect()
        fake.close()


def _poll(source: ClusterSource, whole: bool = True) -> PollOutcome:
    return asyncio.run(source.poll(None, whole))


def _jobs(outcome: PollOutcome, key: str) -> list[dict[str, object]]:
    assert outcome.error_message is None, outcome.error_message
    jobs: list[dict[str, object]] = json.loads(outcome.answers[key].body)["jobs"]
    return jobs


@pytest.mark.usefixtures("no_local_users")
def test_the_whole_poll_calls_the_logins_jobs_mine_though_this_machine_knows_not_its_uid(
    over_ssh: FakeRunner,
) -> None:
    over_ssh.on(list(WHO_ARGV), stdout=ROOT_ID)
    source = ClusterSource(over_ssh, worker=PollWorker("thread"))
    outcome = _poll(source)
    every = _jobs(outcome, "queue:all")
    assert every and all(job["user"] == "root" for job in every)  # the recording: all root's
    assert [job["job_id"] for job in _jobs(outcome, "queue:mine")] == [job["job_id"] for job in every]
    assert all(job["mine"] for job in every)
    assert json.loads(outcome.answers["queue:mine"].body)["user"] == "root"
    assert over_ssh.ssh is not None and over_ssh.ssh.remote_user == (0, "root")
    assert source.user == "root"  # the status line and the job routes' answers name the login there

    # the own poll (squeue -u UID) asks for the login's uid there; `id` is asked once per link
    own = _poll(source, whole=False)
    assert [job["job_id"] for job in _jobs(own, "queue:mine")] == [job["job_id"] for job in every]
    assert len(over_ssh.called(list(WHO_ARGV))) == 1


def test_a_link_that_is_down_before_the_login_is_known_calls_nothing_mine(over_ssh: FakeRunner) -> None:
    # ssh's own words for a refused connection (recorded from a real ssh): the poll is an error answer saying so,
    # never a poll as this machine's uid, which on the cluster may be another person's
    refused = (Path(__file__).parents[1] / "ssh" / "data" / "connection-refused.stderr").read_text()
    over_ssh.on(list(WHO_ARGV), stderr=refused, returncode=255)
    outcome = _poll(ClusterSource(over_ssh, worker=PollWorker("thread")))
    assert outcome.answers == {} and outcome.error_status == 503
    assert "nothing answered at that address" in (outcome.error_message or "")
    assert not over_ssh.called(["squeue", ...])  # no listing was asked as anyone
    assert over_ssh.ssh is not None and over_ssh.ssh.remote_user is None  # asked again at the next poll


@pytest.mark.usefixtures("no_local_users")
def test_recent_jobs_over_ssh_are_the_logins_there(over_ssh: FakeRunner) -> None:
    over_ssh.on(list(WHO_ARGV), stdout=ROOT_ID)
    over_ssh.on(["sacct", ...], stdout=SACCT)
    recent = RecentJobs(ClusterPoller(ClusterSource(over_ssh, worker=PollWorker("thread"))))

    async def ask() -> dict[str, object]:
        entry = await recent.answer()
        return dict(entry.payload)

    answer = asyncio.run(ask())
    assert answer["user"] == "root" and answer["jobs"], answer
    (argv,) = over_ssh.called(["sacct", ...])
    assert argv[argv.index("-u") + 1] == "root"  # by the login's name there, not this machine's "0"


def test_the_logins_id_is_read_after_the_nul_and_nothing_else_is_taken() -> None:
    # a login script that prints a banner to every command: the real sh's output, the banner before the NUL
    chatty = subprocess.run(
        ["sh", "-c", 'echo "Welcome to login1: 12 alice"; ' + WHO_ARGV[2]],
        capture_output=True,
        text=True,
        check=True,
    ).stdout
    assert chatty.startswith("Welcome") and login_from_id(chatty) is not None
    assert login_from_id(chatty) == login_from_id("\0" + chatty.rpartition("\0")[2])
    assert login_from_id(ROOT_ID) == (0, "root")
    for unreadable in ("", "0\nroot\n", "\0root\n0\n", "\0" + "0\n", "\0" + "0 root extra\n", "\0-1\nroot\n"):
        assert login_from_id(unreadable) is None, unreadable
