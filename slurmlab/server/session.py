"""The job this Jupyter server runs in (JupyterHub's batchspawner, Open OnDemand), for the sidebar's "this session" row.

Which job it is, is decided as :meth:`slurmlab.slurm.allocation.Allocation.own` decides it for a kernel
(:func:`slurmlab.slurm.own_job.find_own_job`: the environment's ``SLURM_JOB_ID``, confirmed by one ``squeue`` and
by /proc), for the server's own process and once for the server's life: a process does not move into another job.
Its view comes from one ``scontrol show job`` the first time a client asks (its nodes, GPUs and end time are then
known; the client counts down to ``ends_at``). The server asks Slurm nothing more for it: the own-jobs poll lists
the job anyway, and the sidebar takes the row's later changes (a new time limit) from there. A server outside any
job asks Slurm nothing at all.

A job the server's own Slurm knows is shown for the server's own cluster only (a sandbox picked in the sidebar is
another Slurm). The server never cancels it (the cancel route refuses it): stopping the server ends it.
"""

from __future__ import annotations

import asyncio
import time
from collections.abc import Callable
from typing import Any

from slurmlab.errors import SlurmlabError
from slurmlab.server.contract import SessionAnswer
from slurmlab.server.views import job_view
from slurmlab.slurm import identity
from slurmlab.slurm.own_job import OwnJob, find_own_job

__all__ = ["SESSION_WORDS", "ServerSession"]

SESSION_WORDS = (
    "the job this Jupyter server runs in: slurmlab never cancels it; it ends when the server is stopped "
    "(the hub's control panel) or its time runs out, and this session with it"
)
# a job named by the environment that Slurm could not confirm (a controller that did not answer) is asked again
# after this long, not at every request
RETRY_AFTER_S = 300.0


class ServerSession:
    """The server's own job, looked for once (``find``: :func:`find_own_job`, replaceable in tests)."""

    def __init__(
        self,
        source: Any,
        *,
        find: Callable[..., OwnJob] | None = None,
        clock: Callable[[], float] = time.monotonic,
    ) -> None:
        self.source = source  # the own cluster's ClusterSource: its runner, its job detail
        self._find = find
        self._clock = clock
        self._answer: SessionAnswer | None = None
        self._asked_at: float | None = None
        self.checked_at: float | None = None  # when Slurm last said it (wall time, the answer's as_of)
        self._lock: asyncio.Lock | None = None

    @property
    def job_id(self) -> str | None:
        """The job, once known (None: not yet asked, or not inside one)."""
        return self._answer["job_id"] if self._answer is not None else None

    def _due(self) -> bool:
        if self._answer is None:
            return True
        retry = self._answer["problem"] is not None and self._answer["job"] is None
        return retry and self._asked_at is not None and self._clock() - self._asked_at >= RETRY_AFTER_S

    async def answer(self) -> SessionAnswer:
        """What the ``session`` route answers; Slurm is asked the first time only (see the module's words)."""
        if self._lock is None:
            self._lock = asyncio.Lock()
        async with self._lock:  # requests that come together share one look
            if self._due():
                self._answer = await self._look()
                self._asked_at = self._clock()
                self.checked_at = time.time()
            assert self._answer is not None
            return self._answer

    async def _look(self) -> SessionAnswer:
        loop = asyncio.get_running_loop()
        runner = self.source.runner
        find = self._find or find_own_job
        try:  # one squeue, when the environment names a job; the runner blocks: not on the loop
            found: OwnJob = await loop.run_in_executor(None, lambda: find(runner))
        except SlurmlabError as exc:
            return SessionAnswer(job_id=None, job=None, problem=str(exc), words=SESSION_WORDS)
        if found.job_id is None:
            return SessionAnswer(job_id=None, job=None, problem=found.problem, words=SESSION_WORDS)
        try:
            job = await self.source.job(found.job_id)
        except SlurmlabError as exc:
            # known to be this server's job, its detail not read: the sidebar shows the id, and the cancel
            # route refuses it all the same
            problem = f"the job this server runs in ({found.job_id}) could not be read: {exc}"
            return SessionAnswer(job_id=found.job_id, job=None, problem=problem, words=SESSION_WORDS)
        # find_own_job confirmed the job is this uid's with squeue's numeric uid
        view = job_view(job, {job.job_id: identity.current_uid()})
        return SessionAnswer(job_id=found.job_id, job=view, problem=None, words=SESSION_WORDS)
