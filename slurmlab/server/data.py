"""The server's only door to Slurm.

``ClusterSource`` polls through a :class:`~slurmlab.server.worker.PollWorker` (a worker process: the
listing, the views and their encoding never run on Jupyter's event loop) and asks the on-demand questions
of the routes (one job's detail, its owner, cancel, hold, release) through ``slurmlab.slurm.queries`` — their async twins
when present, else the sync query in the loop's default executor. It parses nothing itself; the views
are in :mod:`slurmlab.server.views`.
"""

from __future__ import annotations

import asyncio
from collections.abc import Callable
from typing import Any

from slurmlab.core.slurm.models import Job
from slurmlab.errors import NotYourJobError, SlurmlabError
from slurmlab.server.shared_poll import SharedPollReader
from slurmlab.server.views import job_view, node_view, nodes_view, problem_view
from slurmlab.server.worker import PollOutcome, PollWorker, failed_poll
from slurmlab.slurm import identity, queries

__all__ = [
    "WHO_ARGV",
    "ClusterSource",
    "current_user",
    "job_view",
    "login_from_id",
    "node_view",
    "nodes_view",
    "problem_view",
]

# who the login is on a cluster over SSH, as that login node's own `id` says it: the NUL before the answer keeps a
# login script's chatter (a banner a .bashrc prints to every command) apart from it
WHO_ARGV = ("sh", "-c", "printf '\\0'; id -u; id -un")
WHO_TIMEOUT = 15.0  # seconds: one round trip over a working master, or a link that is down


def current_user() -> str:
    """The Unix user the server runs as (whose jobs the sidebar may cancel)."""
    return identity.current_user()


def login_from_id(stdout: str) -> tuple[int, str] | None:
    """(uid, name) from what :data:`WHO_ARGV` printed: the two words after its NUL; None for anything else."""
    _, marker, answer = stdout.rpartition("\0")
    words = answer.split()
    if not marker or len(words) != 2:
        return None
    uid, name = words
    if not (uid.isascii() and uid.isdigit() and len(uid) <= 10 and name.isprintable()):
        return None
    return int(uid), name


