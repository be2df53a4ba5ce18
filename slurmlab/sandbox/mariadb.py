"""The sandbox's own MariaDB, rendered (pure): where it keeps its files, its options file and its command lines.

It lives in ``<sandbox>/db`` (a 0700 folder: data, the socket, the pid file), listens on that Unix socket only
(``skip-networking``), and runs as the user who starts the sandbox (as root: ``--user=root``, which mariadbd
wants said explicitly). ``mariadb-install-db`` creates the account of that user with ``unix_socket``
authentication, so slurmdbd (running as the same user) connects without a password and nobody else can.
The system's ``/var/lib/mysql`` and its service are never touched: ``--no-defaults``/``--defaults-file``
keep the system's my.cnf out.
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

__all__ = [
    "APT_LINE",
    "MariaDbFiles",
    "create_database_argv",
    "install_argv",
    "render_options",
    "server_argv",
    "shutdown_argv",
]

APT_LINE = "sudo apt-get install slurmdbd mariadb-server"


@dataclass(frozen=True)
class MariaDbFiles:
    """The files of the MariaDB of the sandbox in ``directory``."""

    directory: Path

    @property
    def folder(self) -> Path:
        return self.directory / "db"

    @property
    def data(self) -> Path:
        return self.folder / "data"

    @property
    def socket(self) -> Path:
        return self.folder / "mysqld.sock"

    @property
    def options(self) -> Path:
        return self.folder / "my.cnf"

    @property
    def pid_file(self) -> Path:
        return self.folder / "mariadbd.pid"

    @property
    def log(self) -> Path:
        return self.directory / "log" / "mariadbd.log"


def render_options(files: MariaDbFiles) -> str:
    """The options file: private socket, no TCP, small memory (a sandbox holds a few thousand jobs at most)."""
    for path in (files.data, files.socket, files.pid_file, files.log):
        if any(c in str(path) for c in "\n#\"'"):
            raise ValueError(f"the path {str(path)!r} cannot be written into a MariaDB options file")
    return "\n".join(
        [
            "# slurmlab sandbox: a private MariaDB for slurmdbd (Unix socket only)",
            "[mariadbd]",
            f"datadir={files.data}",
            f"socket={files.socket}",
            f"pid-file={files.pid_file}",
            f"log-error={files.log}",
            "skip-networking",
            "skip-name-resolve",
            "innodb_buffer_pool_size=64M",
            # what slurmdbd asks for at start (it warns below these)
            "innodb_log_file_size=64M",
            "innodb_lock_wait_timeout=900",
            "max_allowed_packet=16M",
            "",
        ]
    )


def install_argv(exe: str, files: MariaDbFiles, user: str) -> list[str]:
    """``mariadb-install-db``: the system tables, with the account of ``user`` (and root) by Unix socket."""
    return [
        exe,
        "--no-defaults",
        f"--datadir={files.data}",
        f"--user={user}",
        "--skip-test-db",
        "--auth-root-authentication-method=socket",
    ]


def server_argv(exe: str, files: MariaDbFiles, *, as_root: bool) -> list[str]:
    """``mariadbd`` with the sandbox's options only (``--defaults-file`` must come first)."""
    return [exe, f"--defaults-file={files.options}", *(["--user=root"] if as_root else [])]


def create_database_argv(exe: str, files: MariaDbFiles, user: str, database: str) -> list[str]:
    """The ``mariadb`` client creating slurmdbd's database before slurmdbd connects.

    slurmdbd creates a missing database itself, but then connects again on the handle whose first connect
    failed; MariaDB's client library 3.4 (Debian 13 and later) keeps a zero column limit on such a handle, and
    every query fails ("Number of columns in result (=1) ... exceeds maximum allowed number of columns (=0)").
    """
    if not database.replace("_", "").isalnum():
        raise ValueError(f"database name {database!r} is not a plain identifier")
    return [
        exe,
        "--no-defaults",
        f"--socket={files.socket}",
        f"--user={user}",
        "--connect-timeout=5",
        "--execute",
        f"CREATE DATABASE IF NOT EXISTS `{database}`",
    ]


def shutdown_argv(exe: str, files: MariaDbFiles, user: str) -> list[str]:
    """``mariadb-admin shutdown`` over the private socket, as ``user`` (the socket authenticates the caller)."""
    return [
        exe,
        "--no-defaults",
        f"--socket={files.socket}",
        f"--user={user}",
        "--connect-timeout=5",
        "shutdown",
    ]
