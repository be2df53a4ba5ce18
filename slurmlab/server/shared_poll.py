"""One poll per host: a trusted service lists the cluster once, every Jupyter server of the host reads it (issue 27).

Ten Jupyter servers on one login node (JupyterHub's single-user servers, several users) each polling Slurm cost
the shared controller ten times one. Instead ``slurmlab cluster-cache serve`` (run by root or Slurm's SlurmUser,
as a systemd service: docs/admin.md) lists every job and node once per interval and writes, into a directory
only it can write:

* ``public.json``: what every user may see. Slurm's ``PrivateData`` (``scontrol show config``) decides what that
  is: with ``jobs`` private no job is listed there (and the nodes carry no job ids); with ``nodes`` private no
  node is.
* ``user-UID.json``: that user's own jobs (and, when jobs are private, the nodes as that user may see them),
  mode 0600 and owned by the user, so that no other user can read it; the directory is root's (0755), so the
  user cannot create, rename or replace a file there. A user who edits their own file misleads only their own
  sidebar; acting on a job (cancel, hold) asks Slurm for its owner again.

A reader (:class:`SharedPollReader`, used by :class:`slurmlab.server.data.ClusterSource`) takes the files only
when they are fresh and trustworthy: the directory and its parents owned by root or the SlurmUser of the
cluster's slurm.conf and writable by nobody else (a sticky parent such as /tmp excepted), the public file owned
by the writer, the own file by the writer or the viewer, neither writable by group or others, neither a symlink
(opened with O_NOFOLLOW under the directory's descriptor), and written for the same slurm.conf. Otherwise it
says why once in the log and the server polls Slurm itself, as without a service.
"""

from __future__ import annotations

import contextlib
import errno
import json
import logging
import os
import pwd
import re
import stat
import tempfile
import threading
import time
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from slurmlab.core.request.option_versions import version_text
from slurmlab.errors import SlurmlabError
from slurmlab.server.contract import JobView, NodeView, ProblemView
from slurmlab.server.nodetracker import NodeViews
from slurmlab.server.views import problem_view
from slurmlab.server.worker import ClusterMemory, PollOutcome, encode_answers
from slurmlab.slurm import identity, queries
from slurmlab.slurm.controller import config_text
from slurmlab.slurm.runner import Runner

__all__ = [
    "DEFAULT_DIR",
    "DIR_ENV",
    "FORMAT",
    "PUBLIC",
    "SharedPollReader",
    "SharedPollService",
    "parse_private_data",
    "trusted_writers",
    "user_file",
]

DIR_ENV = "SLURMLAB_SHARED_POLL_DIR"
DEFAULT_DIR = "/run/slurmlab/poll"
PUBLIC = "public.json"
FORMAT = 1
# one listing of the cluster a minute, as one sidebar's whole poll (poller.DEFAULT_CLUSTER_INTERVAL): the host's
# servers together then cost what one server does (4 RPCs a minute on 22.05: squeue and sinfo, 2 each)
DEFAULT_SERVICE_INTERVAL = 60.0
# a file older than this many of its writer's intervals is stale (the service stopped or hangs)
STALE_INTERVALS = 3
# how often the service reads PrivateData again (scontrol show config: one REQUEST_BUILD_INFO)
CONFIG_EVERY_S = 600.0
DEFAULT_CONF = "/etc/slurm/slurm.conf"

log = logging.getLogger("slurmlab.server")


def user_file(uid: int) -> str:
    return f"user-{int(uid)}.json"


_PRIVATE = re.compile(r"^\s*PrivateData\s*=\s*(.*?)\s*$", re.MULTILINE | re.IGNORECASE)


def parse_private_data(config_text: str) -> frozenset[str]:
    """The words of ``PrivateData`` in ``scontrol show config``'s text (``none`` or absent: nothing private).
    A text without the line at all is taken as everything private: better a listing too few than one too many."""
    found = _PRIVATE.search(config_text)
    if found is None:
        return frozenset({"jobs", "nodes"})
    words = {w.strip().lower() for w in found.group(1).split(",") if w.strip()}
    return frozenset(words - {"none", "(null)"})


def _conf_of(runner: Any) -> str:
    """The slurm.conf a runner's commands read (Slurm's default when none is set)."""
    configured = getattr(runner, "configuration", None)
    conf = configured() if callable(configured) else os.environ.get("SLURM_CONF")
    return os.path.realpath(conf or DEFAULT_CONF)