class ClusterSource:
    """The Slurm layer, called without blocking the server's IOLoop: the async twins of the
    queries when they exist, else the sync query in the loop's default executor."""

    def __init__(
        self,
        runner: Any = None,
        *,
        user: str | None = None,
        worker: PollWorker | None = None,
        shared: SharedPollReader | str | None = None,
    ) -> None:
        self.runner = runner
        self._user = user or current_user()
        self.worker = worker if worker is not None else PollWorker()
        # the host's shared poll (slurmlab cluster-cache serve), read instead of polling when it may be trusted;
        # a path names its directory (default: SLURMLAB_SHARED_POLL_DIR or /run/slurmlab/poll)
        self.shared = (
            shared
            if isinstance(shared, SharedPollReader)
            else SharedPollReader.for_runner(runner, self._user, shared)
        )
        self.shared_reads = 0  # polls answered from the shared poll, with no Slurm command of this server's

    @property
    def user(self) -> str:
        """The viewer's name, as the status line and the answers of the job routes say it: over SSH the login's
        on that cluster (its own ``id``; until learnt, the name the address gives), else the server's."""
        link = getattr(self.runner, "ssh", None)
        if link is None:
            return self._user
        if link.remote_user is not None:
            return str(link.remote_user[1])
        return str(link.target.user or self._user)

    async def _call(self, name: str, *args: Any, **kwargs: Any) -> Any:
        runner = self.runner
        afunc: Callable[..., Any] | None = getattr(queries, "a" + name, None)
        if afunc is not None:
            return await afunc(*args, runner=runner, **kwargs)
        func: Callable[..., Any] = getattr(queries, name)
        loop = asyncio.get_running_loop()
        return await loop.run_in_executor(None, lambda: func(*args, runner=runner, **kwargs))

    async def poll(self, version: str | None = None, whole: bool = True) -> PollOutcome:
        """The viewer's own jobs (``squeue -u UID``) and, when ``whole``, the nodes and every job, from one
        listing of each, encoded: asked, built and encoded in the worker, so the event loop only waits. Where
        the host's shared poll is fresh and trustworthy, its files answer instead: every answer, whole or not,
        and no Slurm command of this server's own (:mod:`slurmlab.server.shared_poll`)."""
        if self.shared is not None:
            loop = asyncio.get_running_loop()
            outcome = await loop.run_in_executor(None, self.shared.read)
            if outcome is not None:
                self.shared_reads += 1
                return outcome
        try:
            uid, user = await self.who()
        except SlurmlabError as exc:  # over SSH: the link is down, or its login's `id` said nothing readable
            return failed_poll(exc, version)
        return await self.worker.poll(self.runner, user, uid, version, whole)

    def viewer(self) -> tuple[int, str] | None:
        """Whose jobs are "mine": over SSH the login's uid and name on that cluster as its own ``id`` said them
        (None until then: a uid or name of this machine may be another person's there), else the server's (or
        the process-wide runner's) own."""
        link = getattr(self.runner, "ssh", None)
        if link is None:
            return identity.current_uid(), self._user
        found: tuple[int, str] | None = link.remote_user
        return found

    async def who(self) -> tuple[int, str]:
        """:meth:`viewer`, asking a cluster over SSH once when its link has not learnt it (a master a kernel
        started, or one the link restarted in the background, learnt nothing): ``id`` run there through the
        runner with a timeout, kept on the link. SlurmlabError when the link is down or ``id`` said no
        uid and name."""
        found = self.viewer()
        if found is not None:
            return found
        link = self.runner.ssh
        res = await self.runner.arun(list(WHO_ARGV), timeout=WHO_TIMEOUT)
        learnt = login_from_id(res.stdout)
        if learnt is None:
            raise SlurmlabError(
                f"cannot tell whose jobs are yours on {link.target.url()}: `id -u; id -un` printed "
                f"{res.stdout[-120:]!r}, not a uid and a name",
                hint="check that `id -u; id -un` over ssh to that login prints two lines; "
                "no job there is called yours meanwhile",
            )
        if link.remote_user is None:
            link.remote_user = learnt
        return learnt

    async def owner(self, job_id: str) -> int:
        """The uid that owns ``job_id`` (squeue's ``%U``)."""
        uid: int = await self._call("job_owner_uid", job_id)
        return uid

    async def check_mine(self, job_id: str) -> None:
        """NotYourJobError unless the server's uid owns the job (squeue's uid, not the record); over SSH, the
        uid of the login on that cluster, and nobody's while it is not known yet (a uid of this machine means
        another person there)."""
        link = getattr(self.runner, "ssh", None)
        if link is None:
            await self._call("check_mine", job_id)
            return
        owner = await self.owner(job_id)
        if link.remote_user is None or owner != link.remote_user[0]:
            who = link.remote_user[1] if link.remote_user else "nobody yet (the link is not up)"
            raise NotYourJobError(
                f"job {job_id} belongs to uid {owner} on {link.target.url()}, not to {who}: slurmlab acts only on "
                "your own jobs",
                hint="ask its owner (or the cluster's admins) to cancel it",
            )

    async def job(self, job_id: str) -> Job:
        found: Job = await self._call("job_detail", job_id)
        return found

    async def cancel(self, job_id: str) -> None:
        """scancel ``job_id``. The route has already checked (:meth:`check_mine`) that the
        server's uid owns it, so the Slurm layer is not asked again."""
        await self._call("cancel_job", job_id, only_mine=False)

    async def hold(self, job_id: str) -> None:
        """scontrol uhold ``job_id``, the owner checked by the route as for :meth:`cancel`."""
        await self._call("hold_job", job_id, only_mine=False)

    async def release(self, job_id: str) -> None:
        """scontrol release ``job_id``, the owner checked by the route as for :meth:`cancel`."""
        await self._call("release_job", job_id, only_mine=False)
