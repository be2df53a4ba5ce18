"""The server's side of a cluster over SSH (:mod:`slurmlab.server.remote`) against the real loopback sshd: a key
login comes up by itself and learns whose jobs are "mine" there; a login that needs a person (no key: the
keyboard-interactive password) or an unknown host key shows "needs a login" and never prompts or accepts."""

from __future__ import annotations

import pwd
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from slurmlab.server.contract import LinkView
from slurmlab.server.remote import RemoteCluster

pytestmark = pytest.mark.sandbox  # the loopback sshd, as the other tests of this folder

WAIT_S = 30  # a generous bound that detects a hang: the loopback login takes well under a second


def _config(server: Any, path: Path, *, key: bool = True, known_hosts: Path | None = None) -> str:
    lines = [
        "Host 127.0.0.1",
        f"  UserKnownHostsFile {known_hosts or server.known_hosts}",
        "  GlobalKnownHostsFile /dev/null",
        "  IdentitiesOnly yes",
        "  IdentityAgent none",
        f"  IdentityFile {server.key}" if key else "  PubkeyAuthentication no",
    ]
    path.write_text("\n".join(lines) + "\n")
    return str(path)


@pytest.fixture
def make_cluster(loopback_sshd: Any) -> Iterator[Any]:
    made: list[RemoteCluster] = []

    def make(config: str) -> RemoteCluster:
        found = RemoteCluster(f"ssh://{loopback_sshd.user}@127.0.0.1:{loopback_sshd.port}", config=config)
        made.append(found)
        return found

    yield make
    for cluster in made:
        cluster.close()


def _settles(cluster: RemoteCluster, *states: str) -> LinkView:
    end = time.monotonic() + WAIT_S
    view = cluster.link_view()
    while view["state"] not in states and time.monotonic() < end:
        time.sleep(0.2)
        view = cluster.link_view()
    return view


def test_a_key_login_comes_up_and_learns_the_remote_user(
    loopback_sshd: Any, make_cluster: Any, tmp_path: Path
) -> None:
    cluster = make_cluster(_config(loopback_sshd, tmp_path / "ssh_config"))
    first = cluster.link_view()
    assert first["state"] == "connecting"
    view = _settles(cluster, "up")
    assert view == {"url": cluster.url, "state": "up", "since": None, "message": None}
    end = time.monotonic() + WAIT_S
    while cluster.link.remote_user is None and time.monotonic() < end:
        time.sleep(0.1)
    entry = pwd.getpwnam(loopback_sshd.user)
    assert cluster.link.remote_user == (entry.pw_uid, loopback_sshd.user)


def test_a_login_that_needs_a_password_says_so_without_asking(
    loopback_sshd: Any, make_cluster: Any, tmp_path: Path
) -> None:
    cluster = make_cluster(_config(loopback_sshd, tmp_path / "ssh_config", key=False))
    view = _settles(cluster, "needs_login")
    assert view["state"] == "needs_login" and view["since"] is not None
    assert f"connect it from a notebook with %slurm use {cluster.url}" in (view["message"] or "")
    assert not cluster.link.connected()


def test_an_unknown_host_key_is_refused_never_accepted(
    loopback_sshd: Any, make_cluster: Any, tmp_path: Path
) -> None:
    known = tmp_path / "known_hosts"
    known.write_text("")
    cluster = make_cluster(_config(loopback_sshd, tmp_path / "ssh_config", known_hosts=known))
    view = _settles(cluster, "needs_login")
    assert view["state"] == "needs_login"
    assert not cluster.link.connected()
    assert known.read_text() == ""  # not accepted silently (no accept-new)
