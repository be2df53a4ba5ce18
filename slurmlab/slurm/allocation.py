"""Allocations that live as long as the kernel.

``Allocation`` submits ``salloc --no-shell`` in the background and returns at once: salloc
prints the job id as soon as the controller has queued it, even while the job pends. A
unique job name and a ``slurmlab:`` comment tag identify it, so a restarted kernel can
find what it left behind. State comes from the shared :mod:`poller`; steps run with
``srun --jobid=J --overlap`` and stream their output line by line.
"""

from __future__ import annotations

import atexit
import dataclasses
import logging
import os
import re
import signal
import socket
import subprocess
import sys
import threading
import time
import uuid
import weakref
from collections.abc import Callable, Iterable, Sequence
from types import FrameType

from slurmlab.core.gpu.binding import BindingTable
from slurmlab.core.gpu.node_models import NodeMig, NodeTopology
from slurmlab.core.request.request import GpuRequest
from slurmlab.core.slurm.job_view import JobView, job_view
from slurmlab.core.slurm.models import Job
from slurmlab.core.slurm.squeue_brief import JobBrief
from slurmlab.core.slurm.states import ENDED
from slurmlab.core.slurm.timefmt import format_duration
from slurmlab.errors import (
    AllocationError,
    ControllerDownError,
    JobNotFoundError,
    MungeError,
    ParseError,
    SlurmError,
)
from slurmlab.slurm.binding_probe import explain_binding
from slurmlab.slurm.guardian import get_guardian
from slurmlab.slurm.poller import JobPoller, JobUpdate, Watch, get_poller
from slurmlab.slurm.probes import node_mig, node_topology
from slurmlab.slurm.runner import Runner, classify_failure, get_runner
from slurmlab.slurm.steps import (
    OutputCallback,
    RunningStep,
    StepResult,
    callable_argv,
    overlap_refused,
    print_output,
    step_argv,
    stream_step,
)

__all__ = [
    "DISPLAY_HOOKS",
    "ENDED_STATES",
    "Allocation",
    "RunningStep",
    "StepResult",
    "check_request",
    "find_leftovers",
    "release_all",
    "salloc_argv",
]

log = logging.getLogger(__name__)

TAG_PREFIX = "slurmlab"
# Slurm's ended states, and slurmlab's own: GONE (Slurm forgot the job), REJECTED (salloc refused it)
ENDED_STATES = ENDED | {"GONE", "REJECTED"}

_SALLOC_ID = re.compile(r"(?:Pending|Granted) job allocation (\d+)")
_SALLOC_ERROR = re.compile(r"^salloc: error: (.*)$")

Subscriber = Callable[["Allocation"], None]


def check_request(
    tokens_or_request: Sequence[str] | GpuRequest, runner: Runner | None = None, *, need_cluster: bool = True
) -> GpuRequest:
    """The one request pipeline (:func:`slurmlab.core.request.pipeline.check_request`) against the live cluster.

    The request is read first, so a malformed line or a command never reaches Slurm; then the cluster is asked
    what it offers and which Slurm it runs. With ``need_cluster`` a controller that does not answer is an
    error; without (a dry run) the request is checked on its own and ``request.checked`` says why.
    Raises RequestError (``RequestProblems``) listing every problem with its fix.
    """
    from slurmlab.core.request import pipeline
    from slurmlab.slurm import queries

    request = pipeline.read_request(tokens_or_request)
    runner = runner or get_runner()
    try:
        inventory = queries.inventory(runner)
    except SlurmError as exc:
        if need_cluster:
            raise
        return pipeline.check_request(request, None, why_no_inventory=exc.message)
    # what one Slurm accepts another refuses (--uid, --gres=gpu beside --gpus-per-node)
    return pipeline.check_request(request, inventory, version=known_version(runner))


def known_version(runner: Runner) -> tuple[int, ...] | None:
    """The cluster's Slurm version for validation, or None where it cannot be read (validation then warns
    about what differs between versions instead of refusing)."""
    from slurmlab.slurm import queries

    try:
        return queries.slurm_version(runner)
    except (SlurmError, ParseError):
        return None