def _uid_of_name(name: str | None) -> int | None:
    if not name:
        return None
    try:
        return pwd.getpwnam(name).pw_uid
    except KeyError:
        return int(name) if name.isdigit() else None  # squeue prints the uid when passwd has no name


def trusted_writers(conf: str) -> frozenset[int]:
    """Who may write the shared poll: root, and the SlurmUser that ``conf`` names (when it can be read)."""
    uids = {0}
    with contextlib.suppress(OSError, UnicodeDecodeError):
        for line in Path(conf).read_text().splitlines():
            key, _, value = line.partition("=")
            if key.strip().lower() == "slurmuser" and value.split("#")[0].strip():
                found = _uid_of_name(value.split("#")[0].strip())
                if found is not None:
                    uids.add(found)
    return frozenset(uids)


# ---- the checks a reader makes -------------------------------------------------------------------------------
class Untrusted(Exception):
    """Why the shared poll is not used; ``kind`` keys the one log line."""

    def __init__(self, kind: str, message: str) -> None:
        super().__init__(message)
        self.kind = kind


def _check_owner_mode(
    what: str, st: os.stat_result, owners: frozenset[int], *, sticky_ok: bool = False
) -> None:
    if st.st_uid not in owners:
        raise Untrusted(
            "owner", f"{what} is owned by uid {st.st_uid}, not by root or SlurmUser ({sorted(owners)})"
        )
    if st.st_mode & (stat.S_IWGRP | stat.S_IWOTH) and not (sticky_ok and st.st_mode & stat.S_ISVTX):
        raise Untrusted(
            "writable", f"{what} is writable by its group or by others (mode {st.st_mode & 0o7777:o})"
        )


def _check_directory(directory: Path, owners: frozenset[int]) -> None:
    st = os.lstat(directory)
    if stat.S_ISLNK(st.st_mode):
        raise Untrusted("symlink", f"{directory} is a symlink")
    if not stat.S_ISDIR(st.st_mode):
        raise Untrusted("type", f"{directory} is not a directory")
    _check_owner_mode(str(directory), st, owners)
    # a parent its owner or anyone else could rename would let them put another directory in its place
    for parent in directory.parents:
        pst = os.lstat(parent)
        if stat.S_ISLNK(pst.st_mode):
            raise Untrusted("symlink", f"{parent} (a parent of {directory}) is a symlink")
        _check_owner_mode(f"{parent} (a parent of {directory})", pst, owners, sticky_ok=True)


def _read_file(dir_fd: int, name: str, owners: frozenset[int]) -> dict[str, Any] | None:
    """The JSON of ``name`` under the directory, None when there is none; Untrusted when it may not be used."""
    try:
        fd = os.open(name, os.O_RDONLY | os.O_NOFOLLOW | os.O_NONBLOCK, dir_fd=dir_fd)
    except FileNotFoundError:
        return None
    except OSError as exc:  # ELOOP: O_NOFOLLOW met a symlink
        if exc.errno == errno.ELOOP:
            raise Untrusted("symlink", f"{name} is a symlink") from None
        raise Untrusted("unreadable", f"{name} cannot be read ({exc.strerror})") from None
    with os.fdopen(fd, "rb") as handle:
        st = os.fstat(handle.fileno())
        if not stat.S_ISREG(st.st_mode):
            raise Untrusted("type", f"{name} is not a regular file")
        _check_owner_mode(name, st, owners)
        raw = handle.read()
    try:
        data = json.loads(raw)
    except (ValueError, UnicodeDecodeError):
        raise Untrusted("unreadable", f"{name} is not JSON") from None
    if not isinstance(data, dict) or data.get("format") != FORMAT:
        raise Untrusted("format", f"{name} is not a shared poll of format {FORMAT}")
    return data


