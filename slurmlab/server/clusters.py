"""The clusters this server can show: the Slurm of its own environment (``SLURM_CONF``), the slurmlab
sandboxes of this user running on this machine and the clusters over SSH its settings name
(:mod:`slurmlab.server.remote`, listed last with their link's state).

The server may not import the sandbox room (README, Layout), so the sandboxes are found the way every other
process finds them: by the files a sandbox writes for others to read — ``state.json`` in its folder under
the default place (``$XDG_RUNTIME_DIR/slurmlab/sandbox/<profile>``, else ``~/.cache/slurmlab/sandbox/…``,
where ``%slurm sandbox up`` puts it) and the ``slurm.conf`` it names. A test holds :func:`sandbox_base` and
the state file's keys to the sandbox's own (``tests/unit/server/test_clusters.py``).

A sandbox counts as running while the slurmctld its state file names is alive; one stopped, or left by a
crashed machine, drops out of the list at the next look.
"""

from __future__ import annotations

import json
import os
import re
import time
from collections import Counter
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from slurmlab.core.gpu.hardware_profile import HARDWARE_FILE
from slurmlab.errors import SlurmlabError
from slurmlab.server.contract import ClusterView
from slurmlab.slurm import identity

__all__ = [
    "OWN",
    "ClusterDirectory",
    "UnknownClusterError",
    "cluster_name",
    "find_clusters",
    "label_of",
    "own_configuration",
    "running_sandboxes",
    "sandbox_base",
]

OWN = "default"  # the id that always means the server's own Slurm
SLURM_DEFAULT_CONF = "/etc/slurm/slurm.conf"  # where Slurm looks without SLURM_CONF
STATE_FILE = "state.json"  # the sandbox's state file (slurmlab.sandbox.state_file.STATE_FILE)
_CLUSTER_NAME = re.compile(r"^\s*ClusterName\s*=\s*(\S+)", re.IGNORECASE | re.MULTILINE)


class UnknownClusterError(SlurmlabError):
    """A ``cluster=`` id the server does not know (the route answers 400 with the known ones)."""


def sandbox_base() -> Path:
    """Where sandboxes live unless told otherwise (the same place as ``slurmlab.sandbox.folder.base_directory``)."""
    runtime = os.environ.get("XDG_RUNTIME_DIR")
    if runtime and os.access(runtime, os.W_OK):
        return Path(runtime) / "slurmlab" / "sandbox"
    return Path.home() / ".cache" / "slurmlab" / "sandbox"


def cluster_name(conf_text: str) -> str | None:
    """``ClusterName`` of a slurm.conf's text (the last one wins, as in Slurm); None when it has none."""
    found = _CLUSTER_NAME.findall(re.sub(r"#.*", "", conf_text))
    return found[-1] if found else None


def label_of(name: str | None, sandbox: str | None) -> str:
    """What the sidebar calls a cluster: its ClusterName, and the sandbox's profile when it is one.

    A sandbox's own ClusterName is "sandbox": "sandbox · sandbox dgx-h100" said it twice (issue 28), so a
    sandbox under that name (or none) is just "sandbox dgx-h100"."""
    if sandbox:
        return f"sandbox {sandbox}" if name in (None, "sandbox") else f"{name} · sandbox {sandbox}"
    return name or "this server's Slurm"


def _read(path: Path) -> str | None:
    try:
        return path.read_text(errors="replace")
    except OSError:
        return None


def _json(path: Path) -> dict[str, Any] | None:
    text = _read(path)
    if text is None:
        return None
    try:
        data = json.loads(text)
    except ValueError:
        return None
    return data if isinstance(data, dict) else None


def _alive(pid: object, program: str) -> bool:
    """Whether ``pid`` runs ``program`` (a pid the kernel gave to another program since is not alive)."""
    if not isinstance(pid, int) or pid <= 0:
        return False
    cmdline = _read(Path(f"/proc/{pid}/cmdline"))
    if cmdline is not None:
        return program in cmdline
    try:
        os.kill(pid, 0)
    except PermissionError:
        return True
    except OSError:
        return False
    return True


def _sandbox_profile(folder: Path) -> str | None:
    """The profile of the sandbox whose slurm.conf is in ``folder``: from its state file, else its hardware file."""
    state = _json(folder / STATE_FILE)
    if state is not None and isinstance(state.get("profile"), str):
        return str(state["profile"])
    hardware = _json(folder / HARDWARE_FILE)
    profile = hardware.get("profile") if hardware is not None else None
    name = profile.get("name") if isinstance(profile, dict) else None
    return name if isinstance(name, str) else None


def _view(cid: str, conf: str | None, *, own: bool, sandbox: str | None = None) -> ClusterView:
    text = _read(Path(conf or SLURM_DEFAULT_CONF))
    name = cluster_name(text) if text is not None else None
    if sandbox is None and conf is not None:
        sandbox = _sandbox_profile(Path(conf).parent)
    return ClusterView(id=cid, name=name, sandbox=sandbox, label=label_of(name, sandbox), conf=conf, own=own)


def _same_file(a: str | None, b: str | None) -> bool:
    return a is not None and b is not None and os.path.realpath(a) == os.path.realpath(b)


