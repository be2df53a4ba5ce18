"""Clusters on other machines, over SSH, that the server's settings name (``c.SlurmlabServer.ssh_clusters``).

Each one is a :class:`RemoteCluster`: one :class:`~slurmlab.slurm.ssh.SshLink` (OpenSSH, one multiplexed
connection, ``StrictHostKeyChecking=yes``: an unknown or changed host key is refused, never accepted) and a
``Runner(ssh=link)`` that its poller asks Slurm through, as a kernel's ``%slurm use ssh://…`` does.

Why the settings and not a record of the kernels' ``%slurm use``: the kernels keep no such record, and one
written by a kernel for the server to read would be a file that lists where the user logs in, kept in step by
two processes. The settings name the clusters once; a cluster a kernel connected to is still shared: the master
connection's socket is named after the address in the user's private folder
(:attr:`SshLink.control_path`), so the server's link to the same address rides on the kernel's connection.

The server never asks for a secret: its logins use keys and the agent only (``BatchMode``). A cluster that
needs a password, a one-time code or a host key checked shows "needs a login" and the ``%slurm use`` that
connects it from a notebook, rather than a server waiting on a prompt nobody sees. A link found down is
reconnected in the background by the link itself (:meth:`SshLink.failure`), with back-off; its state
(:attr:`SshLink.state`: up, down since when and reconnecting, needs a login) goes with the cluster in the
``clusters`` answer (:class:`LinkView`).

That answer is read from the link's state, never from ssh: the picker's answer comes from the server's event
loop, for every ``clusters`` request and every route that names a cluster, and ``ssh -O check`` there (a
process, up to its 10 s timeout) would hold every other request of the server meanwhile. The state is what
commands over the link, its login and its reconnect found; where they cannot tell (an up link nobody polls, whose
master may have died; one that needs a login, which a notebook may have given on the shared socket), the link
looks again in a thread of its own, at most every :data:`LOOK_EVERY` seconds (:meth:`SshLink.look_in_background`),
and the answer after that look says what it found.
"""

from __future__ import annotations

import re
import threading
from collections.abc import Mapping, Sequence

from slurmlab.errors import SlurmlabError
from slurmlab.server.contract import ClusterView, LinkView
from slurmlab.server.data import WHO_ARGV, WHO_TIMEOUT, login_from_id
from slurmlab.slurm.runner import Runner
from slurmlab.slurm.ssh import LinkState, SshLink, SshLinkError, SshTarget

__all__ = ["LOOK_EVERY", "RemoteCluster", "RemoteClusters", "SshRunner", "cluster_id"]

# seconds between two looks at an up (or needs-a-login) link's master for the picker, each in a thread of the
# link's: a master that died with nobody polling its cluster is said within this and the directory's 1 s
LOOK_EVERY = 2.0


def cluster_id(target: SshTarget) -> str:
    """The ``cluster=`` id of a cluster over SSH: ``ssh-user@host-port`` in characters a URL keeps as they are."""
    words = f"ssh-{target.user + '@' if target.user else ''}{target.host}" + (
        f"-{target.port}" if target.port else ""
    )
    return re.sub(r"[^A-Za-z0-9@._-]", "_", words)


class SshRunner(Runner):
    """A :class:`Runner` over one cluster's link whose polls run in a thread of the server, not in the poll
    worker process (:meth:`PollWorker.uses_process` takes only a plain Runner there): a rebuilt runner in that
    process would hold a second link object to the same connection, and both would start a master when it
    went down. One link per cluster keeps one reconnect, one "down since", one learnt remote user."""


def _refuse_prompt(prompt: str) -> str:
    """The server's answer to a prompt (never asked: its ssh runs with BatchMode)."""
    raise SshLinkError(f"the server asks no password or code ({prompt.strip()[:80]})")


