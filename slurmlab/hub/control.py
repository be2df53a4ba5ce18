"""Start and stop a real JupyterHub on a sandbox: JupyterHub, configurable-http-proxy and batchspawner.

    hub = Hub.up(sandbox, users=["alice"])     # 127.0.0.1 only; hub.url, hub.password
    hub.start_server("alice", ngpus=2, runtime="30", partition="gpu")   # through the REST API
    hub.down()                                 # servers stopped, their jobs ended, hub and proxy stopped

The hub is a daemon of its own (it outlives the command that started it, as ``slurmlab sandbox up``'s daemons
do); :meth:`Hub.find` finds it again from its folder. :meth:`Hub.down` leaves nothing: each user's server is
stopped through the hub (batchspawner cancels its job), then the hub (which stops the proxy it started), then any
process or job of the hub still there, checked.
"""

from __future__ import annotations

import contextlib
import json
import os
import pwd
import secrets
import shutil
import subprocess
import sys
import sysconfig
import time
import urllib.error
import urllib.parse
import urllib.request
from dataclasses import dataclass, field
from importlib.util import find_spec
from pathlib import Path
from typing import Any

from slurmlab.errors import MissingExtraError, SlurmlabError
from slurmlab.hub.settings import CONFIG_FILE, JOB_NAME, SETTINGS_FILE, config_text
from slurmlab.sandbox import Sandbox, processes
from slurmlab.sandbox.ports import LOOPBACK, free_ports
from slurmlab.slurm.identity import current_user

__all__ = ["Hub", "HubJob", "compile_for_users", "default_folder", "find_proxy", "user_python"]

STATE_FILE = "hub.json"
READY_TIMEOUT = 60.0
STOP_GRACE = 20.0
_REPO = Path(__file__).resolve().parents[2]
_SBIN = "/usr/sbin:/sbin:/usr/bin:/bin"


def default_folder() -> Path:
    """``$XDG_RUNTIME_DIR/slurmlab/hub`` or ``~/.cache/slurmlab/hub``."""
    runtime = os.environ.get("XDG_RUNTIME_DIR")
    base = Path(runtime) / "slurmlab" if runtime else Path.home() / ".cache" / "slurmlab"
    return base / "hub"


def find_proxy() -> str:
    """configurable-http-proxy: ``$SLURMLAB_HUB_PROXY``, the one ``make setup`` installs (hub/node_modules), or
    the one on PATH."""
    named = os.environ.get("SLURMLAB_HUB_PROXY")
    candidates = [named] if named else []
    candidates += [str(_REPO / "hub" / "node_modules" / ".bin" / "configurable-http-proxy")]
    candidates += [shutil.which("configurable-http-proxy") or ""]
    for path in candidates:
        if path and os.access(path, os.X_OK):
            if shutil.which("node") is None:
                raise SlurmlabError(
                    f"configurable-http-proxy ({path}) needs node, which is not on PATH",
                    hint="install Node.js 20 or later (make setup's system step installs Debian's nodejs)",
                )
            return path
    raise SlurmlabError(
        "configurable-http-proxy (the hub's proxy, from npm) is not installed",
        hint="make setup installs it into hub/node_modules (npm ci --prefix hub); or npm install -g "
        "configurable-http-proxy; or name one with SLURMLAB_HUB_PROXY",
    )


def _python_tool(name: str) -> str:
    beside = Path(sys.executable).parent / name
    found = str(beside) if os.access(beside, os.X_OK) else shutil.which(name)
    if not found:
        raise MissingExtraError("the hub", name, "hub")
    return found


