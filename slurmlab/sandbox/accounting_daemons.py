"""Accounting of a running sandbox (I/O): its MariaDB and slurmdbd started, set up, asked and stopped.

``Sandbox.up(accounting=True)`` calls :func:`prepare` before any daemon starts, :func:`start` after munged and
before slurmctld (the cluster must be in the database when slurmctld registers), and :func:`finish` once the
nodes are idle (the GPU limits need the TRES slurmctld registered). ``down`` stops slurmctld and slurmd first,
then slurmdbd, then MariaDB (:func:`stop_database`), then munged. Every wait is bounded and a failure names
the log to read.
"""

from __future__ import annotations

import contextlib
import os
import shutil
import subprocess
import time
from collections.abc import Callable, Mapping, Sequence
from pathlib import Path

from slurmlab.errors import SandboxError, SlurmError
from slurmlab.sandbox import accounting, mariadb, processes
from slurmlab.sandbox.daemons import accepts, log_tail, wait_for
from slurmlab.sandbox.mariadb import APT_LINE, MariaDbFiles
from slurmlab.sandbox.ports import LOOPBACK, is_listening
from slurmlab.slurm.identity import current_user
from slurmlab.slurm.runner import Runner

__all__ = [
    "ACCOUNTING_DAEMONS",
    "Programs",
    "add_users",
    "bring_up",
    "check_reuse",
    "describe",
    "finish",
    "prepare",
    "programs",
    "restart",
    "start",
    "stop_database",
]

ACCOUNTING_DAEMONS = ("slurmdbd", "mariadbd")
Programs = dict[str, str]
# starts daemon ``name`` from ``argv`` with extra environment and records its pid (Sandbox._start)
Start = Callable[[str, list[str], str, Mapping[str, str]], None]


def _find(name: str) -> str | None:
    return shutil.which(name) or shutil.which(name, path="/usr/sbin:/usr/local/sbin:/sbin:/usr/bin")


def programs() -> Programs:
    """The programs accounting needs, or SandboxError with the apt line when one is missing."""
    found: Programs = {"slurmdbd": "", "sacctmgr": ""}
    for name in found:
        path = _find(name)
        if path is None:
            raise SandboxError(
                f"{name} is not installed (the sandbox's accounting needs slurmdbd and MariaDB)",
                hint=f"install them: {APT_LINE}, or start without accounting (--no-accounting)",
            )
        found[name] = path
    # Debian ships the MariaDB names, with the MySQL ones as links in older releases
    for key, names in (
        ("mariadbd", ("mariadbd", "mysqld")),
        ("install", ("mariadb-install-db", "mysql_install_db")),
        ("admin", ("mariadb-admin", "mysqladmin")),
        ("client", ("mariadb", "mysql")),
    ):
        path = next((p for p in map(_find, names) if p), None)
        if path is None:
            raise SandboxError(
                f"MariaDB is not installed ({names[0]} missing; the sandbox's accounting needs it)",
                hint=f"install it: {APT_LINE}, or start without accounting (--no-accounting)",
            )
        found[key] = path
    return found


def unavailable() -> str | None:
    """Why accounting cannot start on this machine (a program missing, with the apt line), or None."""
    try:
        programs()
    except SandboxError as exc:
        return exc.message + (f"; {exc.hint}" if exc.hint else "")
    return None


def resolve(asked: bool | None) -> tuple[bool, dict[str, object]]:
    """(accounting on, what the sandbox's state records of it): None means on where it can start (without the
    GPU caps), True insists (SandboxError when it cannot, the site-like GPU caps on), False is off."""
    if asked is None:
        why = unavailable()
        return why is None, {"accounting_off": why, "gpu_caps": False}
    if asked:
        programs()  # fail before any daemon starts
    return asked, {"accounting_off": None if asked else "--no-accounting was given", "gpu_caps": asked}