@dataclass
class SharedPollReader:
    """Reads the shared poll for one viewer and one cluster; None from :meth:`read` means poll Slurm yourself."""

    directory: Path
    conf: str  # the slurm.conf the viewer's commands read: the files must be for it
    uid: int
    user: str
    clock: Any = time.time
    _said: set[str] = field(default_factory=set)
    _using: bool = False

    @classmethod
    def for_runner(cls, runner: Any, user: str, directory: str | None = None) -> SharedPollReader | None:
        """The reader for a server's runner, or None where no shared poll can apply (a remote Slurm over SSH)."""
        if getattr(runner, "ssh", None) is not None:
            return None
        where = directory or os.environ.get(DIR_ENV) or DEFAULT_DIR
        return cls(Path(where), _conf_of(runner), identity.current_uid(), user)

    def _say(self, kind: str, message: str) -> None:
        self._using = False
        if kind not in self._said:
            self._said.add(kind)
            log.warning(
                "slurmlab: not using the shared poll at %s: %s; polling Slurm itself", self.directory, message
            )

    def read(self) -> PollOutcome | None:
        """The answers of the shared poll, or None (absent, stale, untrusted: said once, the caller polls)."""
        if not self.directory.exists():
            return None  # no service on this host: the ordinary case, nothing to say
        try:
            outcome = self._read()
        except Untrusted as why:
            self._say(why.kind, str(why))
            return None
        except OSError as exc:
            self._say("unreadable", f"{exc.strerror}: {exc.filename or self.directory}")
            return None
        if not self._using:
            self._using = True
            log.info("slurmlab: using the shared poll at %s (no listing of its own)", self.directory)
        return outcome

    def _read(self) -> PollOutcome:
        writers = trusted_writers(self.conf)
        _check_directory(self.directory, writers)
        dir_fd = os.open(self.directory, os.O_RDONLY | os.O_DIRECTORY | os.O_NOFOLLOW)
        try:
            public = _read_file(dir_fd, PUBLIC, writers)
            if public is None:
                raise Untrusted("missing", f"{PUBLIC} is missing (the service has not written yet)")
            self._check_public(public)
            own = _read_file(dir_fd, user_file(self.uid), writers | {self.uid})
        finally:
            os.close(dir_fd)
        if own is not None and (
            own.get("uid") != self.uid or float(own.get("written_at") or 0) < float(public["written_at"])
        ):
            own = None  # a round older than the public file's (not the service's way): the public one only
        return self._outcome(public, own)

    def _check_public(self, public: Mapping[str, Any]) -> None:
        if os.path.realpath(str(public.get("slurm_conf") or DEFAULT_CONF)) != self.conf:
            raise Untrusted("cluster", f"it is for {public.get('slurm_conf')}, not {self.conf}")
        written = float(public.get("written_at") or 0)
        every = max(1.0, float(public.get("interval") or DEFAULT_SERVICE_INTERVAL))
        age = self.clock() - written
        if age > STALE_INTERVALS * every:
            raise Untrusted(
                "stale", f"{PUBLIC} is {age:.0f} s old (stale: the service writes every {every:g} s)"
            )

    def _outcome(self, public: Mapping[str, Any], own: Mapping[str, Any] | None) -> PollOutcome:
        problems: list[ProblemView] = list(public.get("problems") or [])
        everyone: list[JobView] | None = public.get("jobs")
        own_jobs: list[JobView]
        if own is not None:
            own_jobs = list(own.get("jobs") or [])
        elif everyone is not None:
            own_jobs = [j for j in everyone if j.get("user") == self.user]
        else:
            own_jobs = []  # jobs private and no file: the service writes one for every user with a job
        mine_ids = {j["job_id"] for j in own_jobs}
        shown = own_jobs if everyone is None else everyone
        jobs = [{**j, "mine": j["job_id"] in mine_ids} for j in shown]
        nodes: list[NodeView] = list((own or {}).get("nodes") or public.get("nodes") or [])
        answers = encode_answers(nodes, jobs, problems, self.user)  # type: ignore[arg-type]
        return PollOutcome(public.get("version"), answers, tuple(p["message"] for p in problems))


# ---- the service ---------------------------------------------------------------------------------------------
def _write_json(dir_fd: int, name: str, data: Mapping[str, Any], owner: int | None = None) -> None:
    """Write ``name`` under the directory at once (a temporary file renamed over it): 0644 root's, or 0600 and
    ``owner``'s."""
    fd, tmp = tempfile.mkstemp(prefix=".tmp-", dir=f"/proc/self/fd/{dir_fd}")
    tmp_name = os.path.basename(tmp)
    try:
        with os.fdopen(fd, "wb") as handle:
            handle.write(json.dumps(data, separators=(",", ":"), default=str).encode())
            if owner is None:
                os.fchmod(handle.fileno(), 0o644)
            else:
                os.fchmod(handle.fileno(), 0o600)
                os.fchown(handle.fileno(), owner, -1)
        os.replace(tmp_name, name, src_dir_fd=dir_fd, dst_dir_fd=dir_fd)
    except BaseException:
        with contextlib.suppress(OSError):
            os.unlink(tmp_name, dir_fd=dir_fd)
        raise