def user_python(
    users: list[str], modules: tuple[str, ...] = ("jupyterhub", "batchspawner", "jupyter_server", "slurmlab")
) -> tuple[str, str]:
    """A Python every hub user can run with this environment's packages, and the PYTHONPATH that gives them.

    This Python may sit where the users cannot reach (a virtual environment made from a Python under root's
    0700 home): then the system's Python of the same version runs the same packages (same ABI), as a site's
    shared software installation would be run. Its servers and kernels both use it."""
    paths = [p for p in os.environ.get("PYTHONPATH", "").split(os.pathsep) if p]
    for site in dict.fromkeys([sysconfig.get_paths()["purelib"], sysconfig.get_paths()["platlib"]]):
        # a PYTHONPATH entry's .pth files are not read: the folders they add (an editable install's source)
        # are named too, before the site folder, where an editable install keeps only its data
        paths += _pth_folders(Path(site))
        paths.append(site)
    pythonpath = os.pathsep.join(dict.fromkeys(paths))
    version = f"python{sys.version_info[0]}.{sys.version_info[1]}"
    candidates = [sys.executable, f"/usr/bin/{version}", f"/usr/local/bin/{version}", shutil.which(version)]
    me = current_user()
    others = [u for u in users if u != me]
    runuser = shutil.which("runuser") or shutil.which("runuser", path=_SBIN)
    for python in dict.fromkeys(c for c in candidates if c and os.access(c, os.X_OK)):
        if not others or runuser is None:
            return python, pythonpath
        probe = [python, "-c", "import " + ", ".join(modules)]
        env = {"PATH": _SBIN, "PYTHONPATH": pythonpath}
        if all(
            subprocess.run(
                [runuser, "-u", u, "--", *probe], env=env, cwd="/", capture_output=True, timeout=60
            ).returncode
            == 0
            for u in others
        ):
            return python, pythonpath
    raise SlurmlabError(
        f"no Python {sys.version_info[0]}.{sys.version_info[1]} that {', '.join(others)} can run with "
        f"this environment's packages ({sys.executable} is out of their reach)",
        hint="install slurmlab[hub] where every user can read it (a shared software folder), or run the "
        "hub for yourself only (no --user)",
    )


def _pth_folders(site: Path) -> list[str]:
    folders = []
    for pth in sorted(site.glob("*.pth")):
        for line in pth.read_text(encoding="utf-8", errors="replace").splitlines():
            line = line.strip()
            if line and not line.startswith(("#", "import ", "import\t")) and Path(line).is_dir():
                folders.append(line)
    return folders


def compile_for_users(package: Path | None = None) -> bool:
    """Write the bytecode of slurmlab's own modules where it is missing or older than its source, once, so that
    every user's server and kernel reads it: a user cannot write into slurmlab's folder (a source checkout or
    editable install, root's), so each of their processes would otherwise compile the modules it imports from
    source, every time. Where this process cannot write either (an installed, read-only slurmlab, which has its
    bytecode already), nothing changes. ``package``: another folder than slurmlab's. Whether every module's
    bytecode is there now."""
    import compileall

    where = package if package is not None else Path(__file__).resolve().parents[1]
    return bool(compileall.compile_dir(str(where), quiet=2, workers=1))


def _check_packages() -> None:
    for module in ("jupyterhub", "batchspawner"):
        if find_spec(module) is None:
            raise MissingExtraError("the hub", module, "hub")


def _check_user(name: str) -> None:
    try:
        entry = pwd.getpwnam(name)
    except KeyError:
        raise SlurmlabError(
            f"no Unix user {name!r} on this machine",
            hint="the hub spawns each user's server as that user's job",
        ) from None
    if not Path(entry.pw_dir).is_dir():
        raise SlurmlabError(
            f"user {name} has no home folder ({entry.pw_dir})",
            hint=f"their server's job starts there: create it (useradd -m {name}, or mkhomedir_helper {name})",
        )


@dataclass(frozen=True)
class HubJob:
    """One job of the hub's servers, as squeue says it."""

    job_id: str
    user: str
    state: str