def prepare(
    directory: Path, ctx: accounting.AccountingContext, progs: Programs, timeout: float = 60.0
) -> None:
    """slurmdbd.conf (0600: slurmdbd refuses others), the 0700 database folder, its options and system tables."""
    conf = directory / "slurmdbd.conf"
    with contextlib.suppress(FileNotFoundError):
        conf.unlink()  # recreated with its mode from the start: no moment readable by others
    fd = os.open(conf, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o600)
    with os.fdopen(fd, "w", encoding="utf-8") as fh:
        fh.write(accounting.render_slurmdbd_conf(ctx))
    files = MariaDbFiles(directory)
    files.folder.mkdir(mode=0o700, exist_ok=True)
    files.folder.chmod(0o700)
    files.options.write_text(mariadb.render_options(files), encoding="utf-8")
    if (files.data / "mysql").is_dir():
        return  # kept from an earlier start in this folder, with the jobs it accounted
    log = directory / "log" / "mariadb-install-db.out"
    argv = mariadb.install_argv(progs["install"], files, ctx.user)
    first_failure = ""
    for attempt in (1, 2):
        # once more after a failure: a fresh-clone CI run saw it exit 1 where a start by hand right after, in
        # another folder, succeeded (its log was gone with the run's temporary folder); a second failure says both
        try:
            with open(log, "wb") as out:
                proc = subprocess.run(
                    argv,
                    stdin=subprocess.DEVNULL,
                    stdout=out,
                    stderr=subprocess.STDOUT,
                    timeout=timeout,
                    check=False,
                    cwd=files.folder,
                )
        except subprocess.TimeoutExpired:
            raise SandboxError(
                f"mariadb-install-db did not finish within {timeout:g} s", hint=f"read {log}"
            ) from None
        if proc.returncode == 0:
            return
        shutil.rmtree(files.data, ignore_errors=True)  # half-made tables would be taken as ready next time
        if attempt == 1:
            first_failure = _tail(log, lines=40)
            shutil.copyfile(log, log.with_suffix(".first.out"))
    raise SandboxError(
        f"mariadb-install-db failed twice (exit code {proc.returncode})\n{_tail(log)}\n"
        f"the first time:\n{first_failure}",
        hint=f"read {log} and {log.with_suffix('.first.out')}",
    )


def _tail(path: Path, lines: int = 12) -> str:
    try:
        return "\n".join(path.read_text(errors="replace").splitlines()[-lines:])
    except OSError:
        return "(no log written)"


def start(
    directory: Path,
    state: Mapping[str, object],
    progs: Programs,
    run_start: Start,
    runner: Runner,
    guests: Sequence[str],
    timeout: float = 30.0,
) -> None:
    """MariaDB, then slurmdbd, then the cluster, accounts and users in the database (before slurmctld)."""
    files = MariaDbFiles(directory)
    if accepts(files.socket):
        raise SandboxError(
            f"a MariaDB already answers on {files.socket} (left by an earlier sandbox here?)",
            hint=f"stop it: {' '.join(mariadb.shutdown_argv(progs['admin'], files, current_user()))}",
        )
    _start_server(files, progs, state, run_start, timeout)
    _create_database(files, progs, str(state["user"]), directory / "log")
    _start_slurmdbd(files, progs, state, run_start, timeout)
    log_dir = directory / "log"
    cluster, user = str(state["cluster"]), str(state["user"])
    _sacctmgr(runner, progs, accounting.setup_before_ctld(cluster, user, guests), log_dir)


def _start_server(
    files: MariaDbFiles, progs: Programs, state: Mapping[str, object], run_start: Start, timeout: float
) -> None:
    run_start(
        progs["mariadbd"],
        mariadb.server_argv(progs["mariadbd"], files, as_root=os.geteuid() == 0),
        "mariadbd",
        {},
    )
    _wait_up(
        "mariadbd",
        state,
        lambda: accepts(files.socket),
        timeout,
        f"open its socket {files.socket}",
        files.log,
    )


