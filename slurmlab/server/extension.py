"""Wires the routes and the one poller into a running Jupyter server.

Settings (``c.ServerApp.tornado_settings`` or the environment):
``slurmlab_poll_interval`` / ``SLURMLAB_POLL_INTERVAL`` seconds between polls (default 5),
``slurmlab_idle_after`` / ``SLURMLAB_IDLE_AFTER`` seconds without a client before polling pauses,
``slurmlab_poll_worker`` / ``SLURMLAB_POLL_WORKER`` where polls run: ``process`` (a worker process, the
default for a real Slurm), ``thread``, or ``auto``.

The clusters it shows are the one of its own ``SLURM_CONF`` and the running slurmlab sandboxes of its user
(:mod:`slurmlab.server.clusters`), one poller each (:mod:`slurmlab.server.hub`); ``slurmlab_poller`` is
the own cluster's.
"""

from __future__ import annotations

import os
from typing import Any

from slurmlab.errors import SlurmlabError
from slurmlab.server.clusters import ClusterDirectory
from slurmlab.server.handlers import routes
from slurmlab.server.hub import ClusterHub
from slurmlab.server.poller import DEFAULT_IDLE_AFTER, DEFAULT_INTERVAL, ClusterPoller
from slurmlab.server.worker import mode_from, shutdown

__all__ = ["load", "setting", "unload"]


def setting(settings: dict[str, Any], key: str, env: str, default: float) -> float:
    raw = settings.get(key, os.environ.get(env))
    if raw is None:
        return default
    try:
        value = float(raw)
    except (TypeError, ValueError):
        raise SlurmlabError(
            f"{key} must be a number of seconds, got {raw!r}",
            hint=f"set c.ServerApp.tornado_settings = {{'{key}': 5}} or {env}=5",
        ) from None
    if value <= 0:
        raise SlurmlabError(f"{key} must be positive, got {raw!r}")
    return value


def load(serverapp: Any) -> ClusterPoller:
    web_app = serverapp.web_app
    settings = web_app.settings
    hub = ClusterHub(
        ClusterDirectory(),
        interval=setting(settings, "slurmlab_poll_interval", "SLURMLAB_POLL_INTERVAL", DEFAULT_INTERVAL),
        idle_after=setting(settings, "slurmlab_idle_after", "SLURMLAB_IDLE_AFTER", DEFAULT_IDLE_AFTER),
        worker_mode=mode_from(settings.get("slurmlab_poll_worker")),
    )
    poller = hub.own
    settings["slurmlab_hub"] = hub
    settings["slurmlab_poller"] = poller
    web_app.add_handlers(".*$", routes(settings["base_url"]))
    serverapp.log.info(
        "slurmlab: routes at %sslurmlab/api/, polling Slurm every %gs once asked; showing %s",
        settings["base_url"],
        poller.interval,
        poller.cluster["label"] if poller.cluster else "?",
    )
    return poller


def unload(serverapp: Any) -> None:
    hub = serverapp.web_app.settings.get("slurmlab_hub")
    if hub is not None:
        hub.stop()
    shutdown()
