"""The hub's JupyterHub configuration, from the settings :mod:`slurmlab.hub.control` writes beside it.

JupyterHub runs the ``jupyterhub_config.py`` of the hub's folder, two lines that call :func:`configure` with the
settings file; everything a site would write in its configuration is here, in one place:

- JupyterHub, its internal API and configurable-http-proxy on 127.0.0.1 only, each on a port chosen free;
- JupyterHub's DummyAuthenticator with one password and only the named users allowed (a test hub: a site uses
  PAM or OAuth; PAM needs the users' real passwords);
- batchspawner's SlurmSpawner (:class:`slurmlab.hub.spawner.SandboxSlurmSpawner`) submitting as the user
  (``runuser -u USER``: the hub runs as root, as it must to submit for others), with the sandbox's
  ``SLURM_CONF`` handed to the job so that the user's server and kernels reach the same Slurm;
- a service token allowed to start and stop servers, for ``slurmlab hub`` and the tests (the REST API);
- idle kernels and servers culled by the single-user server itself (:func:`culling_args`);
- a class's reservation (a workshop's) in every job its students submit (:func:`reservation_environment`).
"""

from __future__ import annotations

import json
import os
import re
from pathlib import Path
from typing import Any

__all__ = [
    "CONFIG_FILE",
    "JOB_NAME",
    "MAX_GPUS",
    "RESERVATION_VARIABLES",
    "SEAT_ARGS",
    "SEAT_MODULE",
    "SETTINGS_FILE",
    "FORM_FIELDS",
    "check_form_settings",
    "config_text",
    "configure",
    "culling_args",
    "jupyter_paths",
    "parse_form",
    "reservation_environment",
    "with_settings",
]

CONFIG_FILE = "jupyterhub_config.py"
SETTINGS_FILE = "settings.json"
SERVICE = "slurmlab-hub"
# the job name of every server the hub spawns (the batch script's): `slurmlab hub down` cancels what is left by it
JOB_NAME = "slurmlab-hub"
_RUNTIME = re.compile(r"^(\d+-)?\d{1,3}(:\d{2}){0,2}$")  # Slurm's --time forms: 30, 1:00:00, 2-00:00:00
_PARTITION = re.compile(r"^[A-Za-z0-9_.-]{1,64}$")
MAX_GPUS = 64
# the fields of the spawn form a teacher may prefill or lock (a workshop's settings file); a reservation is never
# shown, only set
FORM_FIELDS = ("ngpus", "runtime", "partition", "reservation")
# the hub culls what sits idle (culling_args): a kernel idle 30 minutes; a server with no kernel left and no
# activity for 30 minutes (so at most about an hour after a student left)
CULL_IDLE_KERNEL_S = 1800
CULL_IDLE_SERVER_S = 1800
# salloc's, sbatch's and srun's input variables for --reservation (their man pages' INPUT ENVIRONMENT VARIABLES,
# the same names in 22.05, 24.11 and 26.05); Slurm itself never sets them in a job (it writes SLURM_JOB_RESERVATION)
RESERVATION_VARIABLES = ("SALLOC_RESERVATION", "SBATCH_RESERVATION", "SLURM_RESERVATION")
# what each user's job runs first, before the single-user server (its port handshake with the hub)
SEAT_MODULE = "slurmlab.hub.seat"
# the single-user server's options:
# - jupyter_lsp looks for language servers at every start (it runs `npm prefix -g` and probes some thirty known
#   ones: 0.1 CPU-s a server, measured) and none is installed in the hub's environment; one named in the config
#   still starts;
# - a kernel's ports are reserved until it binds them (slurmlab.hub.kernels: thirty servers on one node starting
#   kernels at once otherwise lost a port now and then, and the kernel hung, never answering)
SEAT_ARGS = (
    "--LanguageServerManager.autodetect=False",
    "--MappingKernelManager.kernel_manager_class=slurmlab.hub.kernels.SeatKernelManager",
)


def config_text(settings_path: Path) -> str:
    """The ``jupyterhub_config.py`` JupyterHub runs: it reads ``settings_path`` through :func:`configure`."""
    return (
        "from slurmlab.hub.settings import configure\n"
        f"configure(get_config(), {str(settings_path)!r})  # noqa: F821 (JupyterHub provides get_config)\n"
    )


