"""Clusters over SSH that the server's settings name (``c.SlurmlabServer.ssh_clusters``): listed in the picker's
answer with their link's state, and polled through a runner over that link, never through the local Slurm.

The link here goes to a loopback port where nothing listens (a real ssh, refused at once): no login node, no
sshd needed; where the master's being up matters, the link's ``connected`` (``ssh -O check``) answers as told.
The login itself (key, needs a login, a cut link) is in tests/browser/test_lab_remote_cluster.py and
tests/integration/ssh/test_remote_cluster_link.py, against the loopback sshd.

The picker's state is the link's own (:attr:`SshLink.state`), not read from the words of its message (which carry
the lease's after the state), and asking for it runs no ssh on the server's thread.
"""

from __future__ import annotations

import asyncio
import json
import shutil
import socket
import threading
import time
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pytest
from fake_slurm import cluster

from slurmlab.errors import NotYourJobError, SlurmlabError
from slurmlab.server.clusters import ClusterDirectory
from slurmlab.server.contract import ClusterView, LinkView
from slurmlab.server.data import ClusterSource
from slurmlab.server.remote import LOOK_EVERY, RemoteCluster, RemoteClusters, SshRunner, cluster_id
from slurmlab.slurm.ssh import SshTarget
from slurmlab.slurm.ssh.lease import lease_words
from slurmlab.testing import FakeRunner

pytestmark = pytest.mark.skipif(shutil.which("ssh") is None, reason="needs OpenSSH's ssh client")


def _closed_port() -> int:
    """A loopback port where nothing listens (bound, then released)."""
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


PORT = _closed_port()
URL = f"ssh://alice@127.0.0.1:{PORT}"
CID = f"ssh-alice@127.0.0.1-{PORT}"


@pytest.fixture
def remote() -> Iterator[RemoteCluster]:
    found = RemoteCluster(URL, config="/dev/null")
    yield found
    found.close()  # ends the link's reconnecting thread


def test_the_id_is_the_address_in_url_safe_characters() -> None:
    assert cluster_id(SshTarget.parse("ssh://alice@login.example")) == "ssh-alice@login.example"
    assert cluster_id(SshTarget.parse("ssh://login.example:2222")) == "ssh-login.example-2222"
    assert cluster_id(SshTarget.parse("ssh://bob@[::1]:22")) == "ssh-bob@__1-22"


def test_a_bad_address_in_the_settings_says_what_to_give() -> None:
    with pytest.raises(SlurmlabError) as err:
        RemoteClusters(["login.example"])
    assert "ssh://" in str(err.value) and "ssh://user@login.example" in (err.value.hint or "")


def test_its_commands_go_over_the_link_with_keys_only(remote: RemoteCluster) -> None:
    # a thread of the server polls it (one link object: one reconnect, one "down since")
    assert type(remote.runner) is SshRunner and remote.runner.ssh is remote.link
    argv = remote.link.command(["squeue", "--me"])
    assert argv[0] == "ssh" and "BatchMode=yes" in argv and "StrictHostKeyChecking=yes" in argv
    assert "StrictHostKeyChecking=accept-new" not in argv and "StrictHostKeyChecking=no" not in argv
    with pytest.raises(SlurmlabError):  # the server answers no prompt
        remote.link.ask("Password: ")


def test_a_link_never_up_says_connecting_since_when(remote: RemoteCluster) -> None:
    before = time.time()
    view = remote.view()
    assert view["id"] == CID and view["label"] == f"alice@127.0.0.1:{PORT}" and view["own"] is False
    link = view["link"]
    assert link["url"] == URL and link["state"] == "connecting"
    assert link["since"] is not None and before - 1 <= link["since"] <= time.time()
    assert URL in (link["message"] or "")
    # asked again, the same: "since" stays the first time it was found down
    again = remote.link_view()
    assert again["state"] == "connecting" and again["since"] == link["since"]
    json.dumps(view)  # the answer's JSON as it is


def _settles(remote: RemoteCluster, until: Callable[[LinkView], bool], timeout: float = 20.0) -> LinkView:
    """The picker's view once ``until`` holds (a bound that detects a hang: a look comes every LOOK_EVERY s)."""
    end = time.monotonic() + timeout
    view = remote.link_view()
    while not until(view):
        assert time.monotonic() < end, f"still {view} after {timeout} s"
        time.sleep(0.05)
        view = remote.link_view()
    return view


def _up(remote: RemoteCluster) -> None:
    """The link up as the server finds it: a master answers on the shared socket (a notebook's)."""
    remote.link.remote_user = (1234, "alice")  # learnt already: no command over the (fake) master
    remote.link.connected = lambda: True  # type: ignore[method-assign]
    _settles(remote, lambda view: view["state"] == "up")


def test_a_link_down_with_the_leases_words_is_still_reconnecting_not_needs_a_login(
    remote: RemoteCluster,
) -> None:
    _up(remote)
    lease = lease_words(["12"], time.time(), 1800)
    remote.link.lease_words = lambda: lease  # type: ignore[method-assign]  # a held allocation's lease
    remote.link.connected = lambda: False  # type: ignore[method-assign]  # the master died
    view = _settles(remote, lambda view: view["state"] != "up")
    # the link's words end with the lease's, after "; reconnecting": still the link trying again by itself
    assert view["state"] == "down" and view["since"] is not None, view
    assert view["message"] is not None and view["message"].endswith(f"; reconnecting; {lease}"), view


