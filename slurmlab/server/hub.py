"""One poller per cluster the sidebar looks at, made when a client first asks for that cluster.

The server's own cluster asks Slurm through the process-wide runner (as it always has); a sandbox through a
runner pointed at its slurm.conf. A poller whose cluster is gone (its sandbox stopped) is stopped and
dropped; every poller stops asking Slurm by itself once no client has asked for a while (``idle_after``).
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from slurmlab.server.clusters import ClusterDirectory
from slurmlab.server.contract import ClusterView
from slurmlab.server.data import ClusterSource
from slurmlab.server.poller import (
    DEFAULT_CLUSTER_INTERVAL,
    DEFAULT_IDLE_AFTER,
    DEFAULT_INTERVAL,
    ClusterPoller,
)
from slurmlab.server.session import ServerSession
from slurmlab.server.worker import PollWorker, WorkerMode
from slurmlab.slurm.runner import Runner

__all__ = ["ClusterHub", "runner_for"]


def runner_for(cluster: ClusterView) -> Runner | None:
    """The runner of a cluster's commands: None (the process-wide one) for the server's own Slurm."""
    if cluster["own"]:
        return None
    return Runner(slurm_conf=cluster["conf"])


class ClusterHub:
    def __init__(
        self,
        directory: ClusterDirectory,
        *,
        interval: float = DEFAULT_INTERVAL,
        cluster_interval: float = DEFAULT_CLUSTER_INTERVAL,
        idle_after: float = DEFAULT_IDLE_AFTER,
        make_runner: Callable[[ClusterView], Any] | None = None,
        worker_mode: WorkerMode | None = None,
    ) -> None:
        self.directory = directory
        self.worker = PollWorker(worker_mode)
        self.interval = interval
        self.cluster_interval = cluster_interval
        self.idle_after = idle_after
        self._make_runner = make_runner
        self._pollers: dict[str, ClusterPoller] = {}
        self.own = self._new(directory.default)
        # the job this server runs in, on its own Slurm (slurmlab.server.session): looked for once
        self.session = ServerSession(self.own.source)

    def _new(self, cluster: ClusterView) -> ClusterPoller:
        make_runner = self._make_runner or runner_for
        poller = ClusterPoller(
            ClusterSource(make_runner(cluster), worker=self.worker),
            interval=self.interval,
            cluster_interval=self.cluster_interval,
            idle_after=self.idle_after,
            cluster=cluster,
        )
        if not cluster["own"]:
            self._pollers[cluster["id"]] = poller
        return poller

    def poller(self, cid: str | None) -> ClusterPoller:
        """The poller of the cluster ``cid`` names (UnknownClusterError when none)."""
        cluster = self.directory.find(cid)
        self._forget_gone()
        if cluster["own"]:
            self.own.cluster = cluster  # its label follows the config (a sandbox restarted in place)
            return self.own
        found = self._pollers.get(cluster["id"])
        if found is None or found.cluster is None or found.cluster["conf"] != cluster["conf"]:
            if found is not None:
                found.stop()
            found = self._new(cluster)
        return found

    def _forget_gone(self) -> None:
        known = {c["id"] for c in self.directory.clusters()}
        for cid, poller in list(self._pollers.items()):
            if cid not in known:
                poller.stop()
                del self._pollers[cid]

    def stop(self) -> None:
        for poller in [self.own, *self._pollers.values()]:
            poller.stop()
