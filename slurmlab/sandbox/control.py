"""Bring a sandbox up and down: a private munged, slurmctld and one ``slurmd -N`` per node.

Everything lives in one folder (default ``$XDG_RUNTIME_DIR/slurmlab/sandbox/<profile>`` or
``~/.cache/slurmlab/sandbox/<profile>``) with a ``state.json`` (pids, ports, profile, version, conf path) that
``status``/``down``/``env`` and other processes read. The system's munge and Slurm are never touched.
"""

from __future__ import annotations

import contextlib
import os
import pwd
import signal
import socket
import time
from collections.abc import Mapping, Sequence
from dataclasses import asdict, replace
from pathlib import Path
from typing import Any

from slurmlab.errors import SandboxError
from slurmlab.sandbox import access, accounting_daemons, machine, processes
from slurmlab.sandbox.daemons import accepts, daemon_argv, expected_program, start_failure, wait_for
from slurmlab.sandbox.folder import (
    default_directory,
    locate,
    make_devices,
    make_folders,
    make_munge_key,
    munge_socket_in,
    write_configuration,
)
from slurmlab.sandbox.installed import APT_INSTALL, client, daemon, detect_release, detect_version
from slurmlab.sandbox.ports import LOOPBACK, free_ports, is_listening
from slurmlab.sandbox.profile import Profile, load_profile
from slurmlab.sandbox.render import RATE_LIMIT_SINCE, RateLimit, RenderContext
from slurmlab.sandbox.state_file import STATE_FILE, read_state, reread_state, write_state
from slurmlab.sandbox.status import SandboxStatus
from slurmlab.sandbox.stopping import stop_sandbox
from slurmlab.sandbox.waits import wait_idle, wait_responding
from slurmlab.slurm.runner import Runner

__all__ = [
    "APT_INSTALL",
    "DEFAULT_PROFILE",
    "Sandbox",
    "SandboxStatus",
    "default_directory",
    "detect_release",
    "detect_version",
]

DEFAULT_PROFILE = "dgx-h100"


