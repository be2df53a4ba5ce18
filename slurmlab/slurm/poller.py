"""One shared watcher of job state.

Every watcher (allocation panels, queue monitors, ``Allocation.wait``) shares ONE cheap
``squeue`` call per interval that asks only for the watched jobs, in the text form that
costs milliseconds on every Slurm version (DESIGN §2: on 22.05 ``squeue --json`` costs the
same for one job as for the whole queue, ten times the text form). Full detail
(``scontrol show job -d``) is fetched only for a job whose brief state changed. The thread
stops when nothing is watched; a change on the controller reaches watchers within about one
interval, however long the job has been quiet: while any watched job is pending or running the
interval never grows (a brief squeue of the watched jobs costs 5-40 ms, a panel that learns of
its grant ten seconds late costs a person). It backs off only when every watched job has ended
or left the queue, and while the controller fails.

The thread survives anything a round can raise (a controller that answers garbage, a bug in a
parser): the error goes to every watcher and the next round tries again, since a dead poller
would freeze every panel of the kernel without a word. For running jobs it also looks at the
jobs' nodes (one ``sinfo`` every ``node_check_interval``): a node whose slurmd stopped
answering leaves its jobs RUNNING in Slurm's eyes, and only the node's state tells.
"""

from __future__ import annotations

import logging
import threading
import time
from collections import deque
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field

from slurmlab.core.slurm.job_view import JobView, job_view
from slurmlab.core.slurm.jobid import check_job_id
from slurmlab.core.slurm.models import Job
from slurmlab.core.slurm.squeue_brief import JobBrief
from slurmlab.core.slurm.states import ENDED, HOLDING, node_trouble
from slurmlab.errors import JobNotFoundError, SlurmlabError
from slurmlab.slurm.loop_thread import LoopThread
from slurmlab.slurm.runner import Runner, get_runner

__all__ = [
    "BriefFetcher",
    "DetailFetcher",
    "JobPoller",
    "JobUpdate",
    "NodeFetcher",
    "UpdateCallback",
    "Watch",
    "get_poller",
    "node_trouble",
]

log = logging.getLogger(__name__)


# the poller's three questions to Slurm (queries.brief_states, job_detail, node_states_of; tests inject others)
BriefFetcher = Callable[[Sequence[str], Runner], Mapping[str, JobBrief]]
DetailFetcher = Callable[[str, Runner], Job]
NodeFetcher = Callable[[Sequence[str], Runner], Mapping[str, str]]


def _as_slurmlab_error(exc: BaseException, what: str) -> SlurmlabError:
    if isinstance(exc, SlurmlabError):
        return exc
    return SlurmlabError(
        f"slurmlab could not {what}: {type(exc).__name__}: {exc}",
        hint="this is a slurmlab bug: please report it with this message; polling goes on",
    )


@dataclass(frozen=True)
class JobUpdate:
    """What a watcher receives: the brief state, the detail when fetched, or the error."""

    job_id: str
    brief: JobBrief | None = None  # None when Slurm no longer lists the job
    detail: Job | None = None  # from scontrol show job -d, when it changed
    error: SlurmlabError | None = None
    gone: bool = False  # the controller has forgotten the job
    at: float = field(default_factory=time.time)
    # nodes of a running job that are down, draining or not responding: ((node, sinfo state), ...)
    node_alerts: tuple[tuple[str, str], ...] = ()

    @property
    def view(self) -> JobView | None:
        """Both records as one typed view (None when the update carries neither)."""
        return job_view(self.detail, self.brief)


UpdateCallback = Callable[[JobUpdate], None]


@dataclass
class Watch:
    """A registration; ``cancel()`` stops the callbacks."""

    job_id: str
    callback: UpdateCallback
    poller: JobPoller
    active: bool = True

    def cancel(self) -> None:
        if self.active:
            self.active = False
            self.poller._remove(self)


def _signature(brief: JobBrief) -> tuple[object, ...]:
    # what counts as a change: not the ticking time-left / elapsed fields
    return (brief.state, brief.reason, brief.nodes, brief.start_time, brief.end_time, brief.time_limit)