class SharedPollService:
    """Polls the whole cluster once per ``interval`` and writes the shared files (run by root or SlurmUser)."""

    def __init__(self, directory: str | Path, runner: Any = None, interval: float = DEFAULT_SERVICE_INTERVAL):
        if interval <= 0:
            raise SlurmlabError(f"the shared poll's interval must be positive, got {interval!r}")
        self.directory = Path(directory)
        self.runner = runner if runner is not None else Runner()
        self.interval = float(interval)
        self.memory = ClusterMemory()
        self.private: frozenset[str] | None = None
        self._config_at = 0.0
        self.version: str | None = None
        self.writes = 0

    def prepare(self) -> None:
        """Make the directory (0755) and refuse one that readers would refuse."""
        if os.geteuid() != 0 and os.geteuid() not in trusted_writers(_conf_of(self.runner)):
            raise SlurmlabError(
                "the shared poll must be written by root or Slurm's SlurmUser (readers trust no one else)",
                hint="run `slurmlab cluster-cache serve` as root (a systemd service: docs/admin.md)",
            )
        self.directory.mkdir(mode=0o755, parents=True, exist_ok=True)
        try:
            _check_directory(self.directory, trusted_writers(_conf_of(self.runner)))
        except Untrusted as why:
            raise SlurmlabError(
                f"readers would refuse the shared poll's directory: {why}",
                hint=f"chown root:root {self.directory} && chmod 0755 {self.directory}",
            ) from None

    def _private_data(self) -> frozenset[str]:
        now = time.monotonic()
        if self.private is None or now - self._config_at > CONFIG_EVERY_S:
            text = config_text(self.runner)
            self.private, self._config_at = parse_private_data(text), now
        return self.private

    def once(self) -> None:
        """One poll of the whole cluster, written: the own files first, then the public one (which readers check
        the own files' round against)."""
        private = self._private_data()
        if self.version is None:
            self.version = version_text(queries.slurm_version(self.runner))
        nodes = self.memory.nodes.poll(self.runner)
        self.memory.jobs.viewer = ""  # nobody's: each reader marks its own jobs
        found = self.memory.jobs.poll(self.runner, {}, -1, {})
        jobs_private = "jobs" in private
        node_problems = [problem_view(p, "node") for p in nodes.problems]
        shown_nodes: Sequence[Any] = [] if "nodes" in private else nodes
        written_at = time.time()
        head = {
            "format": FORMAT,
            "written_at": written_at,
            "interval": self.interval,
            "version": self.version,
        }
        head["slurm_conf"] = _conf_of(self.runner)
        by_uid: dict[int, list[int]] = {}
        for n, view in enumerate(found.views):
            uid = _uid_of_name(view.get("user"))
            if uid is not None:
                by_uid.setdefault(uid, []).append(n)
        dir_fd = os.open(self.directory, os.O_RDONLY | os.O_DIRECTORY | os.O_NOFOLLOW)
        try:
            for uid, rows in by_uid.items():
                own: dict[str, Any] = {**head, "uid": uid, "jobs": [found.views[n] for n in rows]}
                if jobs_private:  # the nodes with this user's jobs only
                    own["nodes"] = NodeViews().build(shown_nodes, [found.jobs[n] for n in rows])[0]
                _write_json(dir_fd, user_file(uid), own, owner=uid)
            self._forget_users(dir_fd, set(by_uid))
            public = {
                **head,
                "private_data": sorted(private),
                "jobs": None if jobs_private else found.views,
                "nodes": NodeViews().build(shown_nodes, [] if jobs_private else found.jobs)[0],
                "problems": node_problems + ([] if jobs_private else found.problems),
            }
            _write_json(dir_fd, PUBLIC, public)
        finally:
            os.close(dir_fd)
        self.writes += 1

    def _forget_users(self, dir_fd: int, keep: set[int]) -> None:
        """Remove the files of users who have no job any more (so that no old job lingers in their view)."""
        for name in os.listdir(dir_fd):
            m = re.fullmatch(r"user-(\d+)\.json", name)
            if m and int(m.group(1)) not in keep:
                with contextlib.suppress(FileNotFoundError):
                    os.unlink(name, dir_fd=dir_fd)

    def serve(self, stop: threading.Event | None = None) -> None:
        """Poll and write every ``interval`` seconds until ``stop`` is set; a failed poll is logged and retried
        (readers find the files stale after a few and poll Slurm themselves)."""
        stop = stop or threading.Event()
        self.prepare()
        while not stop.is_set():
            started = time.monotonic()
            try:
                self.once()
            except SlurmlabError as exc:
                log.warning("slurmlab cluster-cache: poll failed: %s", exc)
            stop.wait(max(0.0, self.interval - (time.monotonic() - started)))
