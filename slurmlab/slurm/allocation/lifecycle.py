"""The allocation's lifecycle: one class, :class:`Allocation`.

``Allocation.submit`` runs salloc in the background and returns once the controller has queued the job (salloc
prints its id even while it pends). A unique job name and a ``slurmlab:`` comment tag let a restarted kernel find
what it left. salloc holds an allocation that lives with the kernel and hears Slurm's pushes (:mod:`.salloc`), so
the shared :mod:`poller` checks a granted one only every few minutes. Steps run with ``srun --jobid=J --overlap``.

The class holds the lifecycle (submit/attach, state, wait, refresh, steps, cancel/detach) and every change of its
state. What has state of its own is a collaborator that reports back: the salloc process and its reader
(:class:`.salloc.SallocProcess`, through its callbacks), and this process's registry of live allocations with the
guardian, the exit hooks and the follower of released jobs (:data:`.release.LIVE`, through the methods
:class:`.release.Releasable` names). The questions asked of a job (why it waits, how it ended, its usage, its GPUs'
topology, MIG and binding, its display) are features over the public API, each a method importing it when used.

News of the job arrives in two places: :meth:`Allocation._on_update` takes the shared poller's updates, and
:meth:`Allocation._change` every other report (salloc's pushes, a refresh, the release follower). Both change the
state under the allocation's condition, wake its waiters, then call its subscribers.
"""

from __future__ import annotations

import contextlib
import copy
import logging
import os
import threading
import time
import uuid
from collections.abc import Callable, Iterable, Sequence
from typing import TYPE_CHECKING, overload

from slurmlab.core.request.request import GpuRequest
from slurmlab.core.slurm.job_view import JobView, job_view
from slurmlab.core.slurm.models import Job
from slurmlab.core.slurm.squeue_brief import JobBrief
from slurmlab.core.slurm.states import ENDED, HOLDING
from slurmlab.errors import AllocationError, JobNotFoundError, SlurmError, SlurmlabError
from slurmlab.slurm.allocation.leftovers import make_tag
from slurmlab.slurm.allocation.release import LIVE
from slurmlab.slurm.allocation.request import request_to_submit, salloc_argv
from slurmlab.slurm.allocation.salloc import PUSHED_STATE, SallocProcess, may_still_be_made, not_created
from slurmlab.slurm.poller import JobPoller, JobUpdate, Watch, get_poller
from slurmlab.slurm.runner import Runner, get_runner
from slurmlab.slurm.steps import (
    OutputCallback,
    RunningStep,
    StepResult,
    overlap_refused,
    print_output,
    run_function,
    step_argv,
    stream_step,
)

if TYPE_CHECKING:
    from slurmlab.core.diagnosis.alternatives import Alternative
    from slurmlab.core.diagnosis.ended import Ended
    from slurmlab.core.gpu.binding import BindingTable
    from slurmlab.core.gpu.job_hardware import JobMig, JobTopology
    from slurmlab.core.gpu.node_models import NodeMig, NodeTopology
    from slurmlab.core.gpu.usage import UsageTable
    from slurmlab.slurm.allocation.pending import PendingWhy

__all__ = ["ENDED_STATES", "Allocation", "Subscriber"]

log = logging.getLogger("slurmlab.slurm.allocation")

# Slurm's ended states, and slurmlab's own: GONE (Slurm forgot the job), REJECTED (salloc refused it)
ENDED_STATES = ENDED | {"GONE", "REJECTED"}

Subscriber = Callable[["Allocation"], None]
_CHANGEABLE = frozenset({"state", "reason", "note", "job", "node_alerts"})  # what _change may set