def running_sandboxes(base: Path | None = None, uid: int | None = None) -> list[tuple[str, str, str]]:
    """(folder name, profile, slurm.conf) of each sandbox of ``uid`` (default: the server's) running under
    ``base``; a folder that is not a readable sandbox of that user is passed over."""
    base = sandbox_base() if base is None else base
    uid = identity.current_uid() if uid is None else uid
    found = []
    try:
        folders = sorted(p for p in base.iterdir() if p.is_dir())
    except OSError:
        return []
    for folder in folders:
        state = _json(folder / STATE_FILE)
        if state is None:
            continue
        try:
            if (folder / STATE_FILE).stat().st_uid != uid:
                continue
        except OSError:
            continue
        conf, profile, pids = state.get("conf_path"), state.get("profile"), state.get("pids")
        if not (isinstance(conf, str) and isinstance(profile, str) and isinstance(pids, dict)):
            continue
        if _alive(pids.get("slurmctld"), "slurmctld") and Path(conf).is_file():
            found.append((folder.name, profile, conf))
    return found


def _sandbox_folders(own_conf: str | None, base: Path | None) -> list[Path]:
    """Where to look for sandboxes: the default place, and the folder holding the server's own sandbox when
    it is one elsewhere (a test session's, or one started with ``--dir``): ``%slurm sandbox up OTHER`` puts a
    second profile beside the one in use, and the sidebar must follow it there."""
    folders = [sandbox_base() if base is None else base]
    if own_conf is not None:
        own_folder = Path(own_conf).parent
        if (own_folder / STATE_FILE).is_file():
            beside = own_folder.parent
            if all(os.path.realpath(beside) != os.path.realpath(f) for f in folders):
                folders.append(beside)
    return folders


def find_clusters(own_conf: str | None, base: Path | None = None) -> list[ClusterView]:
    """The server's own cluster first, then every other running sandbox (under ``base`` and beside the own
    sandbox). The own cluster keeps the id of the sandbox it is, when it is one of those found; ``default``
    names it in any case. Ids stay unique: a second folder of the same name gets a numbered id."""
    sandboxes: list[tuple[str, str, str]] = []
    seen_confs: set[str] = set()
    ids: set[str] = {OWN}
    for folder_base in _sandbox_folders(own_conf, base):
        for folder, profile, conf in running_sandboxes(folder_base):
            real = os.path.realpath(conf)
            if real in seen_confs:
                continue
            seen_confs.add(real)
            cid, n = f"sandbox-{folder}", 2
            while cid in ids:
                cid, n = f"sandbox-{folder}-{n}", n + 1
            ids.add(cid)
            sandboxes.append((cid, profile, conf))
    own_id = next((cid for cid, _, conf in sandboxes if _same_file(conf, own_conf)), OWN)
    views = [_view(own_id, own_conf, own=True)]
    for cid, profile, conf in sandboxes:
        if not _same_file(conf, own_conf):
            views.append(_view(cid, conf, own=False, sandbox=profile))
    return _told_apart(views)


def _told_apart(views: list[ClusterView]) -> list[ClusterView]:
    """Two sandboxes of one profile (one in the default place, one beside the server's own) would read alike in
    the picker: such labels name their folder. The server's own cluster keeps its label: it is the one the
    sidebar opens on, and the others, named by folder, no longer read like it."""
    counts = Counter(v["label"] for v in views)
    for view in views:
        if counts[view["label"]] > 1 and view["conf"] and not view["own"]:
            view["label"] = f"{view['label']} in {Path(view['conf']).parent}"
    return views


@dataclass
class _Look:
    at: float
    views: list[ClusterView]


def own_configuration() -> str | None:
    """The slurm.conf of the server's own Slurm: the process-wide runner's (its ``SLURM_CONF``)."""
    from slurmlab.slurm.runner import get_runner

    return get_runner().configuration()


class ClusterDirectory:
    """The clusters, looked up again at most every ``ttl`` seconds (a glob and a few small files): a sandbox
    started in a notebook shows up at the sidebar's next poll."""

    def __init__(
        self,
        own_conf: Callable[[], str | None] = own_configuration,
        *,
        base: Path | None = None,
        ttl: float = 1.0,
        finder: Callable[[str | None, Path | None], list[ClusterView]] = find_clusters,
        remote: Callable[[], list[ClusterView]] | None = None,
    ) -> None:
        self.own_conf = own_conf
        self.base = base
        self.ttl = ttl
        self._finder = finder
        # the clusters over SSH of the settings, each with its link's state (slurmlab.server.remote), listed last
        self._remote = remote
        self._look: _Look | None = None

    def clusters(self) -> list[ClusterView]:
        now = time.monotonic()
        if self._look is None or now - self._look.at > self.ttl:
            views = self._finder(self.own_conf(), self.base)
            if self._remote is not None:
                views += self._remote()
            self._look = _Look(now, views)
        return list(self._look.views)

    @property
    def default(self) -> ClusterView:
        return self.clusters()[0]

    def find(self, cid: str | None) -> ClusterView:
        """The cluster ``cid`` names (none or ``default``: the server's own); UnknownClusterError naming the
        known ones otherwise."""
        views = self.clusters()
        if not cid or cid == OWN:
            return views[0]
        for view in views:
            if view.get("id") == cid:
                return view
        raise UnknownClusterError(
            f"unknown cluster {cid!r}; this server knows: {known_list(views)}",
            hint="pick one in the sidebar; a sandbox shows up once it runs (`%slurm sandbox up PROFILE`)",
        )


def known_list(views: Sequence[ClusterView]) -> str:
    return ", ".join(f"{v['id']} ({v['label']})" for v in views)