def configure(c: Any, settings_path: str) -> None:
    """Set JupyterHub's configuration object ``c`` from the JSON settings at ``settings_path``."""
    s: dict[str, Any] = json.loads(Path(settings_path).read_text(encoding="utf-8"))
    folder = Path(s["folder"])
    loopback = "127.0.0.1"

    c.JupyterHub.bind_url = f"http://{loopback}:{s['port']}"
    c.JupyterHub.hub_ip = loopback
    c.JupyterHub.hub_port = s["hub_port"]
    c.JupyterHub.db_url = f"sqlite:///{folder / 'jupyterhub.sqlite'}"
    c.JupyterHub.cookie_secret_file = str(folder / "jupyterhub_cookie_secret")
    c.JupyterHub.pid_file = str(folder / "jupyterhub.pid")
    c.JupyterHub.cleanup_servers = True  # stopping the hub stops (scancels) every server it spawned
    c.ConfigurableHTTPProxy.api_url = f"http://{loopback}:{s['proxy_api_port']}"
    c.ConfigurableHTTPProxy.command = [s["proxy"]]
    c.ConfigurableHTTPProxy.pid_file = str(folder / "proxy.pid")
    c.ConfigurableHTTPProxy.auth_token = s["proxy_token"]
    c.ConfigurableHTTPProxy.should_start = True

    if s.get("seat_hashes"):  # a workshop: each seat's password checked against its hash (slurmlab.hub.auth)
        c.JupyterHub.authenticator_class = "slurmlab.hub.auth.SeatAuthenticator"
        c.SeatAuthenticator.hashes_file = s["seat_hashes"]
    else:
        c.JupyterHub.authenticator_class = "dummy"
        c.DummyAuthenticator.password = s["password"]
    admins = list(s.get("admins") or [])
    c.Authenticator.allowed_users = set(s["users"]) | set(admins)
    c.Authenticator.admin_users = set(admins)
    if admins:  # a teacher is a hub name, not a seat: no server is ever spawned for them
        c.Spawner.pre_spawn_hook = _seats_only(list(s["users"]))

    c.JupyterHub.services = [{"name": SERVICE, "api_token": s["service_token"]}]
    roles = [
        {
            "name": "slurmlab-hub-control",
            "scopes": [
                "admin:users",
                "admin:servers",
                "admin:server_state",
                "list:users",
                "read:users",
                "access:servers",
            ],
            "services": [SERVICE],
        }
    ]
    for extra in s.get("services") or []:
        c.JupyterHub.services.append(_managed_service(extra))
        roles.append(
            {"name": f"{extra['name']}-service", "scopes": extra["scopes"], "services": [extra["name"]]}
        )
    c.JupyterHub.load_roles = roles

    c.JupyterHub.spawner_class = "slurmlab.hub.spawner.SandboxSlurmSpawner"
    c.SandboxSlurmSpawner.exec_prefix = f"{s['runuser']} -u {{username}} --"
    c.SandboxSlurmSpawner.daemon_resolver = dict.fromkeys(s["nodes"], loopback)
    c.SandboxSlurmSpawner.partitions = dict.fromkeys(s["partitions"], True)
    c.SandboxSlurmSpawner.form_settings = s.get("form") or {}
    # slurmlab's stand-in for batchspawner's wrapper (slurmlab.hub.seat: the same port handshake, less CPU per
    # server), then the single-user server's script, both run by that Python (``run_path``): the users' Python
    # may not be the one whose path the scripts' first line names
    c.SandboxSlurmSpawner.batchspawner_singleuser_cmd = f"{s['python']} -m {SEAT_MODULE}"
    c.SandboxSlurmSpawner.startup_poll_interval = 0.5
    c.Spawner.cmd = [s["singleuser"]]
    c.Spawner.args = (["--allow-root"] if "root" in s["users"] else []) + culling_args(s) + list(SEAT_ARGS)
    c.Spawner.default_url = "/lab"
    c.Spawner.start_timeout = s.get("start_timeout", 120)
    c.Spawner.http_timeout = s.get("start_timeout", 120)
    # what the job needs of the hub's environment: the sandbox's Slurm, this Python's packages
    c.Spawner.env_keep = ["PATH", "LANG", "LC_ALL", "SLURM_CONF"]
    c.Spawner.environment = {
        "PYTHONPATH": s["pythonpath"],
        **jupyter_paths(s["jupyter_prefix"]),
        **reservation_environment((s.get("form") or {}).get("reservation", {}).get("value", "")),
        **{str(k): str(v) for k, v in (s.get("environment") or {}).items()},
    }
    os.environ.setdefault("SLURM_CONF", s["slurm_conf"])


def culling_args(s: dict[str, Any]) -> list[str]:
    """The single-user server's own culling, as its command-line options: a kernel idle for
    ``cull_idle_kernel_s`` is shut down (its allocations released with it), even with a browser tab still
    connected (a class leaves tabs open over lunch), a busy one never; a server with no kernel and no activity
    for ``cull_idle_server_s`` stops, which ends its Slurm job and frees the seat's share. No extra service or
    package: jupyter_server does both. 0 turns either off."""
    kernel_s = int(s.get("cull_idle_kernel_s", CULL_IDLE_KERNEL_S))
    server_s = int(s.get("cull_idle_server_s", CULL_IDLE_SERVER_S))
    out = []
    if kernel_s > 0:
        out += [
            f"--MappingKernelManager.cull_idle_timeout={kernel_s}",
            f"--MappingKernelManager.cull_interval={min(60, kernel_s)}",
            "--MappingKernelManager.cull_connected=True",
            "--MappingKernelManager.cull_busy=False",
        ]
    if server_s > 0:
        out.append(f"--ServerApp.shutdown_no_activity_timeout={server_s}")
    return out