class JobPoller:
    """The shared poller. Use :func:`get_poller` for the process-wide one."""

    def __init__(
        self,
        runner: Runner | None = None,
        *,
        interval: float = 1.0,
        max_interval: float = 10.0,
        quiet_after: float = 60.0,
        fetch_brief: BriefFetcher | None = None,
        fetch_detail: DetailFetcher | None = None,
        fetch_nodes: NodeFetcher | None = None,
        node_check_interval: float = 5.0,
        clock: Callable[[], float] = time.monotonic,
    ) -> None:
        self._runner = runner
        self.interval = interval
        self.max_interval = max_interval
        self.quiet_after = quiet_after
        self.clock = clock  # the loop's sense of time; tests and benchmarks pass a simulated one
        if fetch_brief is None or fetch_detail is None:
            from slurmlab.slurm import queries

            if fetch_brief is None and fetch_detail is None and fetch_nodes is None:
                fetch_nodes = queries.node_states_of
            fetch_brief = fetch_brief or queries.brief_states
            fetch_detail = fetch_detail or queries.job_detail
        self._fetch_brief = fetch_brief
        self._fetch_detail = fetch_detail
        self._fetch_nodes = fetch_nodes
        self.node_check_interval = node_check_interval
        self._node_alerts: dict[str, tuple[tuple[str, str], ...]] = {}
        self._nodes_checked = float("-inf")
        self._lock = threading.RLock()
        self._watches: dict[str, list[Watch]] = {}
        self._last_sig: dict[str, tuple[object, ...] | None] = {}
        self._last: dict[str, JobUpdate] = {}
        self._wake = threading.Event()
        self._loop_thread = LoopThread(self._loop, name="slurmlab-poller", lock=self._lock)
        self.polls = 0  # squeue calls made, for tests and benchmarks
        self.detail_fetches = 0
        self.current_interval = interval
        self.intervals: deque[float] = deque(maxlen=512)  # the waits chosen after each round, newest last
        self.active = False  # a watched job was pending or running at the last round
        self._failed = False  # the last round could not read the watched jobs
        self._quiet_since = clock()
        self._round_hooks: list[Callable[[], None]] = []

    @property
    def runner(self) -> Runner:
        return self._runner or get_runner()

    # ---- registration ----------------------------------------------------------------------
    def watch(self, job_id: str | int, callback: UpdateCallback) -> Watch:
        """Call ``callback(update)`` on every change of ``job_id`` (from the poller thread).

        A ``job_id`` that is not a job id raises RequestError here: passed on, ``-v`` would
        become an option of every later ``squeue`` of this poller."""
        jid = check_job_id(job_id)
        w = Watch(jid, callback, self)
        with self._lock:
            self._watches.setdefault(jid, []).append(w)
            self._last_sig.setdefault(jid, ("<new>",))
            last = self._last.get(jid)
        if last is not None:
            self._deliver(w, last)
        self.poke()
        return w

    def _remove(self, w: Watch) -> None:
        with self._lock:
            lst = self._watches.get(w.job_id, [])
            if w in lst:
                lst.remove(w)
            if not lst:
                self._watches.pop(w.job_id, None)
                self._last_sig.pop(w.job_id, None)
                self._last.pop(w.job_id, None)
                self._node_alerts.pop(w.job_id, None)

    def watched(self) -> list[str]:
        with self._lock:
            return list(self._watches)

    def last(self, job_id: str | int) -> JobUpdate | None:
        with self._lock:
            return self._last.get(str(job_id))

    def add_round_hook(self, hook: Callable[[], None]) -> None:
        """Call ``hook()`` in the poller thread after each round (once per hook; it must not block: the
        inventory cache starts its own refresh thread from it)."""
        with self._lock:
            if hook not in self._round_hooks:
                self._round_hooks.append(hook)

    def poke(self) -> None:
        """Poll now (after a submit or a cancel) and make sure the thread runs."""
        with self._lock:
            self.current_interval = self.interval
        self._loop_thread.ensure_running()
        self._wake.set()

    def stop(self) -> None:
        self._loop_thread.stop(self._wake, timeout=5)

    @property
    def running(self) -> bool:
        return self._loop_thread.running

    # ---- the loop --------------------------------------------------------------------------
    def _loop(self, stop: threading.Event) -> None:
        self._quiet_since = self.clock()
        while not stop.is_set():
            self._wake.clear()
            ids = self.watched()
            if not ids:
                with self._lock:
                    if not self._watches:
                        stop.set()  # under the lock: a poke now sees this thread ending and starts one
                        return
                continue
            wait = self.step(ids)
            self._run_round_hooks()
            self._wake.wait(wait)

    def step(self, ids: Sequence[str] | None = None) -> float:
        """One round (poll, then choose the wait before the next, returned in seconds): the thread's, or a
        test's or benchmark's driving it by hand on a simulated ``clock``."""
        ids = list(ids if ids is not None else self.watched())
        try:
            changed = self.poll_once(ids)
        except Exception as exc:  # the thread must outlive any round
            log.exception("slurmlab: a poll round failed; polling goes on")
            error = _as_slurmlab_error(exc, "poll Slurm")
            for jid in ids:
                self._publish(jid, JobUpdate(jid, error=error), force=self._is_new_error(jid, error))
            self._failed, changed = True, False
        return self._choose_interval(changed)

    def _choose_interval(self, changed: bool) -> float:
        now = self.clock()
        if self._failed:  # a failing controller is asked less often (each failure may take seconds)
            wait = min(self.max_interval, max(self.interval, self.current_interval * 2))
        elif changed:
            self._quiet_since = now
            wait = self.interval
        elif self.active:  # a watched job may start or end at any moment: never back off
            wait = self.interval
        elif now - self._quiet_since > self.quiet_after:  # only ended or forgotten jobs are watched
            wait = min(self.max_interval, self.current_interval * 1.5)
        else:
            wait = self.current_interval
        self.current_interval = wait
        self.intervals.append(wait)
        return wait

    def _run_round_hooks(self) -> None:
        for hook in list(self._round_hooks):
            try:
                hook()
            except Exception:  # a hook (the inventory refresh) must not stop the polling
                log.exception("slurmlab: a poller round hook raised; polling goes on")

    def poll_once(self, ids: Sequence[str] | None = None) -> bool:
        """One round: brief states of ``ids``, detail for the changed ones. True if any changed."""
        ids = list(ids if ids is not None else self.watched())
        if not ids:
            return False
        runner = self.runner
        self.polls += 1
        try:
            briefs = dict(self._fetch_brief(ids, runner))
        except Exception as exc:  # garbage from squeue must not end the thread
            # the controller is down or hung: tell every watcher once per distinct error, back off
            failure = _as_slurmlab_error(exc, "read the state of the watched jobs")
            for jid in ids:
                self._publish(jid, JobUpdate(jid, error=failure), force=self._is_new_error(jid, failure))
            self._failed = True
            return False
        self._failed = False
        self.active = any(b.state not in ENDED for b in briefs.values())
        self._check_nodes(briefs, runner)
        any_change = False
        for jid in ids:
            brief = briefs.get(jid)
            alerts = self._node_alerts.get(jid, ())
            sig = (_signature(brief), alerts) if brief is not None else None
            with self._lock:
                prev = self._last_sig.get(jid, ("<new>",))
                prev_update = self._last.get(jid)
            recovered = prev_update is not None and prev_update.error is not None
            if sig == prev and not recovered:
                continue
            any_change = True
            detail: Job | None = None
            gone = False
            error: SlurmlabError | None = None
            try:
                self.detail_fetches += 1
                detail = self._fetch_detail(jid, runner)
            except JobNotFoundError:
                gone = brief is None
            except Exception as exc:  # one unreadable job must not stop the others
                error = _as_slurmlab_error(exc, f"read job {jid}")
            with self._lock:
                self._last_sig[jid] = sig
            self._publish(
                jid,
                JobUpdate(jid, brief=brief, detail=detail, error=error, gone=gone, node_alerts=alerts),
                force=True,
            )
        return any_change

    def _check_nodes(self, briefs: Mapping[str, JobBrief], runner: Runner) -> None:
        """Refresh the node alerts of running watched jobs, at most every node_check_interval."""
        if self._fetch_nodes is None:
            return
        running = {jid: b.nodes for jid, b in briefs.items() if b.state in HOLDING}
        nodes = sorted({n for ns in running.values() for n in ns})
        now = time.monotonic()
        if not nodes:
            self._node_alerts.clear()
            return
        if now - self._nodes_checked < self.node_check_interval:
            return
        self._nodes_checked = now
        try:
            states = self._fetch_nodes(nodes, runner)
        except Exception:  # node health is a hint; the job's own state still arrives
            log.debug("slurmlab: node states unavailable", exc_info=True)
            return
        trouble = dict(node_trouble(states))
        self._node_alerts = {
            jid: tuple((n, trouble[n]) for n in ns if n in trouble) for jid, ns in running.items()
        }

    def _is_new_error(self, jid: str, exc: SlurmlabError) -> bool:
        with self._lock:
            prev = self._last.get(jid)
        return prev is None or prev.error is None or str(prev.error) != str(exc)

    def _publish(self, jid: str, update: JobUpdate, *, force: bool) -> None:
        if not force:
            return
        with self._lock:
            if jid not in self._watches:
                return
            self._last[jid] = update
            watchers = list(self._watches.get(jid, []))
        for w in watchers:
            self._deliver(w, update)

    @staticmethod
    def _deliver(w: Watch, update: JobUpdate) -> None:
        if not w.active:
            return
        try:
            w.callback(update)
        except Exception:  # a broken watcher must not stop the others
            log.exception("slurmlab: a job watcher raised; it keeps its registration")


_pollers: dict[tuple[str | None, str | None], JobPoller] = {}
_poller_lock = threading.Lock()


def get_poller(runner: Runner | None = None) -> JobPoller:
    """The shared poller of one cluster (one per SLURM_CONF and cluster name).

    Job ids are per cluster, so watchers of two clusters (two sandboxes, say) never share
    a poller; watchers of one cluster always do.
    """
    import os

    r = runner or get_runner()
    key = (r.slurm_conf or os.environ.get("SLURM_CONF"), r.cluster)
    with _poller_lock:
        poller = _pollers.get(key)
        if poller is None:
            poller = _pollers[key] = JobPoller(r)
        return poller