class Sandbox:
    """A running (or stopped) sandbox, as recorded in its folder's state.json."""

    def __init__(self, directory: Path, state: dict[str, Any]) -> None:
        self.directory = Path(directory)
        self.state = state
        self.reused = False

    # ---- what other code reads ----------------------------------------------------------------------
    @property
    def profile(self) -> Profile:
        return load_profile(self.state["profile"]).scaled(int(self.state["nodes"]))

    @property
    def profile_name(self) -> str:
        return str(self.state["profile"])

    @property
    def nodes(self) -> tuple[str, ...]:
        return tuple(self.state["node_names"])

    @property
    def conf_path(self) -> Path:
        return Path(self.state["conf_path"])

    @property
    def version(self) -> tuple[int, int]:
        major, minor = self.state["version"]
        return int(major), int(minor)

    @property
    def release(self) -> str:
        """The Slurm release it runs, e.g. ``24.11.5`` (``24.11`` for a sandbox recorded before releases were)."""
        major, minor = self.version
        return str(self.state.get("release") or f"{major}.{minor:02d}")

    @property
    def notes(self) -> tuple[str, ...]:
        """What ``up`` configured differently because of this machine (cgroups, host name), one line each."""
        return tuple(self.state.get("notes", ()))

    @property
    def ports(self) -> dict[str, int]:
        return {str(k): int(v) for k, v in self.state["ports"].items()}

    @property
    def pids(self) -> dict[str, int]:
        return {str(k): int(v) for k, v in self.state["pids"].items()}

    @property
    def address(self) -> str:
        """The address its daemons answer on: the loopback address they bind (127.0.0.1 on most machines), or
        127.0.0.1 where they bind every address (``notes`` say why)."""
        return str(self.state.get("bind_address") or LOOPBACK)

    @property
    def munge_socket(self) -> Path:
        return Path(self.state.get("munge_socket") or self.directory / "munge" / "munged.sock")

    @property
    def admitted(self) -> tuple[str, ...]:
        """The Unix users besides the owner who may use this sandbox (its munge socket)."""
        return tuple(self.state.get("admit", ()))

    def env(self) -> dict[str, str]:
        """Environment that points Slurm's commands at this sandbox."""
        return {"SLURM_CONF": str(self.conf_path)}

    def runner(self, timeout: float = 30.0) -> Runner:
        """A Runner pointed at this sandbox."""
        return Runner(slurm_conf=str(self.conf_path), timeout=timeout)

    def __repr__(self) -> str:
        return (
            f"Sandbox(profile={self.profile_name!r}, nodes={len(self.nodes)}, directory='{self.directory}')"
        )

    # ---- finding --------------------------------------------------------------------------------------
    @classmethod
    def find(cls, where: str | os.PathLike[str] | None = None) -> Sandbox:
        """The sandbox in folder ``where``, or the one of profile ``where`` in the default place.

        With nothing given: the only sandbox recorded in the default place.
        """
        return cls._load(locate(where))

    @classmethod
    def _load(cls, directory: Path) -> Sandbox:
        return cls(directory, read_state(directory))

    # ---- status ---------------------------------------------------------------------------------------
    def _pid_alive(self, name: str, pid: int) -> bool:
        # a recycled pid would run something else: check the program name too
        if not processes.alive(pid):
            return False
        argv = processes.cmdline(pid)
        return bool(argv) and expected_program(name) in os.path.basename(argv[0])

    def _reload(self) -> None:
        """Re-read state.json: another process (``slurmlab sandbox restart``) may have restarted daemons."""
        state = reread_state(self.directory)
        if state is not None:
            self.state = state

    def status(self, *, nodes: bool = True) -> SandboxStatus:
        self._reload()
        procs = {name: (pid, self._pid_alive(name, pid)) for name, pid in self.pids.items()}
        frozen = frozenset(name for name, (pid, ok) in procs.items() if ok and processes.frozen(pid))
        states: dict[str, str] = {}
        # asking slurmctld while it or munged cannot answer would only wait for the timeout
        answering = all(procs.get(n, (0, False))[1] and n not in frozen for n in ("munged", "slurmctld"))
        if nodes and answering:
            with contextlib.suppress(Exception):
                states = self.node_states()
        return SandboxStatus(
            self.directory,
            self.profile_name,
            self.nodes,
            procs,
            self.ports,
            states,
            frozen,
            self.release,
            accounting_daemons.describe(self.directory, self.state, procs),
        )

    def node_states(self) -> dict[str, str]:
        """node name -> Slurm state (``idle``, ``mixed``, ``down*`` ...)."""
        from slurmlab.slurm import queries

        return queries.node_states(self.runner(timeout=5))

    # ---- down -----------------------------------------------------------------------------------------
    def down(self) -> list[int]:
        """Stop every process of the sandbox (daemons, slurmstepd, job tasks). Returns the pids stopped."""
        self._reload()
        own = {name: pid for name, pid in self.pids.items() if self._pid_alive(name, pid)}
        stopped = stop_sandbox(own, str(self.conf_path), self.directory, str(self.state.get("user", "")))
        with contextlib.suppress(FileNotFoundError):
            (self.directory / STATE_FILE).unlink()
        return stopped

    # ---- up -------------------------------------------------------------------------------------------
    @classmethod
    def up(
        cls,
        profile: str = DEFAULT_PROFILE,
        nodes: int | None = None,
        directory: str | os.PathLike[str] | None = None,
        *,
        port: int | None = None,
        timeout: float = 60.0,
        admit: Sequence[str] | None = None,
        slurmd_timeout: int = 120,
        accounting: bool | None = None,
        rate_limit: RateLimit | None = None,
    ) -> Sandbox:
        """Start the sandbox of ``profile`` (``nodes`` scales its node count) and wait until every node is idle.

        Only the user who starts it (and root) may use it, plus the Unix users named in ``admit``.
        ``slurmd_timeout`` is slurm.conf's SlurmdTimeout: how soon a dead slurmd shows as not responding (seen:
        14-21 s at 15, about 70 s at the usual 120). A sandbox already running in that folder is reused (``.reused`` is then True); ``admit``, when
        given, then replaces the users it admits. ``accounting``: slurmdbd and a MariaDB too (:mod:`.accounting`);
        None: where both are installed (``status`` says why not). ``rate_limit``: slurmctld's per-user RPC rate
        limit (``SlurmctldParameters=rl_enable``), Slurm 23.02 and later; None: off."""
        prof = load_profile(profile)
        if nodes is not None:
            prof = prof.scaled(nodes)
        if (
            isinstance(slurmd_timeout, bool)
            or not isinstance(slurmd_timeout, int)
            or not 5 <= slurmd_timeout <= 3600
        ):
            raise SandboxError(
                f"slurmd_timeout must be a whole number of seconds from 5 to 3600, not {slurmd_timeout!r}",
                hint="leave it out for Slurm's usual 120 s",
            )
        folder = Path(directory) if directory is not None else default_directory(prof.name)
        folder = folder.absolute()
        guests = access.resolve_users(admit or ())
        existing = cls._existing(folder, prof)
        if existing is not None:
            accounting_daemons.check_reuse(existing.state, accounting, folder)
            _check_rate_limit_reuse(existing.state, rate_limit, folder)
            if admit is not None:
                existing.admit(*admit)
            return existing
        accounting, accounting_state = accounting_daemons.resolve(accounting)
        munged, slurmctld, slurmd = daemon("munged"), daemon("slurmctld"), daemon("slurmd")
        client("sinfo")
        release = detect_release(slurmctld)
        ctx, settings = _context(folder, prof, detect_version(slurmctld), port, slurmd_timeout, accounting)
        if rate_limit is not None:
            ctx = replace(ctx, rate_limit=_rate_limit_for(rate_limit, ctx.version))
        munge_dir = Path(ctx.munge_socket).parent
        make_folders(folder, prof.node_names)
        _check_reachable(guests, munge_dir)
        # closed before munged starts, so that no other user can reach the socket even for a moment
        access.grant(munge_dir, 0o700, guests, 0o1)
        make_devices(prof, ctx)
        conf = write_configuration(folder, prof, ctx)
        make_munge_key(munge_dir)
        state: dict[str, Any] = {
            "profile": prof.name,
            "nodes": prof.nodes,
            "node_names": list(prof.node_names),
            "conf_path": str(conf),
            "version": list(ctx.version),
            "release": release,
            "notes": [*settings.notes, *_cpu_notes(prof)],
            "user": ctx.user,
            "hostname": ctx.hostname,
            "bind_address": ctx.bind_address,
            "accounting": accounting,
            "rate_limit": asdict(rate_limit) if rate_limit is not None else None,
            **accounting_state,
            "cluster": ctx.cluster_name,
            "ports": {
                "slurmctld": ctx.ctld_port,
                **{f"slurmd:{n}": p for n, p in zip(prof.node_names, ctx.node_ports, strict=True)},
                **({"slurmdbd": ctx.accounting_port} if accounting else {}),
            },
            "munge_socket": ctx.munge_socket,
            "pids": {},
            "started": time.time(),
            "admit": [g.name for g in guests],
        }
        sb = cls(folder, state)
        try:
            sb._start_daemons(munged, slurmctld, slurmd)
            wait_idle(sb.node_states, sb.nodes, sb.pids, sb.directory / "log", timeout)
            if accounting:
                accounting_daemons.finish(sb.directory, sb.state, sb.runner())
        except BaseException:
            with contextlib.suppress(Exception):
                sb.down()
            raise
        return sb

    def _start_daemons(self, munged: str, slurmctld: str, slurmd: str) -> None:
        """munged, then slurmctld with its saved jobs cleared, then one slurmd per node once slurmctld listens."""
        self._start_munged(munged)
        if self.state.get("accounting"):  # the cluster must be in the database before slurmctld registers
            accounting_daemons.bring_up(self.directory, self.state, self._start, self.runner())
        self._start(slurmctld, self._argv("slurmctld", slurmctld, fresh=True), "slurmctld")
        self._wait_listening()
        for node in self.nodes:
            self._start(slurmd, self._argv(f"slurmd:{node}", slurmd), f"slurmd:{node}")

    @classmethod
    def _existing(cls, folder: Path, prof: Profile) -> Sandbox | None:
        if not (folder / STATE_FILE).exists():
            return None
        old = cls._load(folder)
        st = old.status(nodes=False)
        if st.running:
            if old.profile_name != prof.name or int(old.state["nodes"]) != prof.nodes:
                raise SandboxError(
                    f"a sandbox of profile {old.profile_name} with {old.state['nodes']} nodes already runs in {folder}",
                    hint=f"stop it first: slurmlab sandbox down --dir {folder}",
                )
            old.reused = True
            return old
        if not st.stopped:
            what = [f"{n} not running" for n in st.dead] + [f"{n} frozen" for n in sorted(st.frozen)]
            raise SandboxError(
                f"the sandbox in {folder} is partly running ({', '.join(what)})",
                hint=f"bring those back, keeping every job: slurmlab sandbox restart --dir {folder} "
                f"(or start afresh: slurmlab sandbox down --dir {folder} && slurmlab sandbox up)",
            )
        # every recorded process is gone (e.g. after a reboot): the state is stale, start afresh
        old.down()
        return None

    # ---- daemons ----------------------------------------------------------------------------------------
    def _argv(self, name: str, exe: str, **flags: bool) -> list[str]:  # fresh=, recover= (daemon_argv)
        return daemon_argv(name, exe, self.conf_path, self.munge_socket, self.directory / "log", **flags)

    def _start_munged(self, exe: str) -> None:
        sock = self.munge_socket
        self._start(exe, self._argv("munged", exe), "munged")
        # a socket file left by a killed munged still exists: wait until the new one answers
        wait_for(lambda: accepts(sock), 10, lambda: self._failure("munged did not open its socket", "munged"))
        self._guard_munge()

    def _guard_munge(self) -> None:
        """The munge socket and its folder: the owner's, and the admitted users' (see :mod:`.access`)."""
        guests = access.resolve_users(self.admitted)
        sock = self.munge_socket
        access.grant(sock.parent, 0o700, guests, 0o1)
        access.grant(sock, 0o600, guests, 0o6)

    def _wait_listening(self) -> None:
        port = self.ports["slurmctld"]
        wait_for(
            lambda: is_listening(port, self.address),
            15,
            lambda: self._failure(f"slurmctld does not listen on port {port}", "slurmctld"),
        )

    # ---- admitting other users ------------------------------------------------------------------------
    def admit(self, *users: str) -> tuple[str, ...]:
        """Let exactly ``users`` (Unix user names) use this sandbox besides its owner; none: the owner alone.

        Returns the admitted names. A user who cannot enter the sandbox's folder (e.g. a 0700 parent folder)
        is refused with the folder to open."""
        guests = access.resolve_users(users)
        _check_reachable(guests, self.munge_socket.parent)
        self._reload()
        self.state["admit"] = [g.name for g in guests]
        self._save()
        if self._pid_alive("munged", self.pids.get("munged", 0)):
            self._guard_munge()
            if self.state.get("accounting"):  # a user without an association may not run jobs
                accounting_daemons.add_users(
                    self.directory, str(self.state["cluster"]), self.admitted, self.runner()
                )
        else:
            access.grant(self.munge_socket.parent, 0o700, guests, 0o1)
        return self.admitted

    # ---- restart --------------------------------------------------------------------------------------
    def restart(self, *, timeout: float = 60.0) -> list[str]:
        """Bring back every daemon that died or was frozen, keeping the jobs and all other state.

        A frozen daemon (SIGSTOP) is resumed; a dead one starts again with its own arguments, slurmctld
        without ``-c`` so that it recovers every job from its StateSaveLocation, slurmd beside the job steps
        that outlived it. Then waits until slurmctld answers and every node responds.
        Returns one line per daemon acted on (empty when all were running).
        """
        self._reload()
        done: list[str] = []
        acct = [
            n for n in reversed(accounting_daemons.ACCOUNTING_DAEMONS) if n in self.pids
        ]  # database first
        for name in ["munged", *acct, "slurmctld", *(f"slurmd:{n}" for n in self.nodes)]:
            pid = self.pids.get(name, 0)
            if self._pid_alive(name, pid):
                if processes.frozen(pid):
                    os.kill(pid, signal.SIGCONT)
                    done.append(f"{name}: was frozen (pid {pid}); resumed")
                continue
            if pid > 0:
                processes.reap([pid])  # our own child when this process started it: no zombie left
            if name in acct:
                accounting_daemons.restart(name, self.directory, self.state, self._start)
            elif name == "munged":
                self._start_munged(daemon("munged"))
            else:
                self._start(exe := daemon(name.split(":")[0]), self._argv(name, exe, recover=True), name)
                if name == "slurmctld":
                    self._wait_listening()
            done.append(f"{name}: was not running (pid {pid}); restarted as pid {self.pids[name]}")
        if done:
            wait_responding(self.node_states, self.nodes, self.directory, timeout)
        return done

    def _start(self, exe: str, argv: list[str], name: str, env: Mapping[str, str] | None = None) -> None:
        pid, code = processes.spawn_daemon(
            exe,
            argv,
            self.directory / "log" / f"{name.replace(':', '-')}.out",
            {**os.environ, "SLURM_CONF": str(self.conf_path), **(env or {})},
        )
        self.state["pids"][name] = pid
        self._save()
        if code is not None:
            raise self._failure(f"{name} exited at once (exit code {code})", name)

    def _save(self) -> None:
        write_state(self.directory, self.state)

    def _failure(self, what: str, name: str) -> SandboxError:
        return start_failure(self.directory / "log", what, name)