def _start_slurmdbd(
    files: MariaDbFiles, progs: Programs, state: Mapping[str, object], run_start: Start, timeout: float
) -> None:
    port = int(str(_mapping(state["ports"])["slurmdbd"]))
    # which socket the MySQL client library uses for host "localhost"
    run_start(
        progs["slurmdbd"], [progs["slurmdbd"], "-D"], "slurmdbd", {"MYSQL_UNIX_PORT": str(files.socket)}
    )
    _wait_up(
        "slurmdbd",
        state,
        lambda: is_listening(port, _address(state)),
        timeout,
        f"listen on port {port}",
        files.directory / "log" / "slurmdbd.log",
    )


def restart(
    name: str, directory: Path, state: Mapping[str, object], run_start: Start, timeout: float = 30.0
) -> None:
    """Start the dead accounting daemon ``name`` again (``Sandbox.restart``): its database and jobs are kept."""
    starter = _start_server if name == "mariadbd" else _start_slurmdbd
    starter(MariaDbFiles(directory), programs(), state, run_start, timeout)


def check_reuse(state: Mapping[str, object], accounting: bool | None, folder: Path) -> None:
    """A running sandbox is reused only when it has accounting where accounting is asked for."""
    if accounting and not state.get("accounting"):
        raise SandboxError(
            f"the sandbox in {folder} runs without accounting",
            hint=f"stop it first: slurmlab sandbox down --dir {folder}",
        )


def _wait_up(
    name: str, state: Mapping[str, object], ready: Callable[[], bool], timeout: float, what: str, log: Path
) -> None:
    """Wait until daemon ``name`` is ``ready``; one that exits fails at once (a taken socket or port, a data
    folder locked by a stale server), one that hangs after ``timeout``: both with the end of its log."""
    pid = int(str(_mapping(state["pids"]).get(name, 0)))

    def failure() -> SandboxError:
        word = "stopped" if not processes.alive(pid) else f"did not {what} within {timeout:g} s"
        return SandboxError(
            f"the sandbox did not start: {name} {word}\n{log_tail(log.parent, name)}", hint=f"read {log}"
        )

    def check() -> bool:
        if ready():
            return True
        if not processes.alive(pid):
            raise failure()
        return False

    wait_for(check, timeout, failure)


def _create_database(files: MariaDbFiles, progs: Programs, user: str, log_dir: Path) -> None:
    argv = mariadb.create_database_argv(progs["client"], files, user, accounting.DATABASE)
    try:
        done = subprocess.run(
            argv, capture_output=True, text=True, timeout=30, check=False, stdin=subprocess.DEVNULL
        )
    except subprocess.TimeoutExpired:
        raise SandboxError(
            f"MariaDB did not answer on {files.socket} within 30 s", hint=f"read {files.log}"
        ) from None
    if done.returncode != 0:
        raise SandboxError(
            f"cannot create the accounting database: {(done.stdout + done.stderr).strip()}",
            hint=f"read {files.log} and {log_dir}",
        )


def _bind_address(state: Mapping[str, object]) -> str | None:
    """The loopback address the sandbox's daemons bind (None: every address); a state written before it was
    recorded had them bind 127.0.0.1."""
    value = state.get("bind_address", LOOPBACK)
    return None if value is None else str(value)


def _address(state: Mapping[str, object]) -> str:
    """Where slurmdbd answers."""
    return _bind_address(state) or LOOPBACK


def _mapping(value: object) -> Mapping[str, object]:
    if not isinstance(value, Mapping):
        raise SandboxError(
            "the sandbox's state.json is damaged (ports)", hint="start afresh: slurmlab sandbox down"
        )
    return value


def finish(directory: Path, state: Mapping[str, object], runner: Runner, timeout: float = 30.0) -> None:
    """The QOS settings (with the GPU caps where ``state`` asks), once slurmctld has registered the gres/gpu TRES
    with slurmdbd."""
    progs = programs()
    commands = accounting.setup_after_ctld(gpu_caps=bool(state.get("gpu_caps", True)))
    deadline = time.monotonic() + timeout
    while True:
        try:
            _sacctmgr(runner, progs, commands, directory / "log")
            return
        except SandboxError:
            # slurmctld registers its TRES a moment after it answers: "Unknown TRES" until then
            if time.monotonic() > deadline:
                raise
            time.sleep(0.5)


