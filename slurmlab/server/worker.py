"""One poll of a cluster, done away from Jupyter's event loop.

A poll at a real cluster's size is mostly CPU: parsing Slurm's listings, building the views and encoding them
as JSON (1.17 s at 2,064 jobs when it ran on the loop, stalling every route, Jupyter's own included). A worker
THREAD would still hold the GIL for most of that, so the poll runs in a worker PROCESS: the loop only awaits
a future and stores the bytes that come back (one encoding per answer, with its ETag, made in the worker).

A runner that only lives in this process (a test's FakeRunner replaying recorded output) cannot be rebuilt in
another one: its polls run in a worker thread instead. ``SLURMLAB_POLL_WORKER=thread|process`` (or the
server setting ``slurmlab_poll_worker``) forces one or the other.
"""

from __future__ import annotations

import asyncio
import contextlib
import json
import logging
import multiprocessing
import os
import threading
from collections.abc import Callable
from concurrent.futures import Executor, ProcessPoolExecutor, ThreadPoolExecutor
from concurrent.futures.process import BrokenProcessPool
from dataclasses import dataclass, field
from typing import Any, Literal

from slurmlab.core.request.option_versions import version_text
from slurmlab.errors import SlurmError, SlurmlabError
from slurmlab.server.cache import ResponseCache, etag_of
from slurmlab.server.contract import JobView, NodesAnswer, NodeView, ProblemView, QueueAnswer
from slurmlab.server.jobtracker import JobTracker
from slurmlab.server.nodetracker import NodeTracker, NodeViews
from slurmlab.server.views import problem_view
from slurmlab.slurm import identity, queries
from slurmlab.slurm.runner import Runner, get_runner

__all__ = [
    "ClusterMemory",
    "Encoded",
    "PollOutcome",
    "PollWorker",
    "WorkerMode",
    "collect",
    "encode_answers",
    "failed_poll",
    "shutdown",
]

WorkerMode = Literal["auto", "process", "thread"]
MODES: tuple[str, ...] = ("auto", "process", "thread")
log = logging.getLogger("slurmlab.server")


@dataclass(frozen=True)
class Encoded:
    """One answer as the routes send it: its JSON bytes and their ETag."""

    body: bytes
    etag: str

    @classmethod
    def of(cls, payload: Any) -> Encoded:
        body = ResponseCache.encode(payload)
        return cls(body, etag_of(body))


@dataclass(frozen=True)
class PollOutcome:
    """What one poll found, ready to store: the answers by cache key, or why there are none."""

    version: str | None
    answers: dict[str, Encoded] = field(default_factory=dict)
    problems: tuple[str, ...] = ()  # the records that could not be read, for the log
    error_kind: str | None = None
    error_message: str | None = None
    error_status: int = 500  # the HTTP status a route answers while the failure lasts
    unexpected: bool = False  # a bug (not Slurm failing): logged with its traceback
    complete: bool = True  # False: a first brief view, whose details the next poll (started at once) brings


def failed_poll(exc: BaseException, version: str | None) -> PollOutcome:
    """The outcome of a poll that failed with ``exc``: an error answer for the routes."""
    # Slurm down/unreachable/not installed: the service is unavailable, not the server broken.
    return PollOutcome(
        version,
        error_kind=type(exc).__name__,
        error_message=str(exc),
        error_status=503 if isinstance(exc, SlurmError) else 500,
        unexpected=not isinstance(exc, SlurmlabError),
    )


def _queue(
    scope: Literal["mine", "all"],
    user: str,
    jobs: list[JobView],
    bodies: list[bytes] | None,
    problems: list[ProblemView],
) -> Encoded:
    """A queue answer, its jobs' JSON joined from ``bodies`` when given (each encoded once, when its view
    changed: re-encoding 10,000 unchanged jobs at every poll was a third of the poll)."""
    if bodies is None:
        return Encoded.of(QueueAnswer(scope=scope, user=user, jobs=jobs, problems=problems))
    empty = ResponseCache.encode(QueueAnswer(scope=scope, user=user, jobs=[], problems=problems))
    head = b'{"jobs":['  # "jobs" sorts first among the answer's keys
    assert empty.startswith(head + b"]")
    body = head + b",".join(bodies) + empty[len(head) :]
    return Encoded(body, etag_of(body))


def _nodes(nodes: list[NodeView], bodies: list[bytes] | None, problems: list[ProblemView]) -> Encoded:
    """The nodes answer, its nodes' JSON joined from ``bodies`` when given (as :func:`_queue` does)."""
    if bodies is None:
        return Encoded.of(NodesAnswer(nodes=nodes, problems=problems))
    empty = ResponseCache.encode(NodesAnswer(nodes=[], problems=problems))
    head = b'{"nodes":['  # "nodes" sorts first among the answer's keys
    assert empty.startswith(head + b"]")
    body = head + b",".join(bodies) + empty[len(head) :]
    return Encoded(body, etag_of(body))


