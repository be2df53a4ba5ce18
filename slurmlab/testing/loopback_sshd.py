"""A real OpenSSH server on 127.0.0.1 for a second Unix user, in front of a sandbox (tests of the SSH runner).

``sshd -D -f <own config>`` with its own host key, on a free loopback port, admitting one user
(``slurmlabssh<pid>``, one per test session so that two pytest workers never share one: made here with a home and
removed by :func:`remove_sshd`; one a crashed session left is removed by the next) by key and by keyboard-interactive
(PAM, with a password set here through chpasswd). A sandbox that admits that user (``Sandbox.admit``) is then the
same Slurm over the link as locally. Needs root (useradd, chpasswd, sshd's privilege separation).

The plugin's ``--over-ssh`` uses it to run the sandbox tests a second time through ``Runner(ssh=...)``
(see :mod:`slurmlab.testing.plugin`).
"""

from __future__ import annotations

import contextlib
import os
import pwd
import secrets
import shutil
import signal
import socket
import subprocess
import time
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from pathlib import Path

from slurmlab.sandbox import Sandbox
from slurmlab.slurm.runner import Runner
from slurmlab.slurm.ssh import SshLink, SshTarget

__all__ = [
    "SSH_USER",
    "LoopbackSshd",
    "SandboxOverSsh",
    "cut_link",
    "job_state",
    "leased_link",
    "over_ssh",
    "remove_sshd",
    "resume_sshd",
    "session_user",
    "ssh_missing_reason",
    "start_sshd",
    "stop_sshd",
    "wait_until",
]

SSH_USER = "slurmlabssh"
SSHD = "/usr/sbin/sshd"


def ssh_missing_reason() -> str | None:
    if os.geteuid() != 0:
        return "needs root (useradd, chpasswd, sshd)"
    if not os.access(SSHD, os.X_OK) or shutil.which("ssh") is None:
        return "needs openssh-server and openssh-client (scripts/setup-system.sh)"
    if shutil.which("useradd") is None or shutil.which("chpasswd") is None:
        return "needs useradd and chpasswd (passwd)"
    return None


@dataclass
class LoopbackSshd:
    """The running server: where it listens, its user's credentials and a known_hosts that knows it."""

    folder: Path
    port: int
    user: str
    password: str
    key: Path
    known_hosts: Path
    proc: subprocess.Popen[bytes]

    def link(self, *, ask: object = None, known_hosts: Path | None = None, key: bool = True) -> SshLink:
        """A link to this server that reads nothing of root's own ~/.ssh (config, keys, known_hosts)."""
        options = {
            "UserKnownHostsFile": str(known_hosts or self.known_hosts),
            "GlobalKnownHostsFile": "/dev/null",
            "IdentitiesOnly": "yes",
            "IdentityAgent": "none",
            # a private control folder per test session: links of different tests do not share a master
            "ControlPath": str(self.folder / "ctl"),
        }
        if key:
            options["IdentityFile"] = str(self.key)
        else:
            options["IdentityFile"] = "/dev/null"
            options["PubkeyAuthentication"] = "no"
        link = SshLink(SshTarget("127.0.0.1", self.user, self.port), options=options, config="/dev/null")
        if ask is not None:
            link.ask = ask  # type: ignore[assignment]
        return link

    def alive(self) -> bool:
        return self.proc.poll() is None

    def ssh_config(self, path: Path, host: str = "slurmlab-loopback") -> Path:
        """An ssh_config at ``path`` in which ``host`` is this server as its user, with this server's
        known_hosts and key (none of root's ~/.ssh): ``ssh -F path host``, or ``SLURMLAB_SSH_CONFIG=path`` and
        ``ssh://host`` for slurmlab's links."""
        path.write_text(
            "\n".join(
                [
                    f"Host {host}",
                    "  HostName 127.0.0.1",
                    f"  Port {self.port}",
                    f"  User {self.user}",
                    f"  IdentityFile {self.key}",
                    "  IdentitiesOnly yes",
                    "  IdentityAgent none",
                    f"  UserKnownHostsFile {self.known_hosts}",
                    "  GlobalKnownHostsFile /dev/null",
                    "",
                ]
            )
        )
        return path

    @contextlib.contextmanager
    def login_path(self, value: str) -> Iterator[None]:
        """The user's logins get ``PATH=value`` (its ~/.ssh/environment) while this lasts."""
        entry = pwd.getpwnam(self.user)
        env_file = Path(entry.pw_dir) / ".ssh" / "environment"
        env_file.write_text(f"PATH={value}\n")
        os.chown(env_file, entry.pw_uid, entry.pw_gid)
        env_file.chmod(0o600)
        try:
            yield
        finally:
            env_file.unlink(missing_ok=True)


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def _run(*argv: str, input: str | None = None) -> None:
    subprocess.run(argv, input=input, text=True, check=True, capture_output=True, timeout=60)


