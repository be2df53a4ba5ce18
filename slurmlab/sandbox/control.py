"""Bring a sandbox up and down: a private munged, slurmctld and one ``slurmd -N`` per node.

Everything lives in one folder (default ``$XDG_RUNTIME_DIR/slurmlab/sandbox/<profile>`` or
``~/.cache/slurmlab/sandbox/<profile>``) with a ``state.json`` (pids, ports, profile, version, conf path) that
``status``/``down``/``env`` and other processes read. The system's munge and Slurm are never touched.
"""

from __future__ import annotations

import contextlib
import json
import os
import pwd
import re
import secrets
import shutil
import signal
import socket
import stat
import subprocess
import time
from collections.abc import Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from slurmlab.errors import SandboxError
from slurmlab.sandbox import access, machine, processes
from slurmlab.sandbox.ports import free_ports, is_listening
from slurmlab.sandbox.profile import Profile, load_profile
from slurmlab.sandbox.render import (
    RenderContext,
    device_files,
    device_path,
    render_cgroup_conf,
    render_gres_conf,
    render_slurm_conf,
)
from slurmlab.slurm.runner import Runner

__all__ = ["APT_INSTALL", "DEFAULT_PROFILE", "Sandbox", "SandboxStatus", "default_directory", "detect_release",
           "detect_version"]

DEFAULT_PROFILE = "dgx-h100"
APT_INSTALL = "sudo apt-get install slurmctld slurmd slurm-client munge"
STATE_FILE = "state.json"
_SBIN = ("/usr/sbin", "/usr/local/sbin", "/sbin")
_UNIX_PATH_MAX = 107  # sun_path holds 108 bytes including the NUL


def _daemon(name: str) -> str:
    path = shutil.which(name) or shutil.which(name, path=os.pathsep.join(_SBIN))
    if path is None:
        raise SandboxError(f"{name} is not installed (the sandbox needs Slurm's daemons and munge)",
                           hint=f"install them: {APT_INSTALL}")
    return path


def _client(name: str) -> str:
    """Full path of a Slurm client command (only used for the readiness check of ``up``/``status``)."""
    path = shutil.which(name)
    if path is None:
        raise SandboxError(f"the Slurm client command {name} is not installed", hint=f"install it: {APT_INSTALL}")
    return path


def detect_release(slurmctld: str | None = None) -> str:
    """The installed Slurm's release, e.g. ``24.11.5``, from ``slurmctld -V`` (``slurm-wlm 24.11.5``)."""
    exe = slurmctld or _daemon("slurmctld")
    proc = subprocess.run([exe, "-V"], capture_output=True, text=True, timeout=10, check=False)
    m = re.search(r"\d+\.\d+\.\d+", proc.stdout + proc.stderr)
    if m is None:
        raise SandboxError(f"cannot read the Slurm version from `{exe} -V`: {(proc.stdout + proc.stderr).strip()!r}",
                           hint=f"reinstall Slurm: {APT_INSTALL}")
    return m.group(0)


def detect_version(slurmctld: str | None = None) -> tuple[int, int]:
    """(major, minor) of the installed Slurm, from ``slurmctld -V`` (e.g. ``slurm-wlm 22.05.8``)."""
    major, minor, _ = detect_release(slurmctld).split(".")
    return int(major), int(minor)


def _base_directory() -> Path:
    runtime = os.environ.get("XDG_RUNTIME_DIR")
    if runtime and os.access(runtime, os.W_OK):
        return Path(runtime) / "slurmlab" / "sandbox"
    return Path.home() / ".cache" / "slurmlab" / "sandbox"


def default_directory(profile: str) -> Path:
    return _base_directory() / profile