def encode_answers(
    nodes: list[NodeView],
    jobs: list[JobView],
    problems: list[ProblemView],
    user: str,
    bodies: list[bytes] | None = None,
    node_bodies: list[bytes] | None = None,
) -> dict[str, Encoded]:
    """The three answers a whole poll makes, each encoded once (``bodies``/``node_bodies``: each job's/node's
    JSON, already encoded)."""
    job_problems = [p for p in problems if p["kind"] == "job"]
    mine = [n for n, j in enumerate(jobs) if j["mine"]]
    return {
        "nodes": _nodes(nodes, node_bodies, [p for p in problems if p["kind"] == "node"]),
        "queue:all": _queue("all", user, jobs, bodies, job_problems),
        # a record that cannot be read might be the viewer's own: say so in both scopes
        "queue:mine": _queue(
            "mine",
            user,
            [jobs[n] for n in mine],
            None if bodies is None else [bodies[n] for n in mine],
            job_problems,
        ),
    }


@dataclass
class ClusterMemory:
    """What earlier polls of one cluster learnt (kept where the polls run): its jobs, its nodes, their views."""

    jobs: JobTracker = field(default_factory=JobTracker)
    mine: JobTracker = field(default_factory=lambda: JobTracker(own=True))
    nodes: NodeTracker = field(default_factory=NodeTracker)
    node_views: NodeViews = field(default_factory=NodeViews)


def collect(
    runner: Any,
    user: str,
    me: int,
    version: str | None = None,
    tracker: JobTracker | ClusterMemory | None = None,
    whole: bool = True,
) -> PollOutcome:
    """Ask Slurm, build the views, encode them. Blocking and CPU-bound: runs in a worker. ``tracker`` holds
    what earlier polls learnt of the cluster (a bare JobTracker: its jobs only; none: everything is asked).

    A ``whole`` poll lists every job and every node (the whole-cluster listings a site's controller feels) and
    answers ``nodes``, ``queue:all`` and ``queue:mine`` (mine: the jobs whose brief line names the viewer, Slurm's
    name of the job's uid; no second listing of owners). Between two, a poll lists only the viewer's own jobs
    (``squeue -u UID``) and answers ``queue:mine``."""
    memory = tracker if isinstance(tracker, ClusterMemory) else ClusterMemory(tracker or JobTracker())
    try:
        if version is None:
            version = version_text(queries.slurm_version(runner))
        viewer = _name_there(runner, me)
        # the viewer's jobs show the viewer's name there (this machine's passwd may name the uid otherwise)
        names = {me: viewer} if viewer is not None else {}
        if whole:
            nodes = memory.nodes.poll(runner)
            memory.jobs.viewer = viewer
            found = memory.jobs.poll(runner, {}, me, names)
            problems = [problem_view(p, "node") for p in nodes.problems] + found.problems
            views, node_bodies = memory.node_views.build(nodes, found.jobs)
            answers = encode_answers(views, found.views, problems, user, found.bodies, node_bodies)
            complete = found.complete
        else:
            own = memory.mine.poll(runner, {}, me, names)
            problems = list(own.problems)
            answers = {"queue:mine": _queue("mine", user, own.views, own.bodies, problems)}
            complete = own.complete
    except Exception as exc:  # a bug in a parser must show as an error answer, not kill the timer
        if not isinstance(exc, SlurmlabError):
            log.exception("slurmlab: poll failed unexpectedly")
        return failed_poll(exc, version)
    return PollOutcome(version, answers, tuple(p["message"] for p in problems), complete=complete)


def _name_there(runner: Any, me: int) -> str | None:
    """The name Slurm prints for uid ``me`` on ``runner``'s cluster (squeue's ``%u``). Over SSH: the login's name
    as that login node's own ``id`` said it (this machine's passwd may not know the uid, or know another person by
    it), None while the link has not learnt it (then no job of the whole listing is called "mine"); else this
    machine's passwd, which the local Slurm reads too."""
    link = getattr(runner, "ssh", None)
    if link is None:
        return identity.user_name(me)
    remote = link.remote_user
    return remote[1] if remote is not None and remote[0] == me else None


def _settings_key(settings: dict[str, Any]) -> str:
    """Which cluster a runner's settings select (its slurm.conf, cluster, environment)."""
    return json.dumps(settings, sort_keys=True, default=str)


_TRACKERS: dict[str, ClusterMemory] = {}  # in the worker process: one per cluster, by its runner's settings


def _collect_elsewhere(
    settings: dict[str, Any], user: str, me: int, version: str | None, whole: bool = True
) -> PollOutcome:
    """The worker process's entry: rebuild the runner from its settings, then poll."""
    tracker = _TRACKERS.setdefault(_settings_key(settings), ClusterMemory())
    return collect(Runner.from_settings(settings), user, me, version, tracker, whole)