class Allocation:
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
        self.own_job = False  # the job this process runs in (:meth:`own`): never cancelled by it
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
        self.warnings: list[str] = []  # what validation noticed but let through
        self.replaced_by: Allocation | None = None  # set by resubmit: the panel follows the new job
        # what slurmlab did that Slurm's state alone does not say (a cancel a controller restart lost, redone)
        self.note: str | None = None
        self.released_at: float | None = None  # when this process last asked Slurm to cancel the job
        self._lookup_error: SlurmError | None = None
        self._following_release = False  # the release is looked at until Slurm has saved it
        # Slurm took this process's scancel: the job is CANCELLED now (Slurm's own record says so at once), whatever
        # a poll still in flight or the COMPLETING of its epilog says, until a restart brings it back (came_back)
        self._cancel_taken = False
        self._salloc: SallocProcess | None = None
        self._watch: Watch | None = None
        self._subscribers: list[Subscriber] = []
        self._cond = threading.Condition()
        self._id_known = threading.Event()
        self._steps: list[StepResult] = []
        self._owner_pid = os.getpid()  # a forked child must never release its parent's allocations
        self._guard_key = uuid.uuid4().hex
        LIVE.register(self)

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
        """Submit ``salloc <request>`` in the background and return once the job id is known.

        ``request`` is a GpuRequest from :func:`check_request` (its job name, if any, inside it), or salloc
        tokens (``['--gpus=2', '-t', '30']``; ``name`` then names the job, as a first ``--job-name``). Either
        goes through the one request pipeline: its values, its contradictions, and what the live cluster offers
        (partitions, GPU types, counts); a RequestError naming every problem and its fix is raised before
        anything is submitted. A GpuRequest that pipeline already checked against the cluster, unchanged since,
        is not checked twice. ``validate=False`` (tokens only) hands the tokens to Slurm unchecked, for Slurm to
        decide. Returns in well under a second for a job that must pend. Raises AllocationError with Slurm's
        message when the controller rejects the request. With ``release_at_exit`` salloc holds the job while this
        process lives (:mod:`.salloc`); without, ``salloc --no-shell`` lets it outlive this process.
        """
        argv, name, warnings = request_to_submit(request, name=name, runner=runner, validate=validate)
        tag = make_tag()
        name = name or f"slurmlab-{tag.rsplit(':', 1)[1]}"
        made = cls(
            argv=argv, runner=runner, poller=poller, name=name, tag=tag, release_at_exit=release_at_exit
        )
        return made._submitted(warnings, id_timeout)

    @classmethod
    def attach(
        cls,
        job_id: str | int,
        *,
        runner: Runner | None = None,
        poller: JobPoller | None = None,
        release_at_exit: bool = False,
    ) -> Allocation:
        """Follow an existing job (e.g. one left by a previous kernel)."""
        from slurmlab.core.slurm.jobid import check_job_id

        made = cls(check_job_id(job_id), runner=runner, poller=poller, release_at_exit=release_at_exit)
        return made._attached()

    @classmethod
    def own(
        cls, job_id: str | int, *, runner: Runner | None = None, poller: JobPoller | None = None
    ) -> Allocation:
        """Follow the job this process runs in (found by :func:`slurmlab.slurm.own_job.find_own_job`): like
        :meth:`attach`, but this process does not own it. It is never cancelled, neither when the process ends
        (no guardian, no release at exit) nor by :meth:`cancel`, and its steps run with the job's own environment,
        as an ``srun`` typed in the job's shell would (every other command runs without it:
        :mod:`slurmlab.slurm.job_environment`)."""
        from slurmlab.core.slurm.jobid import check_job_id

        base = runner or get_runner()
        in_job = copy.copy(base)
        in_job.in_own_job = True
        made = cls(
            check_job_id(job_id), runner=in_job, poller=poller or get_poller(base), release_at_exit=False
        )
        made.own_job = True
        return made._attached()

    def _submitted(self, warnings: Sequence[str], id_timeout: float) -> Allocation:
        """Run salloc and wait (``id_timeout`` at most) for the job id; see :meth:`submit`."""
        self.warnings = list(warnings)
        self._guard()  # before salloc runs: a kernel killed while it waits must not leave the job
        self._start_salloc()
        if not self._id_known.wait(id_timeout):
            # salloc can be slow to print; look the job up by its unique name
            self._find_id_by_name()
        if self.job_id is None:
            if self._salloc is not None:
                self._salloc.kill()
            if may_still_be_made(self):
                LIVE.follow_given_up(self)  # a job made late is cancelled, not left running
            else:
                self._unguard()  # Slurm refused the request: there will be no job
            raise not_created(self, self._lookup_error) from self._lookup_error
        return self

    def _attached(self) -> Allocation:
        self._id_known.set()
        self._guard()
        self._start_watch()
        return self

    # ---- the salloc process: it reports the job id, its errors and its exit ---------------------
    def _start_salloc(self) -> None:
        self._salloc = SallocProcess(
            self.runner,
            salloc_argv(self.request_argv, name=self.name, tag=self.tag),
            on_job_id=self._salloc_said_id,
            on_error=self._salloc_said_error,
            on_exit=self._salloc_ended,
            on_stuck=self._salloc_stuck,
            answered=self._id_known.is_set,
            messages=self.salloc_messages,
            on_push=self._salloc_pushed,
            hold=self.release_at_exit,
        )
        self._salloc.start(on_started=lambda pid: self._guard(salloc_pid=pid))

    def _salloc_said_id(self, job_id: str, state: str) -> None:
        if self.job_id is not None:  # found by its name first
            return
        self.job_id = job_id
        self._guard()
        self._change(state=state)
        self._id_known.set()
        if self._salloc is not None and self._salloc.hold:
            self.poller.pushed(job_id)  # before the watch's first round: the job's news comes from salloc
        self._start_watch()

    def _salloc_pushed(self, kind: str, what: str) -> None:
        """Slurm's news of the job, pushed to its salloc (:data:`.salloc.PUSHED`); a poke reads what it does not say."""
        if kind == "granted" and self.state in ("SUBMITTING", "PENDING", "UNKNOWN"):
            with contextlib.suppress(SlurmlabError):
                self.refresh()  # the nodes and GPUs come with the news (else with the next poll round)
            self._change(state="RUNNING", reason=None)
        elif kind in PUSHED_STATE and not self.ended:
            self._cancel_taken = True  # over: a poll still saying RUNNING or COMPLETING brings nothing back
            self._change(state=PUSHED_STATE[kind], reason=None)
        elif kind == "node_failure":
            self._change(node_alerts=(*self.node_alerts, (what, "NODE_FAIL")))
        if self.job_id is not None:
            self.poller.poke()

    def _salloc_said_error(self, message: str) -> None:
        self.error = message if self.error is None else f"{self.error}; {message}"

    def _salloc_stuck(self, exc: SlurmError) -> None:
        self._lookup_error = exc  # what not_created says, in the runner's words

    def _salloc_ended(self, returncode: int) -> None:
        if returncode != 0 and self.job_id is None:
            self.error = self.error or "\n".join(self.salloc_messages) or f"salloc exited with {returncode}"
            self._change(state="REJECTED")
            self._id_known.set()
        elif self.job_id is not None:
            self.poller.pushed(self.job_id, False)  # nothing pushes the job's news any more: polled again
            self.poller.poke()

    def _find_id_by_name(self) -> None:
        """Look the job up by its unique name (salloc can be slow to print its id)."""
        from slurmlab.slurm import queries

        try:
            ids = queries.job_ids_by_name(self.name or "", self.runner)
        except SlurmError as exc:
            self._lookup_error = exc
            return
        if ids:
            self.job_id = ids[-1]
            self._guard()
            self._id_known.set()
            if self._salloc is not None and self._salloc.hold and self._salloc.alive:
                self._salloc.job_id = self.job_id  # its pushes name this job, and no poll is needed
                self.poller.pushed(self.job_id)
            self._start_watch()

    # ---- the guardian: cancels what is registered if this process dies without releasing ---------
    def _guard(self, salloc_pid: int | None = None) -> None:
        LIVE.guard(self, salloc_pid)

    def _unguard(self) -> None:
        LIVE.unguard(self)

    @property
    def owner_pid(self) -> int:
        """The process that made this allocation: only it releases the job (a forked child never does).

        :meta private:
        """
        return self._owner_pid

    @property
    def guard_key(self) -> str:
        """The allocation's entry in the guardian's list.

        :meta private:
        """
        return self._guard_key

    # ---- state ---------------------------------------------------------------------------------
    def _start_watch(self) -> None:
        if self._watch is None and self.job_id is not None:
            self._watch = self.poller.watch(self.job_id, self._on_update)

    def _resume_watch(self) -> None:
        """Follow the job's state again after its watch ended (the job came back after a controller restart)."""
        if self._watch is not None and not self._watch.active:
            self._watch = None
        self._start_watch()

    def _change(self, **fields: object) -> None:
        """The one place the allocation's state changes outside the poller's update (``state``, ``reason``,
        ``note``, ``job``): under its condition, waking its waiters, then telling its subscribers."""
        unknown = set(fields) - _CHANGEABLE
        if unknown:
            raise TypeError(f"not a field of an allocation's state: {sorted(unknown)}")
        with self._cond:
            for name, value in fields.items():
                setattr(self, name, value)
            self._cond.notify_all()
        self._notify()

    def _on_update(self, update: JobUpdate) -> None:
        """Take in what the poller saw (called from its thread); stop watching once the job ended."""
        seen = update.brief or update.detail
        if seen is not None and seen.state == "PENDING" and self._salloc and self._salloc.granted_just_now():
            return  # read before salloc said the grant, published after it: the next round reads the granted job
        with self._cond:
            self.updated_at = update.at
            if update.error is not None:
                self.error = str(update.error)
            elif update.brief is not None or update.detail is not None or update.gone:
                # Slurm answered: an earlier "controller not responding" no longer holds (a job the
                # controller forgot across a restart is GONE, not "not responding" for ever)
                self.error = None
            if update.brief is not None:
                self.brief = update.brief
                self.node_alerts = tuple(update.node_alerts)
                if self._takes_state(update.brief.state):
                    self.state = update.brief.state
                    self.reason = update.brief.reason
            if update.detail is not None:
                self.job = update.detail
                if update.brief is None and self._takes_state(update.detail.state):
                    self.state = update.detail.state
                    self.reason = update.detail.reason
            if update.gone and self.state not in ENDED_STATES:
                self.state = "GONE"
            self._cond.notify_all()
        self._notify()
        if self.ended and self._watch is not None:
            self._watch.cancel()

    def _takes_state(self, seen: str) -> bool:
        """Whether a polled state replaces the allocation's: after a cancel Slurm took, only an ended one does."""
        return not self._cancel_taken or seen in ENDED_STATES

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
        if self.state != "RUNNING":
            return None
        for src in (self.brief, self.job):  # not one read while pending: its end is the scheduler's estimate
            end = src.end_time if src is not None and src.state in HOLDING else None
            if end is not None:
                return max(0.0, float(end.timestamp()) - (time.time() if now is None else now))
        return None

    def refresh(self) -> Allocation:
        """Fetch the full detail now instead of waiting for the next poll."""
        if self.job_id is None:
            return self
        from slurmlab.slurm import queries

        try:
            job = queries.job_detail(self.job_id, self.runner)
        except JobNotFoundError:
            self._change(state="GONE")
            return self
        if self.state not in ENDED_STATES or job.state in ENDED_STATES:
            self._change(job=job, state=job.state, reason=job.reason)
        else:
            self._change(job=job)
        return self

    def wait(self, state: str = "RUNNING", timeout: float | None = None) -> Allocation:
        """Block until the allocation reaches ``state`` (default RUNNING; ``"ENDED"`` = any end).

        Raises AllocationError if it ends first, TimeoutError after ``timeout`` seconds.
        """
        deadline = None if timeout is None else time.monotonic() + timeout
        with self._cond:
            while self.state != state and not (state == "ENDED" and self.ended):
                if self.ended and state not in ENDED_STATES and state != "ENDED":
                    raise AllocationError(
                        f"allocation {self.job_id} ended ({self.state}) before it was {state}"
                        + (f": {self.error}" if self.error else ""),
                        hint="submit a new one with `%salloc …` / Allocation.submit(...)",
                    )
                if state in ENDED_STATES and self.ended:
                    break
                remaining = None if deadline is None else deadline - time.monotonic()
                if remaining is not None and remaining <= 0:
                    raise TimeoutError(
                        f"allocation {self.job_id} is still {self.state}"
                        + (f" ({self.reason})" if self.reason else "")
                        + f" after {timeout:g} s"
                    )
                self._cond.wait(timeout=min(0.5, remaining) if remaining is not None else 0.5)
        if self.state == "RUNNING" and (self.job is None or not self.job.nodes):
            self.refresh()  # granted (a push) before the poller fetched the detail: nodes and GPUs now
        return self

    # ---- reports from the release follower (:class:`.release.ReleaseFollower`); not the user's API -----
    def follow_release(self, following: bool) -> None:
        """Whether the job's cancel is still being followed (until Slurm has saved it).

        :meta private:
        """
        self._following_release = following

    def release_settled(self) -> None:
        """Slurm has saved the cancel: nothing slurmlab knows of can bring the job back.

        :meta private:
        """
        self._following_release = False
        self._notify()

    def add_note(self, note: str) -> None:
        """What slurmlab did that Slurm's state alone does not say (shown as ``note``).

        :meta private:
        """
        self._change(note=note)

    def came_back(self, state: str, note: str) -> None:
        """The job is alive again (a controller restart lost its cancel): its state, and a note saying why.

        :meta private:
        """
        self._cancel_taken = False  # Slurm lost the cancel: its polls say the job's state again
        self._change(state=state, reason=None, note=note)
        self._resume_watch()  # the shared poller follows the job's state again, the cancel included

    # ---- questions asked of the job: features over the public API ------------------------------
    def why(self, *, alternatives: bool = True) -> PendingWhy:
        """Why it waits: reason, limit, blocking jobs, expected start, changes that start sooner (blocks a few s)."""
        from slurmlab.slurm.allocation import pending

        return pending.why(self, alternatives=alternatives)

    def resubmit(
        self,
        alternative: Alternative | None = None,
        *,
        partition: str | None = None,
        gpus: int | None = None,
        gpu_type: str | None = None,
        minutes: int | None = None,
    ) -> Allocation:
        """Switch to ``alternative`` (from :meth:`why`) or to this request changed; this one is cancelled only
        once Slurm accepted the new one, which is returned."""
        from slurmlab.slurm.allocation import switch

        return switch.resubmit(
            self, alternative, partition=partition, gpus=gpus, gpu_type=gpu_type, minutes=minutes
        )

    def outcome(self) -> Ended:
        """How it ended (TIMEOUT, OUT_OF_MEMORY, CANCELLED by whom ...), exit codes per step, what to change, and
        the efficiency line, from sacct (blocks a few s; ``scontrol show job`` where accounting is off)."""
        from slurmlab.slurm.allocation import how_ended

        return how_ended.outcome(self)

    def usage(self) -> UsageTable:
        """Utilisation and memory so far (per GPU; on the sandbox the CPU of the job's tasks, from sstat); the
        first call starts sampling in the background and returns at once."""
        from slurmlab.slurm.allocation import sampler

        return sampler.usage_of(self)

    @overload
    def topology(self, node: None = None, *, source: str = "auto") -> JobTopology: ...
    @overload
    def topology(self, node: str, *, source: str = "auto") -> NodeTopology: ...

    def topology(self, node: str | None = None, *, source: str = "auto") -> JobTopology | NodeTopology:
        """GPU topology of every allocated node (node -> :class:`NodeTopology`), or of ``node`` alone: the
        sandbox's profile, or live (nvidia-smi, then NVML); ``source`` forces one of them.

        In a notebook the answer draws itself, one figure per node with this allocation's GPUs marked::

            alloc.topology()            # every node of the job
            alloc.topology("node2")     # one node
            alloc.topology()["node2"].topology.summary()   # the model behind it
        """
        from slurmlab.slurm import probes

        if node is None:
            return probes.job_topology(self, source=source)
        return probes.node_topology(self, node, source=source)

    @overload
    def mig(self, node: None = None, *, source: str = "auto") -> JobMig: ...
    @overload
    def mig(self, node: str, *, source: str = "auto") -> NodeMig: ...

    def mig(self, node: str | None = None, *, source: str = "auto") -> JobMig | NodeMig:
        """MIG layout of every allocated node with MIG (node -> :class:`NodeMig`), or of ``node`` alone, with
        this allocation's slices outlined; ``source`` forces ``sandbox`` or ``nvidia-smi``.

        In a notebook the answer draws itself (the slice grid of each GPU; slices are named
        ``GPU 0 · 3g.71gb @ 4:4``: GPU, profile, placement in memory slices)::

            alloc.mig()                 # every node of the job with MIG
            alloc.mig("node1")          # one node

        A saved capture draws the same way: ``slurmlab.mig("mig-lgi.txt")``; to place the figure
        yourself: ``slurmlab.viz.mig_figure(**alloc.mig("node1").figure_args())``.
        """
        from slurmlab.slurm import probes

        if node is None:
            return probes.job_mig(self, source=source)
        return probes.node_mig(self, node, source=source)

    def explain_binding(self, *, source: str = "auto") -> BindingTable:
        """Per task and per GPU every name of the GPU, with the known traps flagged; per task its GPUs' NUMA node and
        CPUs, its CPU mask, and whether binding was honoured."""
        from slurmlab.slurm import binding_probe

        return binding_probe.explain_binding(self, source=source)

    def gpu_map(self, *, source: str = "auto") -> BindingTable:
        """Per task, per GPU: Slurm IDX, the index the task sees, UUID, PCI bus id, NUMA node, CPU mask and NVLink
        peers in the allocation, with the known traps flagged (the table :meth:`explain_binding` gives)."""
        from slurmlab.slurm import binding_probe

        return binding_probe.explain_binding(self, source=source)

    # ---- steps ---------------------------------------------------------------------------------
    def srun(
        self,
        command: Sequence[str] | Callable[[], object],
        *,
        args: Iterable[str] = (),
        on_output: OutputCallback | None = None,
        label: bool = False,
        timeout: float | None = None,
        python: str | None = None,
    ) -> StepResult:
        """Run a step in this allocation with ``srun --overlap``, streaming its output.

        ``command`` is an argv list, or a Python callable, run on the allocated nodes through cloudpickle (what
        it returns is printed when not None, not collected). ``on_output(stream, line)`` gets each line as it
        arrives (default: print to this process's stdout/stderr). Ctrl-C ends the step, not the allocation, and raises.

        A callable runs with this kernel's Python, over SSH with ``python3`` of the cluster's PATH, or with
        ``python`` (``python="/opt/py311/bin/python3"``), which must be the kernel's Python version and import
        cloudpickle; its pickle is yours alone and removed when the step ends (:func:`.steps.run_function`).
        """
        job_id = self._ready_for_steps()
        if isinstance(command, str):
            raise TypeError("command must be an argv list, e.g. ['hostname'], or a Python callable")
        show = on_output or print_output

        def run(argv_cmd: list[str]) -> StepResult:
            extra = self.step_options(args)
            argv = step_argv(job_id, extra, argv_cmd, label=label, overlap=True)
            result = self._run_step(argv, show, timeout)
            if overlap_refused(result):
                # Slurm 22.05 cannot create an --overlap step in a job that asked for GPUs per job (--gpus=N):
                # "Insufficient GRES available in allocation". Nothing ran: again as an ordinary step, with them
                argv = step_argv(job_id, extra, argv_cmd, label=label, overlap=False)
                result = self._run_step(argv, show, timeout)
            return result

        if callable(command):
            return run_function(self.runner, command, python, run)
        if python is not None:
            raise TypeError("python= names the interpreter of a Python callable: an argv list names its own")
        return run([str(a) for a in command])

    def step_options(self, args: Iterable[str]) -> list[str]:
        """The srun options of a step: ``args``, and in the job this process runs in (:meth:`own`) ``--mem=0``
        unless a memory option is given: the step the kernel itself runs in (batchspawner's ``srun``) holds all
        of the job's memory, and srun refuses any other step "Memory required by task is not available"; a step's
        ``--mem=0`` shares the job's memory instead."""
        extra = [str(a) for a in args]
        if self.own_job and not any(a.startswith("--mem") for a in extra):
            extra.insert(0, "--mem=0")
        return extra

    def _ready_for_steps(self) -> str:
        """The job id of an allocation that can take a step now; otherwise an AllocationError saying what to do."""
        if self.job_id is None:
            raise AllocationError("the allocation has no job id yet", hint="wait for it: alloc.wait()")
        if self.ended:
            raise AllocationError(
                f"allocation {self.job_id} has ended ({self.state})",
                hint="submit a new one with `%salloc …` / Allocation.submit(...)",
            )
        if self.state == "PENDING":
            raise AllocationError(
                f"allocation {self.job_id} is still pending" + (f" ({self.reason})" if self.reason else ""),
                hint="wait for it with alloc.wait() before running steps",
            )
        return self.job_id

    def _run_step(self, argv: list[str], on_output: OutputCallback, timeout: float | None) -> StepResult:
        self._notify()  # a step starts: the usage sampler of an idle allocation looks again
        result = stream_step(self.runner, argv, on_output, timeout)
        self._steps.append(result)
        self._notify()
        if result.interrupted and timeout is None:
            raise KeyboardInterrupt(
                f"step of allocation {self.job_id} interrupted; the allocation is still alive"
            )
        return result

    def launch(
        self, command: Sequence[str], *, args: Iterable[str] = (), overlap: bool = True
    ) -> RunningStep:
        """Start a step without waiting for it (several may run at once with ``--overlap``).

        Returns a :class:`RunningStep`; its ``wait()`` gives the StepResult. Used by experiments
        that start N workers side by side on the same GPU or CPU core.
        """
        if self.job_id is None or self.state != "RUNNING":
            raise AllocationError(
                f"allocation {self.job_id} is {self.state}, not RUNNING", hint="wait for it: alloc.wait()"
            )
        if isinstance(command, str):
            raise TypeError("command must be an argv list")
        argv = step_argv(
            self.job_id, self.step_options(args), [str(c) for c in command], label=False, overlap=overlap
        )
        step = RunningStep(argv, self.runner.popen(argv), self.runner)
        self._notify()  # a step started: the usage sampler of an idle allocation looks again
        return step

    @property
    def steps(self) -> list[StepResult]:
        return list(self._steps)

    # ---- release -------------------------------------------------------------------------------
    def cancel(self) -> None:
        """Release the allocation (withdraw salloc, scancel); safe to call twice. The release is followed until
        Slurm has saved it (:mod:`.release` says why). The job this process runs in (:meth:`own`) is refused:
        cancelling it would end this process too."""
        if self.own_job:
            raise AllocationError(
                f"job {self.job_id} is the job this session runs in: slurmlab never cancels it "
                "(that would end this kernel too)",
                hint="stop the session itself (the hub's control panel, or scancel in a terminal) to end it",
            )
        salloc = self._salloc
        if salloc is not None and not salloc.holding:
            salloc.kill()  # still waiting: SIGINT withdraws the request
        asked = False
        try:
            if self.job_id is not None and not self.ended:
                from slurmlab.slurm import queries

                try:
                    # a job this process submitted is ours; one attached by id is checked first
                    queries.cancel_job(self.job_id, self.runner, only_mine=self.tag is None)
                    asked = True
                except JobNotFoundError:
                    pass
                self.poller.poke()
        finally:
            if salloc is not None:
                salloc.kill()  # a held job: after its scancel, so it ends CANCELLED, not relinquished
        if asked:
            LIVE.follow_release(self)  # first: a view that sees the state below keeps following the release
            if not self.ended:
                # released now, not at the next poll: `with Allocation.submit(...)` ends with `state` CANCELLED
                self._cancel_taken = True
                self._change(state="CANCELLED", reason=None)
        elif not self._following_release:
            self._unguard()  # only once scancel went through: otherwise the guardian still owes it
        LIVE.discard(self)

    def detach(self) -> None:
        """Keep the allocation when this process exits (a later kernel can attach to it)."""
        self.release_at_exit = False
        self._unguard()
        if self._salloc is not None:
            self._salloc.abandon()  # a held job would end with salloc: salloc goes, the job stays

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
        from slurmlab.slurm.allocation import display

        return display.summary(self)

    def __repr__(self) -> str:
        return f"<Allocation {self.summary()}>"

    def _repr_mimebundle_(self, include: object = None, exclude: object = None) -> dict[str, object]:
        from slurmlab.slurm.allocation import display

        return display.mime_bundle(self)

    def _html(self) -> str:
        from slurmlab.slurm.allocation import display

        return display.summary_html(self)