def salloc_argv(
    request: Sequence[str] | GpuRequest, *, name: str | None = None, tag: str | None = None
) -> list[str]:
    """The exact command an allocation runs (``--dry-run`` shows it to the user).

    A GpuRequest's own job name stands first, where ``name`` would: the same place whoever named the job."""
    if isinstance(request, GpuRequest):
        options, own_name = _options_and_name(request)
        return salloc_argv(options, name=own_name or name, tag=tag)
    argv = ["salloc", "--no-shell"]
    if name:
        argv.append(f"--job-name={name}")
    if tag:
        argv.append(f"--comment={tag}")
    return argv + [str(a) for a in request]


def _options_and_name(request: GpuRequest) -> tuple[list[str], str | None]:
    """The request's salloc options without its job name, and the name (rendered apart, first)."""
    return dataclasses.replace(request, job_name=None).to_argv(), request.job_name


def make_tag() -> str:
    """A tag naming this process: ``slurmlab:<host>:<pid>:<random>``."""
    return f"{TAG_PREFIX}:{socket.gethostname()}:{os.getpid()}:{uuid.uuid4().hex[:8]}"


_live: weakref.WeakSet[Allocation] = weakref.WeakSet()
_live_lock = threading.Lock()


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
        self._salloc: subprocess.Popen[str] | None = None
        self._watch: Watch | None = None
        self._subscribers: list[Subscriber] = []
        self._cond = threading.Condition()
        self._id_known = threading.Event()
        self._steps: list[StepResult] = []
        self._owner_pid = os.getpid()  # a forked child must never release its parent's allocations
        self._guard_key = uuid.uuid4().hex
        with _live_lock:
            _live.add(self)
        _ensure_exit_hooks()

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
        from slurmlab.core.request.pipeline import is_checked

        if isinstance(request, str):
            raise TypeError("argv must be a list of arguments, e.g. ['--gpus=2', '-t', '30']")
        warnings: tuple[str, ...] = ()
        if isinstance(request, GpuRequest):
            if name is not None:
                raise TypeError("a GpuRequest carries its own job name: check the request with --job-name=NAME "
                                "instead of passing name=")
            if not is_checked(request):
                request = check_request(request, runner)
        elif validate:
            tokens = [f"--job-name={name}", *request] if name else list(request)
            request = check_request(tokens, runner)
        if isinstance(request, GpuRequest):
            argv, name = _options_and_name(request)
            warnings = request.warnings
        else:  # unchecked: the tokens go to Slurm as given
            argv = list(request)
        tag = make_tag()
        name = name or f"slurmlab-{tag.rsplit(':', 1)[1]}"
        alloc = cls(argv=argv, runner=runner, poller=poller, name=name, tag=tag, release_at_exit=release_at_exit)
        alloc.warnings = list(warnings)
        alloc._guard()  # before salloc runs: a kernel killed while it waits must not leave the job
        alloc._start_salloc()
        if not alloc._id_known.wait(id_timeout):
            # salloc can be slow to print; look the job up by its unique name
            alloc._find_id_by_name()
        if alloc.job_id is None:
            alloc._kill_salloc()
            if alloc.state == "REJECTED":
                alloc._unguard()  # salloc ended without a job: nothing to watch
            raise alloc._not_created() from alloc._lookup_error
        return alloc

    def _not_created(self) -> AllocationError:
        """Why no job came out, with the one hint that fits the cause.

        A request hint only when Slurm refused the request; munge, the controller and timeouts
        keep the runner's own hint, never a second one stacked on it.
        """
        cause = self._lookup_error
        if cause is None and self.error is not None:
            cause = classify_failure(["salloc"], 1, self.error)
        if isinstance(cause, (MungeError, ControllerDownError)):
            return AllocationError(f"the allocation was not created: {cause.message}", hint=cause.hint)
        if cause is None:
            return AllocationError(
                "the allocation was not created: salloc gave no job id in time",
                hint="the controller may be slow or down: check it with `scontrol ping`, then retry",
            )
        return AllocationError(
            f"the allocation was not created: {self.error or cause.message}",
            hint=cause.hint or "check the request with `%salloc --dry-run …` and the cluster with `sinfo`",
        )

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

    def _argv(self) -> list[str]:
        return salloc_argv(self.request_argv, name=self.name, tag=self.tag)

    def _start_salloc(self) -> None:
        proc = self.runner.popen(self._argv())
        self._salloc = proc
        self._guard(salloc_pid=proc.pid)
        threading.Thread(target=self._read_salloc, args=(proc,), name="slurmlab-salloc", daemon=True).start()

    def _read_salloc(self, proc: subprocess.Popen[str]) -> None:
        assert proc.stderr is not None
        for raw in proc.stderr:
            line = raw.rstrip("\n")
            self.salloc_messages.append(line)
            m = _SALLOC_ID.search(line)
            if m and self.job_id is None:
                self.job_id = m.group(1)
                self._guard()
                self._set_state("PENDING" if "Pending" in line else "RUNNING")
                self._id_known.set()
                self._start_watch()
                continue
            m = _SALLOC_ERROR.match(line)
            if m:
                self.error = m.group(1) if self.error is None else f"{self.error}; {m.group(1)}"
        rc = proc.wait()
        if rc != 0 and self.job_id is None:
            self.error = self.error or "\n".join(self.salloc_messages) or f"salloc exited with {rc}"
            self._set_state("REJECTED")
            self._id_known.set()
        elif self.job_id is not None:
            self.poller.poke()

    def _find_id_by_name(self) -> None:
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
            self._start_watch()

    # ---- the guardian: cancels what is registered if this process dies without releasing ---------
    def _guard(self, salloc_pid: int | None = None) -> None:
        if not self.release_at_exit or os.getpid() != self._owner_pid:
            return
        try:
            get_guardian().guard(self._guard_key, self.runner, job_id=self.job_id, name=self.name,
                                 tag=self.tag, salloc_pid=salloc_pid)
        except OSError as exc:  # no watcher: atexit and the TERM/HUP handlers still release it
            log.warning("slurmlab: could not start the allocation guardian: %s", exc)

    def _unguard(self) -> None:
        if os.getpid() != self._owner_pid:
            return
        try:
            get_guardian().drop(self._guard_key)
        except OSError as exc:
            log.warning("slurmlab: could not reach the allocation guardian: %s", exc)

    def _start_watch(self) -> None:
        if self._watch is None and self.job_id is not None:
            self._watch = self.poller.watch(self.job_id, self._on_update)

    # ---- state ---------------------------------------------------------------------------------
    def _on_update(self, update: JobUpdate) -> None:
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
                self.state = update.brief.state
                self.reason = update.brief.reason
                self.node_alerts = tuple(update.node_alerts)
            if update.detail is not None:
                self.job = update.detail
                if update.brief is None:
                    self.state = update.detail.state
                    self.reason = update.detail.reason
            if update.gone and self.state not in ENDED_STATES:
                self.state = "GONE"
            self._cond.notify_all()
        self._notify()
        if self.ended and self._watch is not None:
            self._watch.cancel()

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
        for src in (self.brief, self.job):
            end = src.end_time if src is not None else None
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
            self._set_state("GONE")
            return self
        with self._cond:
            self.job = job
            if self.state not in ENDED_STATES or job.state in ENDED_STATES:
                self.state = job.state
                self.reason = job.reason
            self._cond.notify_all()
        self._notify()
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
        if self.state == "RUNNING" and self.job is None:
            self.refresh()  # granted before the poller fetched the detail: nodes and GPUs now
        return self

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
        if isinstance(command, str):
            raise TypeError("command must be an argv list, e.g. ['hostname'], or a Python callable")
        cleanup: list[str] = []
        if callable(command):
            argv_cmd, path = callable_argv(command)
            cleanup.append(path)
        else:
            argv_cmd = [str(a) for a in command]
        extra = [str(a) for a in args]
        try:
            argv = step_argv(self.job_id, extra, argv_cmd, label=label, overlap=True)
            result = self._run_step(argv, on_output or print_output, timeout)
            if overlap_refused(result):
                # Slurm 22.05 cannot create an --overlap step in a job that asked for GPUs per
                # job (--gpus=N): "Insufficient GRES available in allocation". Nothing ran, so
                # run it once more as an ordinary step, which gets the job's GPUs.
                argv = step_argv(self.job_id, extra, argv_cmd, label=label, overlap=False)
                result = self._run_step(argv, on_output or print_output, timeout)
            return result
        finally:
            for path in cleanup:
                try:
                    os.unlink(path)
                except OSError:
                    pass

    def _run_step(self, argv: list[str], on_output: OutputCallback, timeout: float | None) -> StepResult:
        result = stream_step(self.runner, argv, on_output, timeout)
        self._steps.append(result)
        self._notify()
        if result.interrupted and timeout is None:
            raise KeyboardInterrupt(f"step of allocation {self.job_id} interrupted; the allocation is still alive")
        return result

    def launch(self, command: Sequence[str], *, args: Iterable[str] = (), overlap: bool = True) -> RunningStep:
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
        argv = step_argv(self.job_id, [str(a) for a in args], [str(c) for c in command], label=False,
                         overlap=overlap)
        return RunningStep(argv, self.runner.popen(argv))

    @property
    def steps(self) -> list[StepResult]:
        return list(self._steps)

    # ---- what the allocation got ------------------------------------------------------------------
    # The probes run as steps of this allocation: slurm/probes.py and slurm/binding_probe.py.
    def topology(self, node: str | None = None, *, source: str = "auto") -> NodeTopology:
        """GPU topology of an allocated node (default its first): the sandbox's profile, or live (nvidia-smi,
        then NVML); ``source`` forces one of them."""
        return node_topology(self, node, source=source)

    def mig(self, node: str | None = None, *, source: str = "auto") -> NodeMig:
        """MIG layout of an allocated node (default its first), with this allocation's slices highlighted."""
        return node_mig(self, node, source=source)

    def explain_binding(self, *, source: str = "auto") -> BindingTable:
        """Per task: its GPUs, their NUMA node and CPUs, its CPU mask, and whether binding was honoured."""
        return explain_binding(self, source=source)

    # ---- release -------------------------------------------------------------------------------
    def cancel(self) -> None:
        """Release the allocation (scancel). Safe to call twice."""
        self._kill_salloc()
        if self.job_id is not None and not self.ended:
            from slurmlab.slurm import queries

            try:
                # a job this process submitted is ours; one attached by id is checked first
                queries.cancel_job(self.job_id, self.runner, only_mine=self.tag is None)
            except JobNotFoundError:
                pass
            self.poller.poke()
        self._unguard()  # only once scancel went through: otherwise the guardian still owes it
        with _live_lock:
            _live.discard(self)

    def _kill_salloc(self) -> None:
        proc = self._salloc
        if proc is not None and proc.poll() is None:
            try:
                os.killpg(proc.pid, signal.SIGINT)  # salloc withdraws a pending request on SIGINT
                proc.wait(timeout=5)
            except (ProcessLookupError, subprocess.TimeoutExpired, PermissionError):
                try:
                    proc.kill()
                except ProcessLookupError:
                    pass

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
        parts = [f"allocation {self.job_id or '(submitting)'}: {self.state}"]
        if self.reason and self.state == "PENDING":
            parts.append(f"reason {self.reason}")
        if self.nodes:
            parts.append("nodes " + ",".join(self.nodes))
        gpus = self.gpus
        if gpus:
            parts.append("GPUs " + "; ".join(f"{n}:{','.join(map(str, i))}" for n, i in gpus.items()))
        left = self.time_left()
        if left is not None:
            parts.append(f"{format_duration(left, clamp=True)} left")
        if self.error:
            parts.append(f"error: {self.error}")
        return ", ".join(parts)

    def __repr__(self) -> str:
        return f"<Allocation {self.summary()}>"

    def _repr_mimebundle_(self, include: object = None, exclude: object = None) -> dict[str, object]:
        # The live panel when the widgets room registered one (it does on %load_ext slurmlab);
        # the Slurm layer itself never imports ipywidgets.
        for hook in reversed(DISPLAY_HOOKS):
            bundle = hook(self)
            if bundle is not None:
                return bundle
        return {"text/plain": repr(self), "text/html": self._html()}

    def _html(self) -> str:
        import html

        return f"<code>{html.escape(self.summary())}</code>"