def _managed_service(extra: dict[str, Any]) -> dict[str, Any]:
    """A service the hub starts and proxies at ``/services/NAME/`` (a workshop's teacher's view), on loopback."""
    return {
        "name": extra["name"],
        "url": f"http://127.0.0.1:{extra['port']}",
        "command": list(extra["command"]),
        "environment": dict(extra.get("environment") or {}),
        "oauth_no_confirm": True,
        "display": True,
    }


def _seats_only(seats: list[str]) -> Any:
    def refuse_others(spawner: Any) -> None:
        if spawner.user.name not in seats:
            raise ValueError(f"{spawner.user.name} has no server on this hub: only the seats do")

    return refuse_others


def reservation_environment(reservation: str) -> dict[str, str]:
    """What puts every job a student's server, kernels and terminals submit into the class's ``reservation``: the
    input variables of salloc, sbatch and srun (:data:`RESERVATION_VARIABLES`), handed to the server's job with
    the rest of the spawner's environment; nothing without a reservation. An option typed by the student
    (``--reservation=…``) still wins over them, as Slurm's command line does over its environment."""
    if not reservation:
        return {}
    return dict.fromkeys(RESERVATION_VARIABLES, str(reservation))


def jupyter_paths(prefix: str) -> dict[str, str]:
    """Where Jupyter finds the environment's configuration (JupyterLab's and slurmlab's server extensions are
    enabled there), its lab extensions and kernel specs, for a Python whose own prefix is elsewhere."""
    return {
        "JUPYTER_CONFIG_PATH": str(Path(prefix) / "etc" / "jupyter"),
        "JUPYTER_PATH": str(Path(prefix) / "share" / "jupyter"),
    }


def parse_form(
    form: dict[str, list[str]], partitions: list[str], reservations: tuple[str, ...] = ()
) -> dict[str, str]:
    """The job the form asks for, checked: ``ngpus`` a whole number, ``runtime`` in one of Slurm's time forms,
    ``partition`` one of the cluster's, ``reservation`` (only where the teacher set one) one of ``reservations``.
    A wrong value raises ValueError with what was wrong (JupyterHub shows it above the form)."""

    def first(name: str, default: str = "") -> str:
        values = form.get(name) or [default]
        return str(values[0]).strip()

    ngpus = first("ngpus", "0") or "0"
    if not ngpus.isdigit() or int(ngpus) > MAX_GPUS:
        raise ValueError(f"GPUs must be a whole number from 0 to {MAX_GPUS}, not {ngpus!r}")
    runtime = first("runtime", "1:00:00")
    if not _RUNTIME.match(runtime):
        raise ValueError(f"time must be minutes or [D-]HH:MM:SS (e.g. 30, 1:00:00), not {runtime!r}")
    partition = first("partition", partitions[0] if partitions else "")
    if partition and (not _PARTITION.match(partition) or (partitions and partition not in partitions)):
        raise ValueError(f"no partition {partition!r} here; choose one of: {', '.join(partitions)}")
    parsed = {"ngpus": str(int(ngpus)), "runtime": runtime, "partition": partition}
    reservation = first("reservation")
    if reservation:
        if reservation not in reservations or not _PARTITION.match(reservation):
            raise ValueError(f"no reservation {reservation!r} for this hub")
        parsed["reservation"] = reservation
    return parsed


def check_form_settings(raw: Any, partitions: list[str]) -> dict[str, dict[str, Any]]:
    """A teacher's form settings, checked: ``{field: {"value": V, "locked": bool}}`` for fields of
    :data:`FORM_FIELDS`; each value must pass :func:`parse_form`. Anything else raises ValueError saying what."""
    if not isinstance(raw, dict):
        raise ValueError(
            'the form settings must be a JSON object such as {"ngpus": {"value": 1, "locked": true}}'
        )
    out: dict[str, dict[str, Any]] = {}
    for name, entry in raw.items():
        if name not in FORM_FIELDS:
            raise ValueError(f"the form has no field {name!r}; its fields: {', '.join(FORM_FIELDS)}")
        if not isinstance(entry, dict) or "value" not in entry or set(entry) - {"value", "locked"}:
            raise ValueError(f'{name}: write {{"value": ..., "locked": true|false}}, not {entry!r}')
        locked = entry.get("locked", False)
        if not isinstance(locked, bool):
            raise ValueError(f"{name}: locked must be true or false, not {locked!r}")
        out[name] = {"value": str(entry["value"]).strip(), "locked": locked}
    reservations = (out["reservation"]["value"],) if "reservation" in out else ()
    parse_form({k: [v["value"]] for k, v in out.items()}, partitions, reservations)  # raises what is wrong
    return out


def with_settings(asked: dict[str, list[str]], settings: dict[str, dict[str, Any]]) -> dict[str, list[str]]:
    """The form as sent, with the teacher's ``settings`` applied: a locked field takes its set value whatever
    was sent (a form edited in the browser, or the REST API), a missing field its prefilled one."""
    out = dict(asked)
    for name, entry in settings.items():
        if entry.get("locked") or not [v for v in out.get(name, []) if str(v).strip()]:
            out[name] = [str(entry["value"])]
    return out