def session_user() -> str:
    """This process's test user: each session (a pytest worker) its own, so that one's end (userdel, its
    processes killed) or its authorized key never reaches another's."""
    return f"{SSH_USER}{os.getpid()}"


def _remove_user(user: str) -> None:
    _end_user_processes(user)
    subprocess.run(["userdel", "-r", user], capture_output=True, timeout=60)


def _remove_orphans() -> None:
    """Test users whose session died without removing them (their process is gone)."""
    for entry in pwd.getpwall():
        rest = entry.pw_name.removeprefix(SSH_USER)
        if rest != entry.pw_name and rest.isdigit() and not Path(f"/proc/{rest}").exists():
            _remove_user(entry.pw_name)


def _make_user(user: str, password: str, public_key: str) -> None:
    _remove_orphans()
    try:
        pwd.getpwnam(user)
    except KeyError:
        _run("useradd", "-m", "-s", "/bin/bash", user)
    _run("chpasswd", input=f"{user}:{password}\n")
    entry = pwd.getpwnam(user)
    ssh_dir = Path(entry.pw_dir) / ".ssh"
    ssh_dir.mkdir(mode=0o700, exist_ok=True)
    (ssh_dir / "authorized_keys").write_text(public_key)
    for path in (ssh_dir, ssh_dir / "authorized_keys"):
        os.chown(path, entry.pw_uid, entry.pw_gid)
    (ssh_dir / "authorized_keys").chmod(0o600)


def _config(folder: Path, port: int, user: str) -> Path:
    config = folder / "sshd_config"
    config.write_text(
        "\n".join(
            [
                f"Port {port}",
                "ListenAddress 127.0.0.1",
                f"HostKey {folder / 'host_ed25519'}",
                f"PidFile {folder / 'sshd.pid'}",
                "AuthorizedKeysFile .ssh/authorized_keys",
                "PubkeyAuthentication yes",
                "PasswordAuthentication no",
                "KbdInteractiveAuthentication yes",
                "UsePAM yes",
                "PermitRootLogin no",
                f"AllowUsers {user}",
                "X11Forwarding no",
                "AllowTcpForwarding no",
                "PrintMotd no",
                # the user's ~/.ssh/environment may set PATH only (LoopbackSshd.login_path): a site's shell setup,
                # such as a module that puts the GPU tools on the PATH, in one line
                "PermitUserEnvironment PATH",
                "LogLevel VERBOSE",
                "",
            ]
        )
    )
    return config


def _wait_listening(port: int, proc: subprocess.Popen[bytes], timeout: float = 20.0) -> None:
    end = time.monotonic() + timeout
    while time.monotonic() < end:
        if proc.poll() is not None:
            raise RuntimeError(f"sshd exited {proc.returncode}")
        with socket.socket() as s:
            if s.connect_ex(("127.0.0.1", port)) == 0:
                return
        time.sleep(0.05)
    raise RuntimeError(f"sshd did not listen on 127.0.0.1:{port} in {timeout} s")


def start_sshd(folder: Path, port: int | None = None) -> LoopbackSshd:
    """sshd on 127.0.0.1 with a new host key in ``folder`` (a key already there is kept)."""
    host_key = folder / "host_ed25519"
    if not host_key.exists():
        _run("ssh-keygen", "-q", "-t", "ed25519", "-N", "", "-f", str(host_key))
    user_key = folder / "user_ed25519"
    if not user_key.exists():
        _run("ssh-keygen", "-q", "-t", "ed25519", "-N", "", "-f", str(user_key))
    password = secrets.token_urlsafe(16)
    user = session_user()
    _make_user(user, password, (folder / "user_ed25519.pub").read_text())
    port = port or _free_port()
    Path("/run/sshd").mkdir(mode=0o755, exist_ok=True)  # sshd's privilege separation folder
    log = (folder / "sshd.log").open("ab")
    proc = subprocess.Popen(
        [SSHD, "-D", "-e", "-f", str(_config(folder, port, user))], stderr=log, stdout=log
    )
    _wait_listening(port, proc)
    known = folder / "known_hosts"
    known.write_text(f"[127.0.0.1]:{port} {(folder / 'host_ed25519.pub').read_text()}")
    return LoopbackSshd(folder, port, user, password, user_key, known, proc)


def resume_sshd(server: LoopbackSshd) -> None:
    """Start ``server`` again after :func:`stop_sshd`, as it was (its port, host key, user and password):
    a login node back from a reboot."""
    if server.proc.poll() is None:
        return
    log = (server.folder / "sshd.log").open("ab")
    server.proc = subprocess.Popen(
        [SSHD, "-D", "-e", "-f", str(server.folder / "sshd_config")], stderr=log, stdout=log
    )
    _wait_listening(server.port, server.proc)