def _check_reachable(guests: Sequence[access.AdmittedUser], folder: Path) -> None:
    for guest in guests:
        closed = access.unreachable_folder(guest, folder.parent)
        if closed is not None:
            raise SandboxError(
                f"cannot admit {guest.name}: they may not enter {closed}, on the way to the sandbox's munge socket",
                hint=f"let them pass (`chmod o+x {closed}`) or put the sandbox elsewhere (--dir)",
            )


def _rate_limit_for(rate_limit: RateLimit, version: tuple[int, int]) -> RateLimit:
    if version < RATE_LIMIT_SINCE:
        raise SandboxError(
            f"this machine's Slurm is {version[0]}.{version[1]:02d}, whose slurmctld has no RPC rate limit "
            "(SlurmctldParameters=rl_enable came with Slurm 23.02)",
            hint="leave rate_limit out, or start the sandbox with Slurm 23.02 or later",
        )
    return rate_limit


def _check_rate_limit_reuse(state: Mapping[str, object], rate_limit: RateLimit | None, folder: Path) -> None:
    """A running sandbox is reused only when it limits as asked (None: whatever it does)."""
    if rate_limit is not None and state.get("rate_limit") != asdict(rate_limit):
        raise SandboxError(
            f"the sandbox in {folder} runs with rate limit {state.get('rate_limit')}, not {asdict(rate_limit)}",
            hint=f"stop it first: slurmlab sandbox down --dir {folder}",
        )


