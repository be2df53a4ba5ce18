"""``%slurm use ssh://…``: a malformed address or a link that cannot be made is said in words, and the kernel
keeps the Slurm it used. The refused link is a real ``ssh`` to a loopback port where nothing listens."""

from __future__ import annotations

import shutil
import socket
from typing import Any

import pytest
from IPython.core.error import UsageError

from slurmlab.slurm.runner import Runner, get_runner, set_runner


@pytest.fixture
def shell(kept_shell: Any) -> Any:
    set_runner(Runner(slurm_conf="/nonexistent/slurm.conf"))  # put back by kept_shell
    return kept_shell


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


# ---- --lease: how long the link may stay down before the cluster releases this kernel's allocations ---------------


def _closed_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])  # closed again: nothing listens there


def test_the_help_names_the_lease_and_its_forms(shell: Any, capsys: pytest.CaptureFixture[str]) -> None:
    doc = shell.find_line_magic("slurm").__doc__
    assert "--lease DURATION" in doc and "2:00:00" in doc and "30 minutes" in doc
    assert shell.run_line_magic("slurm", "--help") is None
    out = " ".join(capsys.readouterr().out.split())
    assert "--lease DURATION" in out and "45 = minutes" in out and "default 30 minutes" in out


@pytest.mark.parametrize(
    ("value", "words"),
    [
        ("0", "a lease of no time ('0')"),
        ("0:00", "a lease of no time"),
        ("-5", "not a lease length: '-5'"),
        ("2h", "not a lease length: '2h'"),
        ("UNLIMITED", "a lease must run out"),
        ("400-00", "over 366 days"),
    ],
)
def test_a_bad_lease_is_one_line_before_any_login_and_nothing_changes(
    shell: Any, value: str, words: str
) -> None:
    # the port is closed: had the magic tried to log in first, it would say "nothing answered" instead
    with pytest.raises(UsageError) as caught:
        shell.run_line_magic("slurm", f"use ssh://alice@127.0.0.1:{_closed_port()} --lease {value}")
    said = str(caught.value)
    assert said.startswith("--lease: ") and words in said, said
    assert "salloc -t" in said and "\n" not in said and "nothing answered" not in said
    assert get_runner().ssh is None and get_runner().slurm_conf == "/nonexistent/slurm.conf"


@pytest.mark.parametrize(
    "line",
    ["use /etc/slurm/slurm.conf --lease 45", "--lease 45", "status --lease 45", "attach 12 --lease 45"],
)
def test_a_lease_without_an_ssh_address_says_where_it_goes(shell: Any, line: str) -> None:
    with pytest.raises(UsageError, match=r"--lease goes with %slurm use ssh://"):
        shell.run_line_magic("slurm", line)
    assert get_runner().ssh is None and get_runner().slurm_conf == "/nonexistent/slurm.conf"


@pytest.mark.skipif(shutil.which("ssh") is None, reason="needs OpenSSH's client (openssh-client)")
@pytest.mark.parametrize(
    ("words", "seconds", "shown"),
    [
        ("--lease 45", 2700.0, "lease 45 minutes"),
        ("--lease=2:00:00", 7200.0, "lease 2 hours"),
        ("/etc/slurm/slurm.conf --lease 1-0:30", 88200.0, "lease 1 day 30 minutes"),
        ("", 1800.0, "lease 30 minutes"),
    ],
)
def test_the_lease_reaches_the_link_and_slurm_says_it(
    shell: Any, monkeypatch: pytest.MonkeyPatch, words: str, seconds: float, shown: str
) -> None:
    from slurmlab.slurm.ssh import SshLink

    made: list[SshLink] = []

    def logged_in(link: SshLink, *, timeout: float = 120.0) -> None:
        made.append(
            link
        )  # no sshd here: the login itself is the loopback sshd's tests' (tests/integration/ssh)

    monkeypatch.setattr(SshLink, "connect", logged_in)
    url = f"ssh://alice@127.0.0.1:{_closed_port()}"
    try:
        said = str(shell.run_line_magic("slurm", f"use {url} {words}"))
        (link,) = made
        assert link.lease == seconds and get_runner().ssh is link
        assert link.settings()["lease"] == seconds  # what the kernel's guardian rebuilds the link with
        # what %slurm says about the cluster: where, and the lease (the controller does not answer: no master)
        assert f"over SSH: {url}; {shown}: if the link stays down that long" in said, said
        again = str(shell.run_line_magic("slurm", ""))
        assert f"over SSH: {url}; {shown}" in again
        assert "/etc/slurm/slurm.conf" not in words or get_runner().slurm_conf == "/etc/slurm/slurm.conf"
    finally:
        for link in made:
            link.disconnect()  # ends the reconnecting the failed ping started


# (`use --lease 45 ssh://…`, the option before the address, is refused the same way by Python 3.11's argparse
# but parsed by 3.13's, which takes positionals after options: not a case for one expected answer)
@pytest.mark.parametrize("line", ["use ssh://alice@login.example --lease 45 /etc/slurm/slurm.conf"])
def test_words_after_the_lease_are_said_to_go_before_it(shell: Any, line: str) -> None:
    with pytest.raises(UsageError, match=r"does not take .* there: put --lease and --python last"):
        shell.run_line_magic("slurm", line)
    assert get_runner().ssh is None