class RemoteCluster:
    """One cluster over SSH: its link, its runner and the link's state for the picker."""

    def __init__(
        self, url: str, *, slurm_conf: str | None = None, config: str | None = None, ssh: str = "ssh"
    ) -> None:
        target = SshTarget.parse(url)
        self.url = target.url()
        # keys and the agent only: a prompt would wait for nobody (the server has no notebook to ask in)
        self.link = SshLink(target, options={"BatchMode": "yes"}, config=config, ask=_refuse_prompt, ssh=ssh)
        # slurm_conf: the SLURM_CONF there, where the login's own environment does not set the right one
        self.runner: Runner = SshRunner(ssh=self.link, slurm_conf=slurm_conf)
        self.id = cluster_id(target)
        self._learning: threading.Thread | None = None
        self._lock = threading.Lock()

    def view(self) -> ClusterView:
        """The cluster as the ``clusters`` answer lists it, with its link's state as of now."""
        label = self.url.removeprefix("ssh://")
        return ClusterView(
            id=self.id,
            name=None,
            sandbox=None,
            label=label,
            conf=self.runner.slurm_conf,
            own=False,
            link=self.link_view(),
        )

    def link_view(self) -> LinkView:
        """The link's state as it stands (:attr:`SshLink.state`; no ssh on the caller's thread). A link never
        started is started in the background (keys and agent only); an up one is looked at again in the
        background, at most every :data:`LOOK_EVERY` s (see the module's words)."""
        link = self.link
        if link.state is LinkState.NOT_CONNECTED:
            link.connect_in_background()
        else:
            link.look_in_background(LOOK_EVERY)
        state, since = link.state, link.down_since
        if state is LinkState.UP:
            self._learn_user()
            return LinkView(url=self.url, state="up", since=None, message=None)
        if state is LinkState.CONNECTING:
            return LinkView(
                url=self.url,
                state="connecting",
                since=since,
                message=f"connecting to {self.url} (keys and agent only)",
            )
        if state is LinkState.RECONNECTING:
            return LinkView(
                url=self.url,
                state="down",
                since=since,
                message=link.down_words() or f"the link to {self.url} is down; reconnecting",
            )
        # needs a login (or closed, as the server's own links are only when it stops): for a person to connect
        return LinkView(
            url=self.url,
            state="needs_login",
            since=since,
            message=f"needs a login: connect it from a notebook with %slurm use {self.url} "
            "(a password, a one-time code or a new host key is for you to answer; the server asks none)",
        )

    def _learn_user(self) -> None:
        """Whose jobs are "mine" there: the login's uid and name on the cluster. A master the server started
        learnt them at its login; one a kernel started (shared) or the link restarted in the background did not,
        so they are asked once, away from the server's event loop."""
        with self._lock:
            if self.link.remote_user is not None or (self._learning and self._learning.is_alive()):
                return
            self._learning = threading.Thread(target=self._ask_user, name="slurmlab-ssh-id", daemon=True)
            self._learning.start()

    def _ask_user(self) -> None:
        # the one way the server asks a login who it is (ClusterSource.who asks the same for a poll)
        try:
            res = self.runner.run(list(WHO_ARGV), timeout=WHO_TIMEOUT, check=False)
        except SlurmlabError:
            return  # the link went down meanwhile: asked again once it is up
        learnt = login_from_id(res.stdout) if res.returncode == 0 else None
        if learnt is not None:
            self.link.remote_user = learnt

    def close(self) -> None:
        """Close the server's connection (a kernel's sessions on it end too; nothing on the cluster is touched)."""
        self.link.disconnect()


def _entry(entry: object) -> tuple[str, str | None]:
    """(address, slurm.conf there) of one entry of the settings: ``"ssh://…"`` or
    ``{"url": "ssh://…", "slurm_conf": "/etc/slurm/slurm.conf"}``."""
    if isinstance(entry, str):
        return entry, None
    if isinstance(entry, Mapping) and isinstance(entry.get("url"), str):
        conf = entry.get("slurm_conf")
        if conf is None or isinstance(conf, str):
            return entry["url"], conf or None
    raise SlurmlabError(
        f"an entry of ssh_clusters is neither an ssh:// address nor a url/slurm_conf pair: {entry!r:.120}",
        hint='give "ssh://user@login.example" or {"url": "ssh://user@login.example", '
        '"slurm_conf": "/etc/slurm/slurm.conf"}',
    )


class RemoteClusters:
    """The clusters over SSH that the settings name, by id, in the order given (a repeated address once)."""

    def __init__(
        self, entries: Sequence[object] = (), *, config: str | None = None, ssh: str = "ssh"
    ) -> None:
        self._by_id: dict[str, RemoteCluster] = {}
        for entry in entries:
            url, slurm_conf = _entry(entry)
            cluster = RemoteCluster(url, slurm_conf=slurm_conf, config=config, ssh=ssh)
            self._by_id.setdefault(cluster.id, cluster)

    def views(self) -> list[ClusterView]:
        return [cluster.view() for cluster in self._by_id.values()]

    def runner(self, cid: str) -> Runner | None:
        """The runner of the cluster ``cid`` over SSH; None for any other id."""
        found = self._by_id.get(cid)
        return found.runner if found is not None else None

    def close(self) -> None:
        for cluster in self._by_id.values():
            cluster.close()
