"""What the sandbox's daemons listen on: loopback only, with accounting and without, read from the kernel's
socket tables for each daemon the sandbox recorded (munged, slurmctld, every slurmd, slurmdbd, mariadbd).

Slurm binds every address unless ``NoInAddrAny``/``NoCtldInAddrAny`` makes a daemon bind what the host name
resolves to; slurmdbd reads that from slurmdbd.conf, not slurm.conf, and ``DbdAddr`` alone left it on 0.0.0.0.
"""

from __future__ import annotations

import ipaddress
import json
import os
import shutil
import socket
import subprocess
import sys
import tempfile
from pathlib import Path

import pytest

from slurmlab.sandbox import Sandbox
from slurmlab.testing.sandbox_fixtures import SandboxFactory, accounting_missing_reason
from tests.integration.sandbox.listening import listening

REPO = Path(__file__).resolve().parents[3]

pytestmark = pytest.mark.sandbox

_NO_ACCOUNTING = accounting_missing_reason()


def _held(sb: Sandbox) -> dict[str, set[tuple[str, str, int]]]:
    return {name: listening(pid) for name, pid in sb.pids.items()}


def _check_loopback_only(sb: Sandbox, held: dict[str, set[tuple[str, str, int]]], accounting: bool) -> None:
    nodes = {f"slurmd:{n}" for n in sb.nodes}
    assert set(held) == {"munged", "slurmctld", *nodes, *(("slurmdbd", "mariadbd") if accounting else ())}
    # where slurm.conf tells every client to call slurmctld; the daemons bind by name only with NoInAddrAny
    conf = sb.conf_path.read_text().splitlines()
    called = next(line for line in conf if line.startswith("SlurmctldHost=")).split("(")[1].rstrip(")")
    if not any(line.startswith("CommunicationParameters=") and "NoInAddrAny" in line for line in conf):
        # a host name that resolves to no loopback address: every address, and the sandbox says so
        assert any("listen on every address" in note for note in sb.notes), sb.notes
        where = "0.0.0.0"
    else:
        assert ipaddress.ip_address(called).is_loopback, called
        where = called
    stray = {
        name: sorted(s for s in sockets if s[1] != where)
        for name, sockets in held.items()
        if any(s[1] != where for s in sockets)
    }
    assert not stray, f"listening beside {where}: {stray}"
    # each daemon with a port listens on it there (so that an empty reading cannot pass), munged and MariaDB on
    # their Unix sockets only
    assert {name: {s for s in held[name] if s[0] == "tcp"} for name in sb.ports} == {
        name: {("tcp", where, port)} for name, port in sb.ports.items()
    }
    assert held["munged"] == set() and held.get("mariadbd", set()) == set()


@pytest.mark.parametrize("accounting", [True, False], ids=["accounting", "no-accounting"])
def test_every_daemon_listens_on_loopback_only(sandbox_factory: SandboxFactory, accounting: bool) -> None:
    if accounting and _NO_ACCOUNTING:
        pytest.skip(_NO_ACCOUNTING)
    # the session's seed sandboxes with and without accounting (the accounting magics and the lab use them too)
    sb = sandbox_factory("seed", 2 if accounting else 1, accounting=accounting)
    _check_loopback_only(sb, _held(sb), accounting)


# up returns once sacctmgr could set the QOS limits on gres/gpu, which slurmctld registers with slurmdbd: by then
# sacctmgr, slurmctld, slurmd and slurmdbd have all reached each other on the address the files name
_IN_NAMESPACE = """
import json, sys
from slurmlab.sandbox import Sandbox
from tests.integration.sandbox.listening import listening
sb = Sandbox.up(profile="seed", nodes=1, directory=sys.argv[1], accounting=True)
try:
    print(json.dumps({"held": {name: sorted(listening(pid)) for name, pid in sb.pids.items()}}))
finally:
    sb.down()
"""


@pytest.mark.skipif(
    os.geteuid() != 0 or shutil.which("unshare") is None,
    reason="a private /etc/hosts needs root and unshare (util-linux)",
)
@pytest.mark.skipif(_NO_ACCOUNTING is not None, reason=_NO_ACCOUNTING or "")
def test_a_host_name_on_127_0_1_1_keeps_every_daemon_on_that_loopback_address() -> None:
    """Debian's usual /etc/hosts names the machine on 127.0.1.1: binding by name then binds 127.0.1.1, so the
    sandbox must name that address everywhere (it did not start: slurmctld listened where nobody called)."""
    host = socket.gethostname()
    base = Path(tempfile.mkdtemp(prefix="slsb-lo-", dir="/tmp"))
    base.chmod(0o711)
    hosts = base / "hosts"
    hosts.write_text(
        f"127.0.0.1\tlocalhost\n127.0.1.1\t{host} {host.split('.')[0]}\n::1\tlocalhost ip6-localhost\n"
    )
    folder = base / "sb"
    # a mount namespace of its own: the daemons started in it see this hosts file, nothing else on the machine does
    shell = 'mount --bind "$1" /etc/hosts && echo namespace-ready >&2 && exec "$2" -c "$3" "$4"'
    try:
        done = subprocess.run(
            [
                "unshare",
                "--mount",
                "--propagation",
                "private",
                "sh",
                "-c",
                shell,
                "sh",
                str(hosts),
                sys.executable,
                _IN_NAMESPACE,
                str(folder),
            ],
            capture_output=True,
            text=True,
            timeout=240,
            cwd=REPO,
            stdin=subprocess.DEVNULL,
        )
        if "namespace-ready" not in done.stderr:
            pytest.skip(f"no private mount namespace here: {done.stderr.strip()[-300:]}")
        assert done.returncode == 0, done.stderr[-3000:]
        held = {
            name: {tuple(s) for s in sockets} for name, sockets in json.loads(done.stdout)["held"].items()
        }
    finally:
        if (folder / "state.json").exists():
            Sandbox.find(folder).down()
        shutil.rmtree(base, ignore_errors=True)
    assert {s[1] for sockets in held.values() for s in sockets} == {"127.0.1.1"}, held
    assert {name for name, sockets in held.items() if sockets} == {"slurmctld", "slurmd:node1", "slurmdbd"}