@dataclass(frozen=True)
class SandboxStatus:
    """What runs of one sandbox."""

    directory: Path
    profile: str
    nodes: tuple[str, ...]
    processes: dict[str, tuple[int, bool]]  # name -> (pid, alive); a frozen process is alive
    ports: dict[str, int]
    node_states: dict[str, str] = field(default_factory=dict)
    frozen: frozenset[str] = frozenset()  # names of the processes stopped by a signal (alive, answering nothing)
    release: str = ""  # the Slurm it runs, e.g. 24.11.5

    @property
    def running(self) -> bool:
        return bool(self.processes) and all(ok for _, ok in self.processes.values()) and not self.frozen

    @property
    def stopped(self) -> bool:
        return not any(ok for _, ok in self.processes.values())

    @property
    def dead(self) -> tuple[str, ...]:
        """Names of the daemons that are not running."""
        return tuple(name for name, (_, ok) in self.processes.items() if not ok)

    def condition(self, name: str) -> str:
        """``running``, ``FROZEN`` (stopped by a signal: alive but answering nothing) or ``NOT RUNNING``."""
        if name in self.frozen:
            return "FROZEN (stopped by a signal, answers nothing)"
        return "running" if self.processes[name][1] else "NOT RUNNING"

    def __str__(self) -> str:
        word = "running" if self.running else ("stopped" if self.stopped else "PARTLY running")
        slurm = f", Slurm {self.release}" if self.release else ""
        lines = [f"sandbox {self.profile} ({len(self.nodes)} nodes{slurm}) in {self.directory}: {word}"]
        for name, (pid, _) in self.processes.items():
            port = self.ports.get(name)
            where = f" port {port}" if port else ""
            lines.append(f"  {name:<14} pid {pid:<8} {self.condition(name)}{where}")
        for node, st in self.node_states.items():
            note = "  (not responding: its slurmd is dead, frozen or unreachable)" if st.endswith("*") else ""
            lines.append(f"  node {node:<9} {st}{note}")
        if not self.running and not self.stopped:
            lines.append(f"bring back what is dead or frozen, keeping every job: slurmlab sandbox restart --dir {self.directory}")
        return "\n".join(lines)


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
        return f"Sandbox(profile={self.profile_name!r}, nodes={len(self.nodes)}, directory='{self.directory}')"

    # ---- finding --------------------------------------------------------------------------------------
    @classmethod
    def find(cls, where: str | os.PathLike[str] | None = None) -> Sandbox:
        """The sandbox in folder ``where``, or the one of profile ``where`` in the default place.

        With nothing given: the only sandbox recorded in the default place.
        """
        if where is None:
            base = _base_directory()
            found = sorted(p.parent for p in base.glob(f"*/{STATE_FILE}")) if base.is_dir() else []
            if len(found) != 1:
                what = "no sandbox" if not found else f"{len(found)} sandboxes ({', '.join(map(str, found))})"
                raise SandboxError(f"{what} recorded under {base}",
                                   hint="start one with `slurmlab sandbox up`, or name it with --dir/--profile")
            return cls._load(found[0])
        text = os.fspath(where)
        path = Path(text)
        if os.sep not in text and not path.exists():
            path = default_directory(text)
        return cls._load(path)

    @classmethod
    def _load(cls, directory: Path) -> Sandbox:
        file = directory / STATE_FILE
        try:
            state = json.loads(file.read_text())
        except FileNotFoundError:
            raise SandboxError(f"no sandbox in {directory} (no {STATE_FILE})",
                               hint=f"start one: slurmlab sandbox up --dir {directory}") from None
        except (OSError, json.JSONDecodeError) as exc:
            raise SandboxError(f"cannot read {file}: {exc}",
                               hint=f"remove the folder {directory} and start again") from exc
        if not isinstance(state, dict) or not {"profile", "pids", "conf_path"} <= state.keys():
            raise SandboxError(f"{file} is not a sandbox state file", hint=f"remove {directory} and start again")
        return cls(directory, state)

    # ---- status ---------------------------------------------------------------------------------------
    def _expected_exe(self, name: str) -> str:
        return "munged" if name == "munged" else name.split(":")[0]

    def _pid_alive(self, name: str, pid: int) -> bool:
        # a recycled pid would run something else: check the program name too
        if not processes.alive(pid):
            return False
        argv = processes.cmdline(pid)
        return bool(argv) and self._expected_exe(name) in os.path.basename(argv[0])

    def _reload(self) -> None:
        """Re-read state.json: another process (``slurmlab sandbox restart``) may have restarted daemons."""
        with contextlib.suppress(OSError, ValueError):
            state = json.loads((self.directory / STATE_FILE).read_text())
            if isinstance(state, dict) and isinstance(state.get("pids"), dict):
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
        return SandboxStatus(self.directory, self.profile_name, self.nodes, procs, self.ports, states, frozen,
                             self.release)

    def node_states(self) -> dict[str, str]:
        """node name -> Slurm state (``idle``, ``mixed``, ``down*`` ...)."""
        from slurmlab.slurm import queries

        return queries.node_states(self.runner(timeout=5))

    # ---- down -----------------------------------------------------------------------------------------
    def down(self) -> list[int]:
        """Stop every process of the sandbox (daemons, slurmstepd, job tasks). Returns the pids stopped."""
        self._reload()
        own = {name: pid for name, pid in self.pids.items() if self._pid_alive(name, pid)}
        roots = set(own.values())
        related = processes.find_related(roots, str(self.conf_path), self.directory)
        # the Slurm daemons together (slurmctld stops its own slurmscriptd), then what they left (slurmstepd,
        # job tasks), munged last since the others talk to it while they stop
        slurm = {p for n, p in own.items() if n != "munged"}
        left = processes.stop(slurm)
        # a step being launched while the daemons stop can appear late: look until none is new
        for _ in range(3):
            # step daemons ignore SIGTERM (24.11+): no need to wait the daemons' grace for them
            more = related | processes.find_related(roots, str(self.conf_path), self.directory)
            left += processes.stop(more, grace=2.0)
            related |= more
            if not processes.find_related(roots, str(self.conf_path), self.directory):
                break
        left += processes.stop({p for n, p in own.items() if n == "munged"})
        if left:
            raise SandboxError(f"processes {left} of the sandbox in {self.directory} did not stop",
                               hint=f"stop them by pid: kill -9 {' '.join(map(str, left))}")
        with contextlib.suppress(FileNotFoundError):
            (self.directory / STATE_FILE).unlink()
        return sorted(roots | related)

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
    ) -> Sandbox:
        """Start the sandbox of ``profile`` (``nodes`` scales its node count) and wait until every node is idle.

        Only the user who starts it (and root) may use it, plus the Unix users named in ``admit``.
        ``slurmd_timeout`` is slurm.conf's SlurmdTimeout: how soon a dead slurmd shows as not responding (seen:
        14-21 s at 15, about 70 s at the usual 120). A sandbox already running in that folder is reused (``.reused`` is then True); ``admit``, when
        given, then replaces the users it admits.
        """
        prof = load_profile(profile)
        if nodes is not None:
            prof = prof.scaled(nodes)
        if isinstance(slurmd_timeout, bool) or not isinstance(slurmd_timeout, int) or not 5 <= slurmd_timeout <= 3600:
            raise SandboxError(f"slurmd_timeout must be a whole number of seconds from 5 to 3600, not {slurmd_timeout!r}",
                               hint="leave it out for Slurm's usual 120 s")
        folder = Path(directory) if directory is not None else default_directory(prof.name)
        folder = folder.absolute()
        guests = access.resolve_users(admit or ())
        existing = cls._existing(folder, prof)
        if existing is not None:
            if admit is not None:
                existing.admit(*admit)
            return existing
        munged, slurmctld, slurmd = _daemon("munged"), _daemon("slurmctld"), _daemon("slurmd")
        _client("sinfo")
        release = detect_release(slurmctld)
        version = detect_version(slurmctld)
        settings = machine.sandbox_settings(machine.inspect(), version)
        user = pwd.getpwuid(os.geteuid()).pw_name
        root = os.geteuid() == 0
        munge_dir = folder / "munge"
        sock = munge_dir / "munged.sock"
        if len(str(sock)) > _UNIX_PATH_MAX:
            raise SandboxError(f"the sandbox folder {folder} is too deep for a unix socket path ({sock})",
                               hint="choose a shorter --dir, e.g. /tmp/slurmlab-sandbox")
        ports = free_ports(1 + prof.nodes, first=port)
        for sub in ("", "munge", "state", "log", "run", "dev", "spool"):
            (folder / sub).mkdir(parents=True, exist_ok=True)
        folder.chmod(0o755)
        _check_reachable(guests, munge_dir)
        # closed before munged starts, so that no other user can reach the socket even for a moment
        access.grant(munge_dir, 0o700, guests, 0o1)
        for node in prof.node_names:
            (folder / "spool" / node).mkdir(exist_ok=True)
        ctx = RenderContext(
            directory=str(folder), hostname=socket.gethostname(), user=user, ctld_port=ports[0],
            node_ports=tuple(ports[1:]), munge_socket=str(sock), version=version,
            device_dir=str(folder / "dev") if root else None, slurmd_timeout=slurmd_timeout,
            cgroup_plugin=settings.cgroup_plugin, host_resolves=settings.host_resolves,
        )
        _make_devices(prof, ctx)
        conf = folder / "slurm.conf"
        conf.write_text(render_slurm_conf(prof, ctx))
        (folder / "gres.conf").write_text(render_gres_conf(prof, ctx))
        cgroup_conf = render_cgroup_conf(ctx)
        if cgroup_conf is None:
            with contextlib.suppress(FileNotFoundError):
                (folder / "cgroup.conf").unlink()  # one left by an earlier sandbox on another machine setup
        else:
            (folder / "cgroup.conf").write_text(cgroup_conf)
        key = munge_dir / "munge.key"
        if not key.exists():
            fd = os.open(key, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o400)
            with os.fdopen(fd, "wb") as fh:
                fh.write(secrets.token_bytes(1024))
        key.chmod(0o400)
        state: dict[str, Any] = {
            "profile": prof.name, "nodes": prof.nodes, "node_names": list(prof.node_names),
            "conf_path": str(conf), "version": list(version), "release": release, "notes": list(settings.notes),
            "user": user, "hostname": ctx.hostname,
            "ports": {"slurmctld": ports[0], **{f"slurmd:{n}": p for n, p in zip(prof.node_names, ports[1:], strict=True)}},
            "munge_socket": str(sock), "pids": {}, "started": time.time(), "admit": [g.name for g in guests],
        }
        sb = cls(folder, state)
        try:
            sb._start_munged(munged)
            sb._start(slurmctld, sb._argv("slurmctld", slurmctld, fresh=True), "slurmctld")
            sb._wait_listening()
            for node in prof.node_names:
                sb._start(slurmd, sb._argv(f"slurmd:{node}", slurmd), f"slurmd:{node}")
            sb._wait_idle(timeout)
        except BaseException:
            with contextlib.suppress(Exception):
                sb.down()
            raise
        return sb

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
    def _argv(self, name: str, exe: str, *, fresh: bool = False) -> list[str]:
        """The command line of daemon ``name``; ``fresh`` starts slurmctld with ``-c`` (clear its saved jobs)."""
        conf = str(self.conf_path)
        if name == "munged":
            d, sock = self.directory, self.munge_socket
            return [exe, "-F", "-f", f"--key-file={sock.parent / 'munge.key'}", f"--socket={sock}",
                    f"--pid-file={sock.parent / 'munged.pid'}", f"--log-file={d / 'log' / 'munged.log'}",
                    f"--seed-file={sock.parent / 'munged.seed'}"]
        if name == "slurmctld":
            return [exe, "-D", *(["-c"] if fresh else []), "-f", conf]
        return [exe, "-D", "-N", name.split(":", 1)[1], "-f", conf]

    def _start_munged(self, exe: str) -> None:
        sock = self.munge_socket
        self._start(exe, self._argv("munged", exe), "munged")
        # a socket file left by a killed munged still exists: wait until the new one answers
        _wait_for(lambda: _accepts(sock), 10, lambda: self._failure("munged did not open its socket", "munged"))
        self._guard_munge()

    def _guard_munge(self) -> None:
        """The munge socket and its folder: the owner's, and the admitted users' (see :mod:`.access`)."""
        guests = access.resolve_users(self.admitted)
        sock = self.munge_socket
        access.grant(sock.parent, 0o700, guests, 0o1)
        access.grant(sock, 0o600, guests, 0o6)

    def _wait_listening(self) -> None:
        port = self.ports["slurmctld"]
        _wait_for(lambda: is_listening(port), 15,
                  lambda: self._failure(f"slurmctld does not listen on port {port}", "slurmctld"))

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
        for name in ["munged", "slurmctld", *(f"slurmd:{n}" for n in self.nodes)]:
            pid = self.pids.get(name, 0)
            if self._pid_alive(name, pid):
                if processes.frozen(pid):
                    os.kill(pid, signal.SIGCONT)
                    done.append(f"{name}: was frozen (pid {pid}); resumed")
                continue
            if pid > 0:
                processes.reap([pid])  # our own child when this process started it: no zombie left
            exe = _daemon(name.split(":")[0])
            if name == "munged":
                self._start_munged(exe)
            else:
                self._start(exe, self._argv(name, exe), name)
                if name == "slurmctld":
                    self._wait_listening()
            done.append(f"{name}: was not running (pid {pid}); restarted as pid {self.pids[name]}")
        if done:
            self._wait_responding(timeout)
        return done

    def _wait_responding(self, timeout: float) -> None:
        deadline = time.monotonic() + timeout
        states: dict[str, str] = {}
        while time.monotonic() < deadline:
            with contextlib.suppress(Exception):
                states = self.node_states()
            if states and set(states) >= set(self.nodes) and not any(
                states[n].endswith("*") or states[n].startswith("unk") for n in self.nodes
            ):
                return
            time.sleep(0.3)
        raise SandboxError(
            f"after the restart the nodes do not respond within {timeout:g} s: {states or 'no answer from slurmctld'}"
            f"\n{self._log_tail('slurmctld')}",
            hint=f"read the logs in {self.directory / 'log'}; start afresh (the jobs are lost): "
                 f"slurmlab sandbox down --dir {self.directory} && slurmlab sandbox up",
        )

    def _start(self, exe: str, argv: list[str], name: str) -> None:
        log = open(self.directory / "log" / f"{name.replace(':', '-')}.out", "ab")
        try:
            proc = subprocess.Popen(argv, stdin=subprocess.DEVNULL, stdout=log, stderr=subprocess.STDOUT,
                                    env={**os.environ, "SLURM_CONF": str(self.conf_path)},
                                    start_new_session=True, close_fds=True, executable=exe)
        finally:
            log.close()
        self.state["pids"][name] = proc.pid
        self._save()
        time.sleep(0.05)
        if proc.poll() is not None:
            raise self._failure(f"{name} exited at once (exit code {proc.returncode})", name)

    def _save(self) -> None:
        tmp = self.directory / f".{STATE_FILE}.tmp"
        tmp.write_text(json.dumps(self.state, indent=1))
        tmp.replace(self.directory / STATE_FILE)

    def _log_tail(self, name: str, lines: int = 15) -> str:
        stem = name.replace(":", "-")
        node = name.split(":")[1] if ":" in name else None
        candidates = [self.directory / "log" / f"{stem}.out", self.directory / "log" / f"{name}.log"]
        if node:
            candidates.append(self.directory / "log" / f"slurmd-{node}.log")
        text = []
        for path in candidates:
            with contextlib.suppress(OSError):
                tail = path.read_text(errors="replace").splitlines()[-lines:]
                if tail:
                    text.append(f"--- {path} ---\n" + "\n".join(tail))
        return "\n".join(text) or "(no log written)"

    def _failure(self, what: str, name: str) -> SandboxError:
        tail = self._log_tail(name)
        known = machine.explain_failure(self._log_tail(name, lines=60))
        if known is None:
            return SandboxError(f"the sandbox did not start: {what}\n{tail}",
                                hint=f"read the logs in {self.directory / 'log'}")
        cause, step = known
        return SandboxError(f"the sandbox did not start: {what} ({cause})\n{tail}",
                            hint=f"{step}; the logs are in {self.directory / 'log'}")

    def _wait_idle(self, timeout: float) -> None:
        deadline = time.monotonic() + timeout
        states: dict[str, str] = {}
        while time.monotonic() < deadline:
            for name, pid in self.pids.items():
                if not processes.alive(pid):
                    raise self._failure(f"{name} stopped while starting", name)
            with contextlib.suppress(Exception):
                states = self.node_states()
            if states and set(states) >= set(self.nodes) and all(
                states[n].rstrip("*~#!%$@^-") == "idle" for n in self.nodes
            ):
                return
            bad = [n for n, s in states.items() if s.startswith(("inval", "drain", "fail"))]
            if bad:
                raise self._failure(f"node(s) {', '.join(bad)} went {states[bad[0]]} (rejected configuration)",
                                    f"slurmd:{bad[0]}")
            time.sleep(0.2)
        raise self._failure(f"nodes not idle after {timeout:g} s: {states or 'no answer from slurmctld'}",
                            "slurmctld")


