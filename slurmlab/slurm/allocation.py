"""Allocations that live as long as the kernel.

``Allocation`` submits ``salloc --no-shell`` in the background and returns at once: salloc
prints the job id as soon as the controller has queued it, even while the job pends. A
unique job name and a ``slurmlab:`` comment tag identify it, so a restarted kernel can
find what it left behind. State comes from the shared :mod:`poller`; steps run with
``srun --jobid=J --overlap`` and stream their output line by line.

The class reads as the lifecycle; each part of the work lives beside it: submitting and the salloc
process (:mod:`.allocation_submit`), following the state (:mod:`.allocation_state`), steps
(:mod:`.allocation_steps`), release and the exit hooks (:mod:`.allocation_release`), the tag and the jobs
dead kernels left (:mod:`.allocation_leftovers`), display (:mod:`.allocation_display`). This module stays
the one place to import them from.
"""

from __future__ import annotations

import logging
import os
import subprocess
import threading
import time
import uuid
from collections.abc import Callable, Iterable, Sequence
from typing import TYPE_CHECKING

from slurmlab.core.diagnosis.alternatives import Alternative
from slurmlab.core.gpu.usage import UsageTable
from slurmlab.core.request.request import GpuRequest
from slurmlab.core.slurm.job_view import JobView, job_view
from slurmlab.core.slurm.models import Job
from slurmlab.core.slurm.squeue_brief import JobBrief
from slurmlab.errors import SlurmError
from slurmlab.slurm import allocation_display, allocation_release, allocation_state, allocation_steps
from slurmlab.slurm.allocation_display import DISPLAY_HOOKS
from slurmlab.slurm.allocation_leftovers import TAG_PREFIX, find_leftovers, make_tag
from slurmlab.slurm.allocation_probes import AllocationProbes
from slurmlab.slurm.allocation_release import RELEASE_DEADLINE, RELEASE_SIGNALS, release_all
from slurmlab.slurm.allocation_state import ENDED_STATES
from slurmlab.slurm.allocation_submit import (
    check_request,
    find_id_by_name,
    kill_salloc,
    known_version,
    may_still_be_made,
    not_created,
    request_to_submit,
    salloc_argv,
    start_salloc,
)
from slurmlab.slurm.allocation_why import PendingWhy, resubmit_allocation, why_pending
from slurmlab.slurm.poller import JobPoller, JobUpdate, Watch, get_poller
from slurmlab.slurm.runner import Runner, get_runner
from slurmlab.slurm.steps import OutputCallback, RunningStep, StepResult

if TYPE_CHECKING:
    from slurmlab.core.diagnosis.ended import Ended

__all__ = [
    "DISPLAY_HOOKS",
    "ENDED_STATES",
    "RELEASE_DEADLINE",
    "RELEASE_SIGNALS",
    "TAG_PREFIX",
    "Allocation",
    "RunningStep",
    "StepResult",
    "check_request",
    "find_leftovers",
    "known_version",
    "make_tag",
    "release_all",
    "salloc_argv",
]

log = logging.getLogger(__name__)

Subscriber = Callable[["Allocation"], None]