def _cpu_notes(prof: Profile) -> list[str]:
    note = machine.simulated_cpus_note(prof.cpu.cpus, os.cpu_count())
    return [note] if note else []


def _context(
    folder: Path,
    prof: Profile,
    version: tuple[int, int],
    port: int | None,
    slurmd_timeout: int,
    accounting: bool = False,
) -> tuple[RenderContext, machine.SandboxSettings]:
    """How the sandbox in ``folder`` runs on this machine: its ports, user, socket, and the settings this
    machine needs (cgroups, host name)."""
    settings = machine.sandbox_settings(machine.inspect(), version)
    root = os.geteuid() == 0
    sock = munge_socket_in(folder)
    ports = free_ports(1 + prof.nodes + accounting, first=port, host=settings.bind_address or LOOPBACK)
    ctx = RenderContext(
        directory=str(folder),
        hostname=socket.gethostname(),
        user=pwd.getpwuid(os.geteuid()).pw_name,
        ctld_port=ports[0],
        node_ports=tuple(ports[1 : 1 + prof.nodes]),
        munge_socket=str(sock),
        version=version,
        device_dir=str(folder / "dev") if root else None,
        slurmd_timeout=slurmd_timeout,
        cgroup_plugin=settings.cgroup_plugin,
        accounting_port=ports[-1] if accounting else None,
        bind_address=settings.bind_address,
    )
    return ctx, settings