def add_users(directory: Path, cluster: str, users: Sequence[str], runner: Runner) -> None:
    """Make ``users`` (admitted to a running sandbox) users of its accounts, like its owner."""
    _sacctmgr(
        runner,
        {"sacctmgr": _find("sacctmgr") or "sacctmgr"},
        accounting.users_to_add(cluster, users),
        directory / "log",
    )


# what sacctmgr says (22.05; 24.11 on) when a second up in the same folder adds what the database holds
_ALREADY = (
    "nothing new added",
    "already exist",
    "nothing modified",
    "nothing added",
    "didn't affect anything",
)


def _sacctmgr(runner: Runner, progs: Programs, commands: list[list[str]], log_dir: Path) -> None:
    for args in commands:
        argv = [progs["sacctmgr"], "-i", *args]
        try:
            res = runner.run(argv, timeout=20, check=False)
        except SlurmError as exc:
            raise SandboxError(
                f"sacctmgr {' '.join(args[:2])} failed: {exc}", hint=f"read {log_dir / 'slurmdbd.log'}"
            ) from exc
        text = (res.stdout + res.stderr).strip()
        if res.returncode != 0 and not any(a in text.lower() for a in _ALREADY):
            raise SandboxError(
                f"sacctmgr {' '.join(args)} failed (exit code {res.returncode}): {text}",
                hint=f"read {log_dir / 'slurmdbd.log'}",
            )


def stop_database(pid: int | None, directory: Path, owner: str) -> list[int]:
    """``mariadb-admin shutdown`` over the socket (a clean stop), then signals; the pids that would not stop."""
    files = MariaDbFiles(directory)
    admin = _find("mariadb-admin") or _find("mysqladmin")
    if admin and accepts(files.socket):
        for user in dict.fromkeys([current_user(), owner]):
            with contextlib.suppress(OSError, subprocess.SubprocessError):
                done = subprocess.run(
                    mariadb.shutdown_argv(admin, files, user),
                    capture_output=True,
                    timeout=15,
                    check=False,
                    stdin=subprocess.DEVNULL,
                )
                if done.returncode == 0:
                    break
    if pid is None:
        return []
    deadline = time.monotonic() + 15  # InnoDB flushes its pages before it exits
    while time.monotonic() < deadline and processes.alive(pid):
        processes.reap([pid])
        time.sleep(0.1)
    return processes.stop({pid})


def describe(directory: Path, state: Mapping[str, object], procs: Mapping[str, tuple[int, bool]]) -> str:
    """``off``, or ``on`` with whether slurmdbd and mariadbd (``procs``: name -> (pid, alive)) answer."""
    if not state.get("accounting"):
        why = state.get("accounting_off")
        return f"off ({why})" if why else "off"
    files = MariaDbFiles(directory)
    alive = {name: ok for name, (_, ok) in procs.items()}
    port = _mapping(state.get("ports", {})).get("slurmdbd")
    dbd = alive.get("slurmdbd", False) and isinstance(port, int) and is_listening(port, _address(state))
    db = alive.get("mariadbd", False) and accepts(files.socket)
    return (
        f"on (slurmdbd {'answers' if dbd else 'DOES NOT ANSWER'} on port {port}; "
        f"mariadbd {'answers' if db else 'DOES NOT ANSWER'} on {files.socket})"
    )


def bring_up(
    directory: Path, state: Mapping[str, object], run_start: Start, runner: Runner, timeout: float = 30.0
) -> None:
    """Everything :func:`start` needs, from the sandbox's state: the programs, the files, then the daemons."""
    progs = programs()
    user = str(state["user"])
    port = int(str(_mapping(state["ports"])["slurmdbd"]))
    ctx = accounting.AccountingContext(
        str(directory), user, port, str(state["munge_socket"]), bind_address=_bind_address(state)
    )
    prepare(directory, ctx, progs)
    guests = state.get("admit", [])
    start(
        directory,
        state,
        progs,
        run_start,
        runner,
        [str(g) for g in guests] if isinstance(guests, list) else [],
        timeout,
    )