class Allocation(AllocationProbes):
    """One Slurm allocation owned by this process (kernel).

    Create with :meth:`submit` (new) or :meth:`attach` (an existing job id).
    ``state`` is ``SUBMITTING`` until the controller answered, then Slurm's job state
    (``PENDING``, ``RUNNING``, ...) until an ended state.
    """

    def __init__(
        self,
        job_id: str | None = None,
        *,
        argv: Sequence[str] = (),
        runner: Runner | None = None,
        poller: JobPoller | None = None,
        name: str | None = None,
        tag: str | None = None,
        release_at_exit: bool = True,
    ) -> None:
        self.runner = runner or get_runner()
        self.poller = poller or get_poller(runner)
        self.request_argv: tuple[str, ...] = tuple(argv)
        self.name = name
        self.tag = tag
        self.release_at_exit = release_at_exit
        self.job_id: str | None = str(job_id) if job_id is not None else None
        self.state = "SUBMITTING" if job_id is None else "UNKNOWN"
        self.reason: str | None = None
        self.error: str | None = None  # Slurm's own message when something failed
        # nodes of this running job that are down, draining or not responding: ((node, state), ...)
        self.node_alerts: tuple[tuple[str, str], ...] = ()
        self.brief: JobBrief | None = None  # latest cheap poll
        self.job: Job | None = None  # latest full detail (scontrol show job -d)
        self.submitted_at = time.time()
        self.updated_at: float | None = None
        self.salloc_messages: list[str] = []
        self._lookup_error: SlurmError | None = None
        self.warnings: list[str] = []  # what validation noticed but let through
        self.replaced_by: Allocation | None = None  # set by resubmit: the panel follows the new job
        # what slurmlab did that Slurm's state alone does not say (a cancel a controller restart lost, redone)
        self.note: str | None = None
        self.released_at: float | None = None  # when this process last asked Slurm to cancel the job
        self._following_release = False  # the release is looked at until Slurm has saved it
        self._salloc: subprocess.Popen[str] | None = None
        self._watch: Watch | None = None
        self._subscribers: list[Subscriber] = []
        self._cond = threading.Condition()
        self._id_known = threading.Event()
        self._steps: list[StepResult] = []
        self._owner_pid = os.getpid()  # a forked child must never release its parent's allocations
        self._guard_key = uuid.uuid4().hex
        allocation_release.register(self)

    # ---- creation ------------------------------------------------------------------------------
    @classmethod
    def submit(
        cls,
        request: Sequence[str] | GpuRequest = (),
        *,
        runner: Runner | None = None,
        poller: JobPoller | None = None,
        name: str | None = None,
        id_timeout: float = 10.0,
        release_at_exit: bool = True,
        validate: bool = True,
    ) -> Allocation:
        """Submit ``salloc --no-shell <request>`` in the background and return once the job id is known.

        ``request`` is a GpuRequest from :func:`check_request` (its job name, if any, inside it), or salloc
        tokens (``['--gpus=2', '-t', '30']``; ``name`` then names the job, as a first ``--job-name``). Either
        goes through the one request pipeline: its values, its contradictions, and what the live cluster offers
        (partitions, GPU types, counts); a RequestError naming every problem and its fix is raised before
        anything is submitted. A GpuRequest that pipeline already checked against the cluster, unchanged since,
        is not checked twice. ``validate=False`` (tokens only) hands the tokens to Slurm unchecked, for Slurm to
        decide. Returns in well under a second for a job that must pend. Raises AllocationError with Slurm's
        message when the controller rejects the request.
        """
        argv, name, warnings = request_to_submit(request, name=name, runner=runner, validate=validate)
        tag = make_tag()
        name = name or f"slurmlab-{tag.rsplit(':', 1)[1]}"
        alloc = cls(argv=argv, runner=runner, poller=poller, name=name, tag=tag, release_at_exit=release_at_exit)
        alloc.warnings = list(warnings)
        alloc._guard()  # before salloc runs: a kernel killed while it waits must not leave the job
        start_salloc(alloc)
        if not alloc._id_known.wait(id_timeout):
            # salloc can be slow to print; look the job up by its unique name
            find_id_by_name(alloc)
        if alloc.job_id is None:
            kill_salloc(alloc._salloc)
            if may_still_be_made(alloc):
                allocation_release.follow_given_up(alloc)  # a job made late is cancelled, not left running
            else:
                alloc._unguard()  # Slurm refused the request: there will be no job
            raise not_created(alloc) from alloc._lookup_error
        return alloc

    @classmethod
    def attach(
        cls, job_id: str | int, *, runner: Runner | None = None, poller: JobPoller | None = None,
        release_at_exit: bool = False,
    ) -> Allocation:
        """Follow an existing job (e.g. one left by a previous kernel)."""
        from slurmlab.core.slurm.jobid import check_job_id

        alloc = cls(check_job_id(job_id), runner=runner, poller=poller, release_at_exit=release_at_exit)
        alloc._id_known.set()
        alloc._guard()
        alloc._start_watch()
        return alloc

    # ---- the guardian: cancels what is registered if this process dies without releasing ---------
    def _guard(self, salloc_pid: int | None = None) -> None:
        allocation_release.guard(self, salloc_pid)

    def _unguard(self) -> None:
        allocation_release.unguard(self)

    def _start_watch(self) -> None:
        if self._watch is None and self.job_id is not None:
            self._watch = self.poller.watch(self.job_id, self._on_update)

    def _resume_watch(self) -> None:
        """Follow the job's state again after its watch ended (the job came back after a controller restart)."""
        if self._watch is not None and not self._watch.active:
            self._watch = None
        self._start_watch()

    # ---- state ---------------------------------------------------------------------------------
    def _on_update(self, update: JobUpdate) -> None:
        allocation_state.apply_update(self, update)

    def _set_state(self, state: str) -> None:
        with self._cond:
            self.state = state
            self._cond.notify_all()
        self._notify()

    def subscribe(self, callback: Subscriber) -> Callable[[], None]:
        """Call ``callback(self)`` after every change (from the poller thread). Returns an unsubscribe."""
        self._subscribers.append(callback)

        def unsubscribe() -> None:
            if callback in self._subscribers:
                self._subscribers.remove(callback)

        return unsubscribe

    def _notify(self) -> None:
        for cb in list(self._subscribers):
            try:
                cb(self)
            except Exception:
                log.exception("slurmlab: an allocation subscriber raised")

    @property
    def ended(self) -> bool:
        return self.state in ENDED_STATES

    @property
    def running(self) -> bool:
        return self.state == "RUNNING"

    @property
    def following_release(self) -> bool:
        """This process cancelled the job and still looks at it, until Slurm has saved the cancel (a controller
        restart before then brings the job back; it is then cancelled again)."""
        return self._following_release

    @property
    def settled(self) -> bool:
        """Ended, and nothing slurmlab knows of can bring it back: a view of it may stop following."""
        return self.ended and not self._following_release

    @property
    def view(self) -> JobView | None:
        """The job as one typed view of the latest detail and poll (None before Slurm has answered)."""
        return job_view(self.job, self.brief)

    @property
    def nodes(self) -> list[str]:
        for src in (self.job, self.brief):
            if src is not None and src.nodes:
                return list(src.nodes)
        return []

    @property
    def gpus(self) -> dict[str, list[int]]:
        """GPU indices per node (global indices on each node, from ``scontrol show job -d``)."""
        if self.job is None:
            return {}
        return {node: list(idx) for node, idx in self.job.gpus_by_node().items()}

    def time_left(self, now: float | None = None) -> float | None:
        """Seconds until the time limit ends the allocation (None while unknown or unlimited)."""
        return allocation_state.time_left(self, now)

    def refresh(self) -> Allocation:
        """Fetch the full detail now instead of waiting for the next poll."""
        allocation_state.refresh(self)
        return self

    def wait(self, state: str = "RUNNING", timeout: float | None = None) -> Allocation:
        """Block until the allocation reaches ``state`` (default RUNNING; ``"ENDED"`` = any end).

        Raises AllocationError if it ends first, TimeoutError after ``timeout`` seconds.
        """
        allocation_state.wait_for(self, state, timeout)
        return self

    def why(self, *, alternatives: bool = True) -> PendingWhy:
        """Why it waits: reason, limit, blocking jobs, expected start, changes that start sooner (blocks a few s)."""
        return why_pending(self, alternatives=alternatives)

    def resubmit(self, alternative: Alternative | None = None, *, partition: str | None = None,
                 gpus: int | None = None, gpu_type: str | None = None, minutes: int | None = None) -> Allocation:
        """Switch to ``alternative`` (from :meth:`why`) or to this request changed; this one is cancelled only
        once Slurm accepted the new one, which is returned."""
        return resubmit_allocation(self, alternative, partition=partition, gpus=gpus, gpu_type=gpu_type,
                                   minutes=minutes)

    def outcome(self) -> Ended:
        """How it ended (TIMEOUT, OUT_OF_MEMORY, CANCELLED by whom ...), exit codes per step, what to change, and
        the efficiency line, from sacct (blocks a few s; ``scontrol show job`` where accounting is off)."""
        from slurmlab.slurm.allocation_ended import outcome

        return outcome(self)

    def usage(self) -> UsageTable:
        """Utilisation and memory so far (per GPU; on the sandbox the CPU of the job's tasks, from sstat); the
        first call starts sampling in the background and returns at once."""
        from slurmlab.slurm.allocation_usage import usage_of

        return usage_of(self)

    # ---- steps ---------------------------------------------------------------------------------
    def srun(
        self,
        command: Sequence[str] | Callable[[], object],
        *,
        args: Iterable[str] = (),
        on_output: OutputCallback | None = None,
        label: bool = False,
        timeout: float | None = None,
    ) -> StepResult:
        """Run a step in this allocation with ``srun --overlap``, streaming its output.

        ``command`` is an argv list, or a Python callable (run on the allocated nodes through
        cloudpickle; its return values are not collected). ``on_output(stream, line)`` gets
        each line as it arrives (default: print to this process's stdout/stderr).
        Ctrl-C ends the step, not the allocation, then re-raises KeyboardInterrupt.
        """
        return allocation_steps.srun(self, command, args=args, on_output=on_output, label=label, timeout=timeout)

    def launch(self, command: Sequence[str], *, args: Iterable[str] = (), overlap: bool = True) -> RunningStep:
        """Start a step without waiting for it (several may run at once with ``--overlap``).

        Returns a :class:`RunningStep`; its ``wait()`` gives the StepResult. Used by experiments
        that start N workers side by side on the same GPU or CPU core.
        """
        return allocation_steps.launch(self, command, args=args, overlap=overlap)

    @property
    def steps(self) -> list[StepResult]:
        return list(self._steps)

    # ---- release -------------------------------------------------------------------------------
    def cancel(self) -> None:
        """Release the allocation (scancel). Safe to call twice."""
        allocation_release.cancel(self)

    def detach(self) -> None:
        """Keep the allocation when this process exits (a later kernel can attach to it)."""
        self.release_at_exit = False
        self._unguard()

    def forget(self) -> None:
        """Stop following the job (no more polls or updates) without cancelling it."""
        self.detach()
        watch, self._watch = self._watch, None
        if watch is not None:
            watch.cancel()

    def __enter__(self) -> Allocation:
        return self

    def __exit__(self, *exc: object) -> None:
        self.cancel()

    # ---- display -------------------------------------------------------------------------------
    def summary(self) -> str:
        return allocation_display.summary(self)

    def __repr__(self) -> str:
        return f"<Allocation {self.summary()}>"

    def _repr_mimebundle_(self, include: object = None, exclude: object = None) -> dict[str, object]:
        return allocation_display.mime_bundle(self)

    def _html(self) -> str:
        return allocation_display.summary_html(self)
