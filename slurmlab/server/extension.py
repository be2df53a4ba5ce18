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

from traitlets import Dict, Float, List, Unicode, Union
from traitlets.config import Configurable

from slurmlab.errors import SlurmlabError
from slurmlab.server import hub as cluster_hub
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
from slurmlab.server.remote import RemoteClusters
from slurmlab.server.worker import mode_from, shutdown

__all__ = ["SlurmlabServer", "load", "setting", "unload"]


class SlurmlabServer(Configurable):
    """What slurmlab's server extension asks of Slurm, and how often (``c.SlurmlabServer.<trait>``)."""

    # What each poll costs slurmctld is said in the help (admins size these by it): counted with sdiag on the
    # 22.05 sandbox, see slurmlab.server.poller's constants.
    poll_interval = Float(
        DEFAULT_INTERVAL,
        help="Seconds between two listings of the viewer's own jobs, while a client asks: 'squeue -u UID' (2 RPCs "
        "to slurmctld: JOB_INFO + PARTITION_INFO), plus 'scontrol show job -d ID' (2 RPCs) for a job that is "
        "new or whose nodes changed. On Slurm 22.05 that squeue costs the controller a whole-queue listing, so "
        "the own jobs come from the whole-cluster listing every cluster_poll_interval instead. No RPC at all "
        "while the host's shared poll ('slurmlab cluster-cache serve') answers. A slow or rate-limiting "
        "controller stretches it up to 4x.",
    ).tag(config=True)
    cluster_poll_interval = Float(
        DEFAULT_CLUSTER_INTERVAL,
        help="Seconds between two whole-cluster listings, only while a client shows the GPU map or 'all jobs' "
        "(and on Slurm 22.05 for the own jobs too): 'squeue' of every job and 'sinfo -N' (4 RPCs: JOB_INFO, "
        "NODE_INFO and a PARTITION_INFO each), plus 'scontrol show job -d' of the jobs that are new or whose "
        "nodes changed (2 RPCs a job; one listing when many are). Never shorter than poll_interval.",
    ).tag(config=True)
    idle_after = Float(
        DEFAULT_IDLE_AFTER,
        help="Seconds without a client request (a hidden tab, a collapsed or closed sidebar) after which the "
        "server asks Slurm nothing: 0 RPCs until a client asks again.",
    ).tag(config=True)
    poll_worker = Unicode(
        "auto", help="Where a poll runs: 'process' (a real Slurm's default), 'thread' or 'auto'."
    ).tag(config=True)
    ssh_clusters = List(
        Union([Unicode(), Dict()]),
        help="Clusters on other machines the sidebar's picker lists, each ssh://user@login.example[:port] or "
        '{"url": "ssh://...", "slurm_conf": "/path/there"} (slurmlab.server.remote): logins by key or agent '
        "only; one that needs a password or code is connected from a notebook with %slurm use, whose "
        "connection the server then shares.",
    ).tag(config=True)
    ssh_config = Unicode(
        None,
        allow_none=True,
        help="An ssh_config file for those logins in place of ~/.ssh/config (None: ssh's own).",
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
    remote = RemoteClusters(config.ssh_clusters, config=config.ssh_config)
    hub = ClusterHub(
        ClusterDirectory(remote=remote.views),
        # a cluster over SSH polls through its link's runner; any other as the hub makes it (looked up at the
        # call, as the hub itself does)
        make_runner=lambda cluster: remote.runner(cluster["id"]) or cluster_hub.runner_for(cluster),
        interval=_seconds(config, "poll_interval", settings, "SLURMLAB_POLL_INTERVAL"),
        cluster_interval=_seconds(
            config, "cluster_poll_interval", settings, "SLURMLAB_CLUSTER_POLL_INTERVAL"
        ),
        idle_after=_seconds(config, "idle_after", settings, "SLURMLAB_IDLE_AFTER"),
        worker_mode=mode_from(worker if worker is not None else settings.get("slurmlab_poll_worker")),
    )
    poller = hub.own
    settings["slurmlab_hub"] = hub
    settings["slurmlab_remote"] = remote
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
    remote = serverapp.web_app.settings.get("slurmlab_remote")
    if remote is not None:
        remote.close()
    watch = serverapp.web_app.settings.get("slurmlab_kernels")
    if watch is not None:
        watch.stop()
    shutdown()
