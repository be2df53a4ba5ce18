"""Wires the routes and the one poller per cluster into a running Jupyter server.

Site settings (issue 27: what the server asks the shared controller) are the traits of :class:`SlurmlabServer`,
set in ``jupyter_server_config.py`` (``c.SlurmlabServer.poll_interval = 30``) or its JSON twin; docs/admin.md
lists them. Each may also come from ``c.ServerApp.tornado_settings`` or the environment (``slurmlab_poll_interval``
/ ``SLURMLAB_POLL_INTERVAL`` ...), for a user's own server; a trait set in the config wins over both.

The clusters it shows are the one of its own ``SLURM_CONF`` and the running slurmlab sandboxes of its user
(:mod:`slurmlab.server.clusters`), one poller each (:mod:`slurmlab.server.hub`); ``slurmlab_poller`` is
the own cluster's.
"""

from __future__ import annotations

import os
from typing import Any

from traitlets import Float, Unicode
from traitlets.config import Configurable

from slurmlab.errors import SlurmlabError
from slurmlab.server.clusters import ClusterDirectory
from slurmlab.server.handlers import routes
from slurmlab.server.hub import ClusterHub
from slurmlab.server.kernels import KernelWatch
from slurmlab.server.poller import (
    DEFAULT_CLUSTER_INTERVAL,
    DEFAULT_IDLE_AFTER,
    DEFAULT_INTERVAL,
    ClusterPoller,
)
from slurmlab.server.worker import mode_from, shutdown

__all__ = ["SlurmlabServer", "load", "setting", "unload"]


class SlurmlabServer(Configurable):
    """What slurmlab's server extension asks of Slurm, and how often (``c.SlurmlabServer.<trait>``)."""

    poll_interval = Float(
        DEFAULT_INTERVAL,
        help="Seconds between two listings of the viewer's own jobs (squeue -u its uid, as --me), while a client asks.",
    ).tag(config=True)
    cluster_poll_interval = Float(
        DEFAULT_CLUSTER_INTERVAL,
        help="Seconds between two whole-cluster listings (every node, every job: the GPU map and 'all jobs'), "
        "while a client asks for them; never shorter than poll_interval.",
    ).tag(config=True)
    idle_after = Float(
        DEFAULT_IDLE_AFTER,
        help="Seconds without a client request after which the server asks Slurm nothing.",
    ).tag(config=True)
    poll_worker = Unicode(
        "auto", help="Where a poll runs: 'process' (a real Slurm's default), 'thread' or 'auto'."
    ).tag(config=True)


def setting(settings: dict[str, Any], key: str, env: str, default: float) -> float:
    raw = settings.get(key, os.environ.get(env))
    if raw is None:
        return default
    try:
        value = float(raw)
    except (TypeError, ValueError):
        raise SlurmlabError(
            f"{key} must be a number of seconds, got {raw!r}",
            hint=f"set c.SlurmlabServer.{key.removeprefix('slurmlab_')} = 5 in jupyter_server_config.py",
        ) from None
    if value <= 0:
        raise SlurmlabError(f"{key} must be positive, got {raw!r}")
    return value


def _seconds(config: SlurmlabServer, trait: str, settings: dict[str, Any], env: str) -> float:
    """A trait set in the config; else the tornado setting or the environment; else the trait's default."""
    value = float(getattr(config, trait))
    if trait in config.config.get("SlurmlabServer", {}):
        if value <= 0:
            raise SlurmlabError(f"c.SlurmlabServer.{trait} must be positive, got {value!r}")
        return value
    return setting(settings, f"slurmlab_{trait}", env, value)


def load(serverapp: Any) -> ClusterPoller:
    web_app = serverapp.web_app
    settings = web_app.settings
    config = SlurmlabServer(parent=serverapp)
    worker = config.poll_worker if "poll_worker" in config.config.get("SlurmlabServer", {}) else None
    hub = ClusterHub(
        ClusterDirectory(),
        interval=_seconds(config, "poll_interval", settings, "SLURMLAB_POLL_INTERVAL"),
        cluster_interval=_seconds(
            config, "cluster_poll_interval", settings, "SLURMLAB_CLUSTER_POLL_INTERVAL"
        ),
        idle_after=_seconds(config, "idle_after", settings, "SLURMLAB_IDLE_AFTER"),
        worker_mode=mode_from(worker if worker is not None else settings.get("slurmlab_poll_worker")),
    )
    poller = hub.own
    settings["slurmlab_hub"] = hub
    settings["slurmlab_poller"] = poller
    settings["slurmlab_kernels"] = KernelWatch(
        getattr(serverapp, "kernel_manager", None),
        getattr(serverapp, "kernel_spec_manager", None),
        str(getattr(serverapp, "root_dir", "") or ""),
    )
    web_app.add_handlers(".*$", routes(settings["base_url"]))
    serverapp.log.info(
        "slurmlab: routes at %sslurmlab/api/; asking Slurm for the user's jobs every %gs and for the whole "
        "cluster every %gs, only while a client asks; showing %s",
        settings["base_url"],
        poller.interval,
        poller.cluster_interval,
        poller.cluster["label"] if poller.cluster else "?",
    )
    return poller


def unload(serverapp: Any) -> None:
    hub = serverapp.web_app.settings.get("slurmlab_hub")
    if hub is not None:
        hub.stop()
    watch = serverapp.web_app.settings.get("slurmlab_kernels")
    if watch is not None:
        watch.stop()
    shutdown()