# how much lower than the server's the poll worker's CPU priority is (nice(2) steps; Slurm commands inherit it)
WORKER_NICENESS = 10


def _background_priority() -> None:
    """The worker process's start: on a busy machine (a 2-core workshop server) the scheduler gives the CPU to
    Jupyter's requests first, and the poll, which nobody waits on, takes what is left."""
    with contextlib.suppress(OSError):
        os.nice(WORKER_NICENESS)


class _Pools:
    """The executors of the polls: one worker process per cluster (so that the jobs it learnt at one poll are
    there at the next, and a hung controller delays only its own cluster), and a few threads for the rest."""

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._processes: dict[str, ProcessPoolExecutor] = {}
        self._thread: ThreadPoolExecutor | None = None

    def process(self, key: str) -> ProcessPoolExecutor:
        with self._lock:
            pool = self._processes.get(key)
            if pool is None:
                # spawn, never fork: forking a server with live threads can copy a held lock into the child
                pool = ProcessPoolExecutor(
                    max_workers=1,
                    mp_context=multiprocessing.get_context("spawn"),
                    initializer=_background_priority,
                )
                self._processes[key] = pool
            return pool

    def thread(self) -> ThreadPoolExecutor:
        with self._lock:
            if self._thread is None:
                self._thread = ThreadPoolExecutor(max_workers=2, thread_name_prefix="slurmlab-poll")
            return self._thread

    def forget_process(self, key: str, broken: Executor) -> None:
        with self._lock:
            if self._processes.get(key) is broken:
                del self._processes[key]
        broken.shutdown(wait=False, cancel_futures=True)

    def shutdown(self) -> None:
        with self._lock:
            pools: list[Executor] = [*self._processes.values(), *([self._thread] if self._thread else [])]
            self._processes, self._thread = {}, None
        for pool in pools:
            pool.shutdown(wait=False, cancel_futures=True)


_POOLS = _Pools()


def shutdown() -> None:
    """Stop the worker process and threads (the server is unloading the extension)."""
    _POOLS.shutdown()


def mode_from(setting: object = None) -> WorkerMode:
    """The worker mode a setting or ``SLURMLAB_POLL_WORKER`` names (auto when neither does)."""
    raw = setting if setting is not None else os.environ.get("SLURMLAB_POLL_WORKER", "auto")
    value = str(raw).strip().lower() or "auto"
    if value not in MODES:
        raise SlurmlabError(
            f"slurmlab_poll_worker must be one of {', '.join(MODES)}, got {raw!r}",
            hint="set SLURMLAB_POLL_WORKER=process (the default picks it for a real Slurm)",
        )
    return value  # type: ignore[return-value]


class PollWorker:
    """Runs :func:`collect` off the event loop: in the worker process for a real :class:`Runner`, else
    (or when told) in a worker thread."""

    def __init__(self, mode: WorkerMode | None = None) -> None:
        self.mode: WorkerMode = mode if mode is not None else mode_from()
        # polls in a thread keep each runner's jobs here (the runner is kept too, so that its id stays its own)
        self._trackers: dict[int, tuple[Any, ClusterMemory]] = {}

    def _tracker(self, runner: Any) -> ClusterMemory:
        found = self._trackers.get(id(runner))
        if found is None or found[0] is not runner:
            found = self._trackers[id(runner)] = (runner, ClusterMemory())
        return found[1]

    def uses_process(self, runner: Any) -> bool:
        if self.mode == "thread":
            return False
        # only a plain Runner can be rebuilt from its settings in another process
        return type(runner) is Runner

    async def poll(
        self, runner: Any, user: str, me: int, version: str | None, whole: bool = True
    ) -> PollOutcome:
        runner = runner if runner is not None else get_runner()
        loop = asyncio.get_running_loop()
        log.debug("slurmlab: polling in a worker %s", "process" if self.uses_process(runner) else "thread")
        if not self.uses_process(runner):
            tracker = self._tracker(runner)
            job: Callable[[], PollOutcome] = lambda: collect(runner, user, me, version, tracker, whole)  # noqa: E731
            return await loop.run_in_executor(_POOLS.thread(), job)
        settings = runner.settings()
        key = _settings_key(settings)
        pool = _POOLS.process(key)
        try:
            return await loop.run_in_executor(pool, _collect_elsewhere, settings, user, me, version, whole)
        except BrokenProcessPool as exc:
            _POOLS.forget_process(key, pool)
            return failed_poll(
                SlurmlabError(
                    "slurmlab's poll worker process died; a new one starts at the next "
                    f"poll ({exc or 'no reason given'})"
                ),
                version,
            )
