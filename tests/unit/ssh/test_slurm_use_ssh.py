"""``%slurm use ssh://…``: a malformed address or a link that cannot be made is said in words, and the kernel
keeps the Slurm it used. The refused link is a real ``ssh`` to a loopback port where nothing listens."""

from __future__ import annotations

import shutil
import socket
from collections.abc import Iterator
from typing import Any

import pytest
from IPython.core.error import UsageError

from slurmlab.slurm.runner import Runner, get_runner, set_runner


@pytest.fixture
def shell() -> Iterator[Any]:
    from IPython.testing.globalipapp import get_ipython

    from slurmlab.magics.session import Session

    ip = get_ipython()
    ip.run_line_magic("load_ext", "slurmlab.magics")
    old, _ = Session.of(ip), Session(ip)
    before = set_runner(Runner(slurm_conf="/nonexistent/slurm.conf"))
    try:
        yield ip
    finally:
        set_runner(before)
        old.install(ip)
        ip.run_line_magic("unload_ext", "slurmlab.magics")


@pytest.mark.parametrize(
    ("address", "words"),
    [
        ("ssh://alice:hunter2@login.example", "must not hold a password"),
        ("ssh://alice@login.example:99999", "not a number from 1 to 65535"),
        ("ssh://-oProxyCommand=touch", "starting with '-'"),
    ],
)
def test_a_bad_address_is_said_and_nothing_changes(shell: Any, address: str, words: str) -> None:
    with pytest.raises(UsageError) as caught:
        shell.run_line_magic("slurm", f"use {address}")
    assert words in str(caught.value) and "hunter2" not in str(caught.value)
    assert get_runner().ssh is None and get_runner().slurm_conf == "/nonexistent/slurm.conf"


@pytest.mark.skipif(shutil.which("ssh") is None, reason="needs OpenSSH's client (openssh-client)")
def test_a_link_that_cannot_be_made_is_said_and_nothing_changes(shell: Any) -> None:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]  # closed again: nothing listens there
    with pytest.raises(UsageError) as caught:
        shell.run_line_magic("slurm", f"use ssh://nobody@127.0.0.1:{port}")
    said = str(caught.value)
    assert f"cannot use ssh://nobody@127.0.0.1:{port}" in said
    assert (
        "nothing answered at that address (Connection refused)" in said and "check the host and port" in said
    )
    assert get_runner().ssh is None
