"""One poll per host, for real (issue 27): ``slurmlab cluster-cache serve`` runs as root against the sandbox and
writes the shared files; two servers' pollers, each with its own runner, read them and send Slurm nothing."""

from __future__ import annotations

import asyncio
import json
import os
import pwd
import signal
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

import pytest
from server_jobs import ensure_other_user, scancel, submit, wait_for

from slurmlab.server.data import ClusterSource, current_user
from slurmlab.server.poller import ClusterPoller
from slurmlab.server.shared_poll import PUBLIC, user_file
from slurmlab.server.worker import PollWorker

pytestmark = [
    pytest.mark.sandbox,
    pytest.mark.skipif(os.geteuid() != 0, reason="the service runs as root, as a site runs it"),
]

EVERY = 1.0  # the service's interval here (a site's default is 30 s)


@pytest.fixture
def service(slurm_sandbox: Any, tmp_path: Path) -> Any:
    directory = tmp_path / "poll"
    env = {**os.environ, **slurm_sandbox.env()}
    argv = [sys.executable, "-m", "slurmlab", "cluster-cache", "serve", "--dir", str(directory)]
    proc = subprocess.Popen(
        [*argv, "--interval", str(EVERY)],
        env=env,
        stdout=subprocess.PIPE,
        stderr=subprocess.STDOUT,
        text=True,
    )
    try:
        yield directory, proc
    finally:
        proc.send_signal(signal.SIGTERM)
        try:
            proc.wait(20)
        except subprocess.TimeoutExpired:
            proc.kill()
            proc.wait(20)


def _jobs(poller: ClusterPoller, key: str) -> dict[str, bool]:
    entry = poller.cache.get(key)
    assert entry is not None, key
    return {j["job_id"]: j["mine"] for j in entry.payload["jobs"]}


async def test_two_servers_read_the_root_service_and_list_nothing_themselves(
    slurm_sandbox: Any, service: Any
) -> None:
    directory, proc = service
    other = ensure_other_user()
    mine = submit(slurm_sandbox, name="sharedpoll")
    theirs = submit(slurm_sandbox, name="sharedpoll", user=other)
    try:
        public = directory / PUBLIC
        theirs_file = directory / user_file(pwd.getpwnam(other).pw_uid)

        async def written_with_both() -> bool:
            listed = json.loads(public.read_text())["jobs"] if public.exists() else []
            return theirs_file.exists() and {mine, theirs} <= {j["job_id"] for j in listed}

        await wait_for(written_with_both, 60, "the service's first files")
        assert proc.poll() is None, proc.stdout.read() if proc.stdout else ""
        assert public.stat().st_uid == 0 and public.stat().st_mode & 0o777 == 0o644
        assert theirs_file.stat().st_uid == pwd.getpwnam(other).pw_uid
        assert theirs_file.stat().st_mode & 0o777 == 0o600  # no other user reads it

        runners = [slurm_sandbox.runner(), slurm_sandbox.runner()]
        pollers = [
            ClusterPoller(
                ClusterSource(r, user=current_user(), worker=PollWorker("thread"), shared=str(directory)),
                interval=EVERY,
                cluster_interval=EVERY,
            )
            for r in runners
        ]
        for p in pollers:
            await p.ensure_data(whole=True)
            await p.refresh(whole=False)
            assert p.failure is None
            assert _jobs(p, "queue:all")[mine] is True and _jobs(p, "queue:all")[theirs] is False
            assert mine in _jobs(p, "queue:mine") and theirs not in _jobs(p, "queue:mine")
            assert p.cache.get("nodes") is not None

        # the cluster changes: the servers learn it from the service, still without a command of their own
        scancel(slurm_sandbox, mine)

        async def gone_for_both() -> bool:
            for p in pollers:
                await p.refresh(whole=True)
            return all(mine not in _jobs(p, "queue:all") for p in pollers)

        deadline = time.monotonic() + 60
        while not await gone_for_both():
            assert time.monotonic() < deadline, "the cancelled job stayed in the shared poll"
            await asyncio.sleep(EVERY / 2)
        assert [r.calls for r in runners] == [0, 0]  # not one listing (nor any command) of their own
        assert all(p.source.shared_reads >= 3 for p in pollers)
    finally:
        scancel(slurm_sandbox, mine)
        scancel(slurm_sandbox, theirs)