def test_the_picker_runs_no_ssh_on_the_servers_thread_and_looks_at_most_every_few_seconds(
    remote: RemoteCluster,
) -> None:
    _up(remote)
    looked: list[str] = []

    def check() -> bool:  # `ssh -O check`: the master is up; who asked is kept
        looked.append(threading.current_thread().name)
        return True

    remote.link.connected = check  # type: ignore[method-assign]
    start = time.monotonic()
    for _ in range(50):  # the sidebar's clusters answers and every route that names the cluster
        assert remote.view()["link"]["state"] == "up"
    _settles(remote, lambda view: bool(looked))  # asked on, it does look again (after LOOK_EVERY s)
    took = time.monotonic() - start
    assert threading.current_thread().name not in looked, looked
    assert set(looked) == {"slurmlab-ssh-look"} and len(looked) <= 1 + took // LOOK_EVERY, (looked, took)


def test_a_link_that_needs_a_login_is_up_once_a_notebook_logged_in_on_the_shared_socket(
    tmp_path: Path,
) -> None:
    ssh = tmp_path / "ssh"  # answers every call as a real ssh refused a login (tests/unit/ssh/data)
    ssh.write_text(
        "#!/bin/sh\necho 'alice@127.0.0.1: Permission denied (publickey,keyboard-interactive).' >&2\nexit 255\n"
    )
    ssh.chmod(0o755)
    remote = RemoteCluster(URL, config="/dev/null", ssh=str(ssh))
    try:
        view = _settles(remote, lambda view: view["state"] == "needs_login")
        assert f"%slurm use {URL}" in (view["message"] or "") and view["since"] is not None
        remote.link.remote_user = (1234, "alice")
        remote.link.connected = lambda: True  # type: ignore[method-assign]  # `%slurm use` in a notebook
        assert _settles(remote, lambda view: view["state"] == "up")["since"] is None
    finally:
        remote.close()


def test_the_directory_lists_them_after_the_own_cluster(remote: RemoteCluster) -> None:
    own = ClusterView(id="default", name=None, sandbox=None, label="x", conf=None, own=True)
    directory = ClusterDirectory(
        lambda: None, finder=lambda conf, base: [own], remote=lambda: [remote.view()]
    )
    views = directory.clusters()
    assert [v["id"] for v in views] == ["default", CID]
    assert directory.find(CID)["link"]["url"] == URL


def test_an_entry_may_name_the_slurm_conf_there() -> None:
    found = RemoteClusters([{"url": URL, "slurm_conf": "/etc/slurm-b/slurm.conf"}])
    assert found.runner(CID) is not None and found.runner(CID).slurm_conf == "/etc/slurm-b/slurm.conf"  # type: ignore[union-attr]
    assert found.runner("default") is None
    with pytest.raises(SlurmlabError) as err:
        RemoteClusters([{"host": "login.example"}])
    assert "slurm_conf" in (err.value.hint or "")


@pytest.fixture
def jp_server_config() -> dict[str, Any]:
    from traitlets.config import Config

    return Config(
        {
            "ServerApp": {"jpserver_extensions": {"slurmlab.server": True}},
            "SlurmlabServer": {"ssh_clusters": [URL, URL], "ssh_config": "/dev/null"},
        }
    )


async def test_the_server_lists_the_ssh_cluster_and_polls_it_over_the_link(
    fake_runner: FakeRunner, jp_fetch: Any, jp_serverapp: Any
) -> None:
    cluster(fake_runner)  # the server's own Slurm (recorded)
    try:
        answer = json.loads((await jp_fetch("slurmlab", "api", "clusters")).body)
        ids = [c["id"] for c in answer["clusters"]]
        assert ids == ["default", CID]  # the address given twice is listed once
        listed = answer["clusters"][1]
        assert listed["link"]["state"] in ("connecting", "down") and listed["link"]["url"] == URL
        assert "link" not in answer["clusters"][0]

        # its status comes over the link (down here), never from the recorded own Slurm
        deadline = time.monotonic() + 30
        while True:
            status = json.loads((await jp_fetch("slurmlab", "api", "status", params={"cluster": CID})).body)
            if status["error"] or time.monotonic() > deadline:
                break
            time.sleep(0.2)
        assert status["reachable"] is False and status["version"] is None
        assert f"the link to {URL} is down since" in status["error"]
        assert status["cluster"]["id"] == CID
    finally:
        jp_serverapp.web_app.settings["slurmlab_remote"].close()


def test_over_ssh_mine_is_the_logins_uid_there(
    remote: RemoteCluster, monkeypatch: pytest.MonkeyPatch
) -> None:
    source = ClusterSource(remote.runner, user="root")

    async def owner(job_id: str) -> int:
        return 1234  # squeue's uid of the job, on the cluster

    monkeypatch.setattr(source, "owner", owner)
    # not learnt yet: nobody's (this machine's uid would be another person's there)
    with pytest.raises(NotYourJobError):
        asyncio.run(source.check_mine("5"))
    remote.link.remote_user = (4321, "alice")
    with pytest.raises(NotYourJobError) as err:
        asyncio.run(source.check_mine("5"))
    assert "uid 1234" in err.value.message and URL in err.value.message
    remote.link.remote_user = (1234, "alice")
    asyncio.run(source.check_mine("5"))
    assert source.viewer() == (1234, "alice")  # whose jobs the polls call "mine"