# Renderers registered by the widgets room: each returns a mime bundle or None.
DISPLAY_HOOKS: list[Callable[[Allocation], dict[str, object] | None]] = []


def find_leftovers(runner: Runner | None = None, *, include_alive: bool = False) -> list[Job]:
    """Jobs this user left from earlier kernels (tag ``slurmlab:``) whose process is gone.

    Returns their Jobs; attach with ``Allocation.attach(j.job_id)`` or cancel them.
    """
    from slurmlab.slurm import queries

    found = []
    host = socket.gethostname()
    for brief in queries.my_tagged_jobs(TAG_PREFIX, runner or get_runner()):
        parts = (brief.comment or "").split(":")
        alive = False
        if len(parts) >= 3 and parts[1] == host and parts[2].isdigit():
            alive = _pid_alive(int(parts[2]))
        if include_alive or not alive:
            found.append(brief)
    return found


def _pid_alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:
        return True
    return True


def release_all() -> list[str]:
    """Cancel every allocation of this process that is not detached (run at exit)."""
    released = []
    with _live_lock:
        allocs = list(_live)
    for alloc in allocs:
        if alloc.release_at_exit and not alloc.ended and alloc._owner_pid == os.getpid():
            try:
                alloc.cancel()
                if alloc.job_id:
                    released.append(alloc.job_id)
            except Exception as exc:  # at exit: report, never raise
                print(f"slurmlab: could not release allocation {alloc.job_id}: {exc}", file=sys.stderr)
    return released


