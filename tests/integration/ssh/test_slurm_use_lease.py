"""``%slurm use ssh://… --lease DURATION`` for real: the lease the magic reads is the grace of the holder that the
login node runs for an allocation made after it, and ``%slurm`` says it.

The loopback sshd and its sandbox are the session fixtures of tests/integration/ssh/conftest.py. The magic takes
an address only, and ssh would read root's own ``~/.ssh`` for the rest: the link it makes is given the test
server's known_hosts and key, as a user's ``~/.ssh/config`` would give them (the login, the salloc over it and the
holder on the login node are real).
"""

from __future__ import annotations

import time
from collections.abc import Iterator
from typing import Any

import pytest

from slurmlab.slurm.allocation import Allocation
from slurmlab.slurm.runner import Runner, get_runner, set_runner
from slurmlab.slurm.ssh import SshLink
from slurmlab.testing.loopback_sshd import LoopbackSshd

pytestmark = pytest.mark.sandbox

# each of this login's lease holders (python3 -c SOURCE FOLDER NAME GRACE; salloc and the wrapper around it carry
# the same words after their own): its grace and what its lease file says. A holder is listed only once its file
# is there: it writes the file after its Python started (a CI run read a holder's /proc entry before), and one of
# an earlier test's allocations removes its own on the way out
_HOLDERS = (
    "import os\n"
    "for p in filter(str.isdigit, os.listdir('/proc')):\n"
    "    try:\n"
    "        if os.stat('/proc/' + p).st_uid != os.getuid(): continue\n"
    "        argv = open('/proc/' + p + '/cmdline', 'rb').read().split(b'\\0')[:-1]\n"
    "    except OSError: continue\n"
    "    if len(argv) == 6 and argv[1] == b'-c' and argv[3].endswith(b'slurmlab/leases'):\n"
    "        folder = os.path.expanduser(argv[-3].decode())\n"
    "        try: lease = open(os.path.join(folder, argv[-2].decode())).read().strip()\n"
    "        except OSError: continue\n"
    "        print(lease, argv[-1].decode())\n"
)


@pytest.fixture
def shell(loopback_sshd: LoopbackSshd, monkeypatch: pytest.MonkeyPatch) -> Iterator[Any]:
    from IPython.testing.globalipapp import get_ipython

    from slurmlab.magics.session import Session

    given = loopback_sshd.link()
    options = {**given.options, "ControlPath": str(loopback_sshd.folder / "use-lease")}

    def to(url: str, **kwargs: Any) -> SshLink:
        assert url == given.target.url()
        # the magic's config (SLURMLAB_SSH_CONFIG, unset here) gives way to this server's
        kwargs.pop("config", None)
        return SshLink(given.target, options=options, config=given.config, **kwargs)

    monkeypatch.setattr(SshLink, "to", staticmethod(to))
    ip = get_ipython()
    ip.run_line_magic("load_ext", "slurmlab.magics")
    old, _ = Session.of(ip), Session(ip)
    before = get_runner()
    try:
        yield ip
    finally:
        now = set_runner(before)
        if now.ssh is not None:
            now.ssh.disconnect()
        old.install(ip)
        ip.run_line_magic("unload_ext", "slurmlab.magics")


def test_the_lease_of_slurm_use_is_the_holders_grace_on_the_login_node(
    shell: Any, loopback_sshd: LoopbackSshd, ssh_sandbox: Any
) -> None:
    url = f"ssh://{loopback_sshd.user}@127.0.0.1:{loopback_sshd.port}"
    said = str(shell.run_line_magic("slurm", f"use {url} {ssh_sandbox.conf_path} --lease 1:30"))
    assert f"over SSH: {url} as {loopback_sshd.user}" in said and "lease 1 minute 30 seconds" in said, said
    runner: Runner = get_runner()
    assert runner.ssh is not None and runner.ssh.lease == 90.0
    alloc = Allocation.submit(["-N1", "-t", "5"], runner=runner, release_at_exit=True)
    try:
        alloc.wait("RUNNING", timeout=60)
        # a bound that catches a hang: salloc starts its command at the grant
        deadline = time.monotonic() + 20
        while True:
            said = runner.run(["python3", "-c", _HOLDERS]).stdout
            held = dict(line.split(" ", 1) for line in said.splitlines() if " " in line)
            if str(alloc.job_id) in held or time.monotonic() > deadline:
                break
            time.sleep(0.2)
        # its lease file names the job; its grace is the one the option gave
        assert held.get(str(alloc.job_id)) == "90.0", said
    finally:
        alloc.cancel()