def _accepts(path: Path) -> bool:
    """True when something listens on the unix socket ``path``."""
    with socket.socket(socket.AF_UNIX, socket.SOCK_STREAM) as s:
        s.settimeout(1.0)
        try:
            s.connect(str(path))
        except OSError:
            return False
    return True


def _check_reachable(guests: Sequence[access.AdmittedUser], folder: Path) -> None:
    for guest in guests:
        closed = access.unreachable_folder(guest, folder.parent)
        if closed is not None:
            raise SandboxError(
                f"cannot admit {guest.name}: they may not enter {closed}, on the way to the sandbox's munge socket",
                hint=f"let them pass (`chmod o+x {closed}`) or put the sandbox elsewhere (--dir)",
            )


def _wait_for(check: Any, seconds: float, failure: Any) -> None:
    deadline = time.monotonic() + seconds
    while time.monotonic() < deadline:
        if check():
            return
        time.sleep(0.05)
    raise failure()


def _make_devices(prof: Profile, ctx: RenderContext) -> None:
    """Fake GPU files: character devices (Slurm rejects plain files). mknod as root, else existing /dev/ttyN."""
    for dev in device_files(prof):
        path = Path(device_path(ctx, dev))
        if ctx.device_dir is None:
            if not path.exists() or not stat.S_ISCHR(path.stat().st_mode):
                raise SandboxError(
                    f"{path} is not a character device; without root the sandbox uses /dev/tty0.. as fake GPUs",
                    hint="run as root, or choose a profile with fewer GPUs per node (e.g. --profile seed)",
                )
            continue
        if path.exists() and stat.S_ISCHR(path.stat().st_mode):
            continue
        with contextlib.suppress(FileNotFoundError):
            path.unlink()
        try:
            os.mknod(path, stat.S_IFCHR | 0o666, os.makedev(195, dev.number))
        except OSError as exc:
            raise SandboxError(f"cannot create the fake GPU device {path}: {exc}",
                               hint="run as root, or as an ordinary user (the sandbox then uses /dev/ttyN)") from exc