def stop_sshd(server: LoopbackSshd) -> None:
    if server.proc.poll() is None:
        server.proc.terminate()
        server.proc.wait(timeout=10)


@contextlib.contextmanager
def cut_link(server: LoopbackSshd, link: SshLink, *, login_node_down: bool = True) -> Iterator[float]:
    """``link`` cut as a laptop loses it: its master connection killed without a goodbye (SIGKILL), after
    ``server`` was stopped (``login_node_down``: the login node reboots, so no reconnect can succeed inside the
    block); the server is back (:func:`resume_sshd`) when the block ends, however it ends. Yields when the cut
    was (``time.monotonic()``). The link must be up: a link with no master fails the test here."""
    master = link.master_pid()
    if master is None:
        raise AssertionError(f"no master connection of {link.target.url()} to cut")
    if login_node_down:
        stop_sshd(server)
    try:
        os.kill(master, signal.SIGKILL)
        yield time.monotonic()
    finally:
        if login_node_down:
            resume_sshd(server)


def _end_user_processes(user: str) -> None:
    """What the test user still runs (sessions sshd left, a remote command a cut link left running): userdel
    refuses a user with processes. Only that user's, each by its id."""
    listed = subprocess.run(["pgrep", "-u", user], capture_output=True, text=True, timeout=30).stdout
    for pid in listed.split():
        with contextlib.suppress(ProcessLookupError):
            os.kill(int(pid), signal.SIGKILL)


def remove_sshd(server: LoopbackSshd) -> None:
    """Stop the server, end what its user still runs and remove the user and the server's folder."""
    stop_sshd(server)
    _remove_user(server.user)
    shutil.rmtree(server.folder, ignore_errors=True)


class SandboxOverSsh:
    """A sandbox seen through the link: :meth:`runner` drives it over SSH as the link's user, so a test that
    takes its runner from the sandbox goes over the link; everything else (``admit``, ``conf_path``, ...) is the
    sandbox's own, run as its owner."""

    def __init__(self, sandbox: Sandbox, link: SshLink, remote_path: str) -> None:
        self.sandbox, self.link = sandbox, link
        # the sandbox's stand-in tools first, as the local runner has them (a step's nvidia-smi is looked up in
        # the PATH srun sends)
        self.path = f"{sandbox.directory / 'bin'}:{remote_path}"

    def runner(self, timeout: float = 30.0) -> Runner:
        return Runner(
            slurm_conf=str(self.sandbox.conf_path), timeout=timeout, ssh=self.link, env={"PATH": self.path}
        )

    def __getattr__(self, name: str) -> object:
        return getattr(self.sandbox, name)

    def __repr__(self) -> str:
        return f"{self.sandbox!r} over {self.link.target.url()}"


@contextlib.contextmanager
def over_ssh(sandbox: Sandbox, server: LoopbackSshd) -> Iterator[SandboxOverSsh]:
    """``sandbox`` seen through a connected link to ``server`` as its user, whom the sandbox admits while it
    lasts; that user's jobs are cancelled at the end."""
    sandbox.admit(*sandbox.admitted, server.user)
    link = server.link()
    link.connect()
    remote_path = Runner(slurm_conf=str(sandbox.conf_path), ssh=link).run(["printenv", "PATH"]).stdout.strip()
    try:
        yield SandboxOverSsh(sandbox, link, remote_path)
    finally:
        with contextlib.suppress(Exception):
            sandbox.runner().run(["scancel", "--user", server.user], check=False)
        link.disconnect()


# ---- what the lease tests share (a link down, a job held on the login node) -------------------------------------
def leased_link(server: LoopbackSshd, name: str, lease: float) -> SshLink:
    """A connected link with a master of its own (``name``: its control socket) and a short ``lease``."""
    link = server.link()
    link.options = {**link.options, "ControlPath": str(server.folder / name)}
    link.lease = lease
    link.connect()
    return link


def job_state(runner: Runner, job: str) -> str:
    """``job``'s state as squeue says it ("" once Slurm forgot it)."""
    return runner.run(["squeue", "-h", "-t", "all", "-j", job, "-o", "%T"], check=False).stdout.strip()


def wait_until(what: Callable[[], object], timeout: float) -> float:
    """Seconds until ``what()`` is true, asked every 0.2 s; AssertionError after ``timeout``."""
    start = time.monotonic()
    while time.monotonic() - start < timeout:
        if what():
            return time.monotonic() - start
        time.sleep(0.2)
    raise AssertionError(f"not within {timeout} s")