@dataclass
class Hub:
    """A JupyterHub started by :meth:`up` (or found by :meth:`find`) in ``folder``."""

    folder: Path
    settings: dict[str, Any] = field(repr=False)

    # ---- what it is -----------------------------------------------------------------------------------
    @property
    def url(self) -> str:
        return f"http://{LOOPBACK}:{self.settings['port']}"

    @property
    def password(self) -> str:
        return str(self.settings["password"])

    @property
    def users(self) -> tuple[str, ...]:
        return tuple(self.settings["users"])

    @property
    def pid(self) -> int:
        return int(self.settings.get("pid", 0))

    def alive(self) -> bool:
        return self.pid > 0 and processes.alive(self.pid)

    def sandbox(self) -> Sandbox:
        return Sandbox.find(self.settings["sandbox"])

    # ---- up -------------------------------------------------------------------------------------------
    @classmethod
    def up(
        cls,
        sandbox: Sandbox,
        folder: str | os.PathLike[str] | None = None,
        *,
        users: list[str] | tuple[str, ...] = (),
        password: str | None = None,
        port: int | None = None,
        start_timeout: int = 120,
        ready_timeout: float = READY_TIMEOUT,
        seat_hashes: str | os.PathLike[str] | None = None,
        form: dict[str, dict[str, Any]] | None = None,
        alike_users: bool = False,
        admins: list[str] | tuple[str, ...] = (),
        services: list[dict[str, Any]] | None = None,
        environment: dict[str, str] | None = None,
    ) -> Hub:
        """Start JupyterHub (and its proxy) for ``users`` (default: the current user) on ``sandbox``; waits until
        it answers. A hub already running in ``folder`` is an error (stop it first: :meth:`down`).

        ``seat_hashes``: a 0600 JSON file of {user: hash} (:mod:`.passwords`) checked at each login instead of the
        one ``password`` (a workshop's seats); ``form``: the spawn form's prefilled or locked fields
        (:func:`~slurmlab.hub.settings.check_form_settings`); ``alike_users``: the users share their groups and
        folders (a workshop's seats), so the first one stands for all when checking which Python they can run.
        ``admins``: hub names that log in (through ``seat_hashes``) as the hub's admins and never get a server (a
        workshop's teacher); ``services``: services the hub starts and proxies at ``/services/NAME/``, each
        ``{"name", "port", "command", "environment", "scopes"}`` (the teacher's view); ``environment``: more
        variables for every user's server and its kernels (a workshop's word on each cell, for that view)."""
        _check_packages()
        where = Path(folder) if folder is not None else default_folder()
        where = where.absolute()
        if (where / STATE_FILE).exists():
            old = cls.find(where)
            if old.alive():
                raise SlurmlabError(
                    f"a hub already runs from {where} ({old.url})", hint="stop it first: slurmlab hub down"
                )
        names = list(users) or [current_user()]
        for name in names:
            _check_user(name)
        # only those not admitted yet: admitting again would put them back in the sandbox's own accounts
        guests = [n for n in names if n != current_user() and n not in sandbox.admitted]
        if guests:
            sandbox.admit(*dict.fromkeys([*sandbox.admitted, *guests]))
        runuser = shutil.which("runuser") or shutil.which("runuser", path=_SBIN)
        if runuser is None:
            raise SlurmlabError(
                "runuser (util-linux) is missing", hint="the hub submits each user's job with it"
            )
        python, pythonpath = user_python(names[:1] if alike_users else names)
        compile_for_users()  # a module left uncompiled is no failure: each user's process compiles it, as before
        where.mkdir(parents=True, exist_ok=True)
        where.chmod(0o700)  # the settings hold the password and the service token
        hub_port, proxy_api_port, *rest = free_ports(3 if port is None else 2)
        settings: dict[str, Any] = {
            "folder": str(where),
            "sandbox": str(sandbox.directory),
            "slurm_conf": str(sandbox.conf_path),
            "port": port if port is not None else rest[0],
            "hub_port": hub_port,
            "proxy_api_port": proxy_api_port,
            "users": names,
            "password": password or secrets.token_urlsafe(12),
            "service_token": secrets.token_hex(32),
            "proxy_token": secrets.token_hex(32),
            "proxy": find_proxy(),
            "runuser": runuser,
            "python": python,
            "pythonpath": pythonpath,
            "jupyter_prefix": sys.prefix,
            "singleuser": _python_tool("jupyterhub-singleuser"),
            "nodes": list(sandbox.nodes),
            # the default partition first: the form offers it first
            "partitions": [p.name for p in sorted(sandbox.profile.partitions, key=lambda p: not p.default)],
            "start_timeout": start_timeout,
            "seat_hashes": str(Path(seat_hashes).absolute()) if seat_hashes is not None else "",
            "form": form or {},
            "admins": list(admins),
            "services": list(services or []),
            "environment": dict(environment or {}),
        }
        hub = cls(where, settings)
        hub._save()
        config = where / CONFIG_FILE
        config.write_text(config_text(where / SETTINGS_FILE), encoding="utf-8")
        env = {**os.environ, **sandbox.env()}
        env["PATH"] = os.pathsep.join([str(Path(sys.executable).parent), env.get("PATH", _SBIN)])
        argv = [sys.executable, "-m", "jupyterhub", "-f", str(config)]
        pid, code = processes.spawn_daemon(sys.executable, argv, where / "hub.log", env, settle=0.2)
        hub.settings["pid"] = pid
        hub._save()
        if code is not None:
            raise hub._failure(f"JupyterHub exited at once (code {code})")
        hub._wait_ready(ready_timeout)
        return hub

    @classmethod
    def find(cls, folder: str | os.PathLike[str] | None = None) -> Hub:
        where = (Path(folder) if folder is not None else default_folder()).absolute()
        try:
            settings = json.loads((where / STATE_FILE).read_text(encoding="utf-8"))
        except FileNotFoundError:
            raise SlurmlabError(f"no hub in {where}", hint="start one: slurmlab hub up") from None
        except (OSError, ValueError) as exc:
            raise SlurmlabError(
                f"the hub's state file {where / STATE_FILE} is unreadable ({exc})",
                hint="stop what is left by hand (its pids are in hub.log) and remove the folder",
            ) from None
        return cls(where, settings)

    def _save(self) -> None:
        for name in (STATE_FILE, SETTINGS_FILE):
            path = self.folder / name
            fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o600)
            with os.fdopen(fd, "w", encoding="utf-8") as out:
                json.dump(self.settings, out, indent=1)

    def _failure(self, what: str) -> SlurmlabError:
        log = self.folder / "hub.log"
        tail = log.read_text(encoding="utf-8", errors="replace").splitlines()[-15:] if log.exists() else []
        with contextlib.suppress(Exception):
            self.down()
        return SlurmlabError(
            what + ("; the end of its log:\n  " + "\n  ".join(tail) if tail else ""),
            hint=f"the whole log is {log}",
        )

    def _wait_ready(self, timeout: float) -> None:
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            if not self.alive():
                raise self._failure("JupyterHub stopped while starting")
            with contextlib.suppress(OSError, SlurmlabError):
                self.api("GET", "/")
                return
            time.sleep(0.3)
        raise self._failure(f"JupyterHub did not answer on {self.url} within {timeout:.0f} s")

    # ---- the REST API ---------------------------------------------------------------------------------
    def api(self, method: str, path: str, body: Any = None, *, timeout: float = 15.0) -> Any:
        """Call the hub's REST API (``/hub/api`` + ``path``) with the hub's service token; the JSON answer."""
        return self.request(method, "/hub/api" + path, body, timeout=timeout)

    def request(self, method: str, path: str, body: Any = None, *, timeout: float = 15.0) -> Any:
        """``method`` on ``path`` of the hub's address (a user's server is under ``/user/NAME/``), with the
        service token."""
        data = None if body is None else json.dumps(body).encode()
        req = urllib.request.Request(self.url + path, data=data, method=method)
        req.add_header("Authorization", f"token {self.settings['service_token']}")
        if data is not None:
            req.add_header("Content-Type", "application/json")
        try:
            with urllib.request.urlopen(req, timeout=timeout) as answer:  # our own loopback address
                text = answer.read().decode("utf-8", errors="replace")
        except urllib.error.HTTPError as exc:
            said = exc.read().decode("utf-8", errors="replace")[:500]
            raise SlurmlabError(f"the hub answered {exc.code} to {method} {path}: {said}") from None
        return json.loads(text) if text.strip() else None

    def user(self, name: str) -> dict[str, Any]:
        found: dict[str, Any] = self.api("GET", f"/users/{urllib.parse.quote(name)}")
        return found

    def start_server(
        self, name: str, *, ngpus: int = 0, runtime: str = "30", partition: str = "", timeout: float = 150.0
    ) -> str:
        """Spawn ``name``'s server as batchspawner does from the form; waits until it is ready. Its job id."""
        options = {"ngpus": str(ngpus), "runtime": runtime, "partition": partition}
        self.api("POST", f"/users/{urllib.parse.quote(name)}/server", options)
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            server = self.user(name).get("servers", {}).get("")
            if server and server.get("ready"):
                return str((server.get("state") or {}).get("job_id", ""))
            if not server:
                raise SlurmlabError(
                    f"{name}'s server stopped while starting", hint=f"see {self.folder / 'hub.log'}"
                )
            time.sleep(0.5)
        raise SlurmlabError(f"{name}'s server was not ready within {timeout:.0f} s")

    def stop_server(self, name: str, *, timeout: float = 60.0) -> None:
        """Stop ``name``'s server through the hub (batchspawner cancels its job); waits until it is gone."""
        with contextlib.suppress(SlurmlabError):
            self.api("DELETE", f"/users/{urllib.parse.quote(name)}/server")
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            if not self.user(name).get("servers"):
                return
            time.sleep(0.5)
        raise SlurmlabError(f"{name}'s server did not stop within {timeout:.0f} s")

    # ---- its jobs ---------------------------------------------------------------------------------------
    def jobs(self) -> list[HubJob]:
        """The sandbox's active jobs of the hub's users named as the hub's servers are."""
        from slurmlab.slurm.job_queries import list_jobs

        found = list_jobs(self.sandbox().runner(), all_users=True, active_only=True)
        users = set(self.users)
        return [
            HubJob(str(j.job_id), j.user or "", j.state)
            for j in found
            if j.name == JOB_NAME and j.user in users
        ]

    # ---- down -----------------------------------------------------------------------------------------
    def down(self) -> list[str]:
        """Stop everything of the hub: each server (through the hub), the hub, its proxy, any job left. Returns
        what had to be stopped by force after the hub (nothing, normally)."""
        forced: list[str] = []
        if self.alive():
            for name in self.users:
                with contextlib.suppress(SlurmlabError, OSError):
                    self.stop_server(name, timeout=30)
            if processes.stop([self.pid], grace=STOP_GRACE):
                forced.append(f"JupyterHub (pid {self.pid}) would not stop")
        proxy_pid = _read_pid(self.folder / "proxy.pid")
        if (
            proxy_pid
            and processes.alive(proxy_pid)
            and "configurable-http-proxy" in " ".join(processes.cmdline(proxy_pid))
        ):
            processes.stop([proxy_pid])
            forced.append(f"configurable-http-proxy (pid {proxy_pid})")
        with contextlib.suppress(SlurmlabError, OSError):
            forced += self._cancel_jobs()
        for name in (STATE_FILE, "jupyterhub.pid", "proxy.pid"):
            with contextlib.suppress(FileNotFoundError):
                (self.folder / name).unlink()
        return forced

    def _cancel_jobs(self, timeout: float = 30.0) -> list[str]:
        """Cancel what the hub left (its servers' jobs: the hub's users', by the hub's job name)."""
        from slurmlab.slurm.job_queries import cancel_job

        left = self.jobs()
        runner = self.sandbox().runner()
        for job in left:
            # the hub's operator ends jobs it submitted for its users (Slurm lets root and SlurmUser)
            with contextlib.suppress(SlurmlabError):
                cancel_job(job.job_id, runner, only_mine=False)
        deadline = time.monotonic() + timeout
        while left and time.monotonic() < deadline and self.jobs():
            time.sleep(0.5)
        return [f"job {j.job_id} of {j.user} ({j.state})" for j in left]


def _read_pid(path: Path) -> int:
    try:
        text = path.read_text(encoding="utf-8").strip()
    except OSError:
        return 0
    return int(text) if text.isdigit() else 0