_atexit_done = False
# SIGTERM: `kill`, a batch system, JupyterLab's shutdown after its grace period; SIGHUP: a closed
# terminal or ssh session. SIGINT belongs to ipykernel (it interrupts a cell) and is never touched.
RELEASE_SIGNALS = (signal.SIGTERM, signal.SIGHUP)
# What a signal handler gives release_all before the process dies anyway; the guardian cancels
# whatever it did not reach.
RELEASE_DEADLINE = 10.0
_SignalHandler = Callable[[int, FrameType | None], object] | int | None
_previous_handlers: dict[int, _SignalHandler] = {}
_handlers_pid: int | None = None


def _ensure_exit_hooks() -> None:
    global _atexit_done
    if not _atexit_done:
        atexit.register(release_all)
        _atexit_done = True
    _install_signal_handlers()


def _install_signal_handlers() -> None:
    """Release on TERM/HUP, then let the signal do what it did before (chained or default)."""
    global _handlers_pid
    if _handlers_pid == os.getpid() or threading.current_thread() is not threading.main_thread():
        return  # signal.signal works only in the main thread; a later allocation there retries
    for signum in RELEASE_SIGNALS:
        previous = signal.getsignal(signum)
        # ignored (nohup): the process is meant to survive it; None: a handler not set from
        # Python, which cannot be chained
        if previous is signal.SIG_IGN or previous is None or previous is _on_release_signal:
            continue
        try:
            signal.signal(signum, _on_release_signal)
        except (ValueError, OSError):
            continue
        _previous_handlers[signum] = previous
    _handlers_pid = os.getpid()


def _on_release_signal(signum: int, frame: FrameType | None) -> None:
    previous = _previous_handlers.get(signum, signal.SIG_DFL)
    if os.getpid() == _handlers_pid:  # inherited by a forked child: its parent's jobs are not its own
        # in a thread with a deadline: the main thread may hold a lock release_all needs
        worker = threading.Thread(target=release_all, name="slurmlab-release", daemon=True)
        worker.start()
        worker.join(RELEASE_DEADLINE)
    if callable(previous):
        previous(signum, frame)
        return
    # the default action: die of this signal, as the process would have without slurmlab
    signal.signal(signum, signal.SIG_DFL)
    os.kill(os.getpid(), signum)
