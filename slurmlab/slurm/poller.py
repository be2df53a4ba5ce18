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

A job whose news Slurm pushes to a process of ours (the salloc that holds an allocation hears of its grant,
revocation, time limit and node failure the moment slurmctld decides them: :meth:`JobPoller.pushed`) is polled
every round only until it has *settled*: until a read shows it holding its nodes with its detail (nodes, GPU
indices). Slurm pushes a pending job's grant, but not its reason or expected start, so a pending job is read at
the base interval as any other; right after its grant the rounds go on until the detail has its nodes (at most
``pushed_settle_for`` seconds). A settled one is read only every ``pushed_interval`` (5 min), a check that costs
one ``squeue`` and catches what no push says (a time limit changed by an administrator). Such a job takes no node
check (slurmctld pushes a node failure too) and its quiet rounds start no round hook (the inventory refresh is for
a kernel about to submit, not for one that holds a quiet allocation): an idle allocation costs the controller one
call in five minutes instead of several a second. A poke reads every watched job at once.
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
from slurmlab.slurm.throttle import Backoff, calm_window, controller_rate_limits

__all__ = [
    "BriefFetcher",
    "DetailFetcher",
    "JobPoller",
    "JobUpdate",
    "NodeFetcher",
    "UpdateCallback",
    "Watch",
    "drop_poller",
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
        pushed_interval: float = 300.0,
        pushed_settle_for: float = 30.0,
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
        self.pushed_interval = pushed_interval
        self.pushed_settle_for = pushed_settle_for
        # jobs whose news Slurm pushes to a process of ours: read every pushed_interval only, once settled
        self._pushed: set[str] = set()
        # when a read first saw each pushed job holding with no nodes in its detail yet
        self._held_unsettled_since: dict[str, float] = {}
        self._polled_at: dict[str, float] = {}  # when each watched job was last read (poller's clock)
        self._poll_all = False  # a poke: the next round reads every watched job, pushed or not
        self.rounds_polled: list[str] = []  # the jobs the last round read (tests, benchmarks)
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
        # a throttled squeue answers right but seconds late (the client sleeps and asks again): rounds wait longer
        self.backoff = Backoff(clock=clock, calm_for=calm_window(interval))

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
                self._pushed.discard(w.job_id)
                self._polled_at.pop(w.job_id, None)
                self._held_unsettled_since.pop(w.job_id, None)

    def watched(self) -> list[str]:
        with self._lock:
            return list(self._watches)

    def last(self, job_id: str | int) -> JobUpdate | None:
        with self._lock:
            return self._last.get(str(job_id))

    def pushed(self, job_id: str | int, pushed: bool = True) -> None:
        """Whether Slurm pushes ``job_id``'s news to a process of ours (its holding salloc): then, once settled
        (holding its nodes, detail read), it is read only every ``pushed_interval``; without (the salloc ended),
        every round again, starting now."""
        jid = str(job_id)
        with self._lock:
            if pushed:
                self._pushed.add(jid)
                return
            was = jid in self._pushed
            self._pushed.discard(jid)
        if was:
            self.poke()

    def is_pushed(self, job_id: str | int) -> bool:
        with self._lock:
            return str(job_id) in self._pushed

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
            self._poll_all = True
        self._loop_thread.ensure_running()
        self._wake.set()

    def stop(self) -> None:
        self._loop_thread.stop(self._wake, timeout=5)

    @property
    def running(self) -> bool:
        return self._loop_thread.running

    @property
    def slow_words(self) -> str | None:
        """While the controller holds this poller's answers back (a rate limit, a busy controller), the line a
        panel shows: who slows the updates and how often they come; else None."""
        return self.backoff.words(self.current_interval)

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
            self._wake.wait(wait)

    def step(self, ids: Sequence[str] | None = None) -> float:
        """One round (poll, run the round hooks, then choose the wait before the next, returned in seconds): the
        thread's, or a test's or benchmark's driving it by hand on a simulated ``clock``."""
        wait = self._round(ids)
        with self._lock:
            polled_a_pulled_job = any(not self._settled(jid) for jid in self.rounds_polled)
        if polled_a_pulled_job:  # a quiet pushed job's check is no reason to refresh anything else
            self._run_round_hooks()
        return wait

    def _round(self, ids: Sequence[str] | None) -> float:
        ids = list(ids if ids is not None else self.watched())
        due = self._due(ids)
        self.rounds_polled = due
        if not due:  # only pushed jobs, none due for its check: sleep until the first is
            return self._until_pushed_due(ids)
        try:
            changed = self.poll_once(due)
        except Exception as exc:  # the thread must outlive any round
            log.exception("slurmlab: a poll round failed; polling goes on")
            error = _as_slurmlab_error(exc, "poll Slurm")
            for jid in ids:
                self._publish(jid, JobUpdate(jid, error=error), force=self._is_new_error(jid, error))
            self._failed, changed = True, False
        wait = self.backoff.stretch(self._choose_interval(changed))
        if not self._failed and all(jid in self._pushed for jid in ids):
            wait = max(wait, self._until_pushed_due(ids))  # nothing but pushed jobs: no round before a check
        return wait

    def _due(self, ids: Sequence[str]) -> list[str]:
        """The jobs this round reads: every one after a poke; else those not pushed or not settled, and the
        settled pushed ones whose last read is ``pushed_interval`` old."""
        now = self.clock()
        with self._lock:
            if self._poll_all:
                self._poll_all = False
                return list(ids)
            return [
                jid
                for jid in ids
                if jid not in self._pushed
                or now - self._polled_at.get(jid, float("-inf")) >= self._check_interval(jid)
            ]

    def _check_interval(self, jid: str) -> float:
        """How often a pushed job is read (under the lock): every round until settled, then every
        ``pushed_interval``."""
        return self.pushed_interval if self._settled(jid) else 0.0

    def _settled(self, jid: str) -> bool:
        """Whether a job's news now comes by push alone (under the lock): it is pushed, and the last read saw it
        holding with its detail's nodes (or gave up waiting for them: :meth:`_detail_missing`). A pending job is
        never settled: Slurm pushes its grant, not its reason or expected start."""
        if jid not in self._pushed:
            return False
        last = self._last.get(jid)
        if last is None or last.brief is None or last.brief.state not in HOLDING:
            return False
        return not self._detail_missing(jid)

    def _detail_missing(self, jid: str) -> bool:
        """A pushed job the last read saw holding, whose detail has no nodes yet (a just-granted job whose
        ``scontrol show job`` failed or came back empty): read again each round, detail included, for at most
        ``pushed_settle_for`` seconds (a detail that never shows nodes must not keep it read every round for
        ever). Under the lock."""
        last = self._last.get(jid)
        if jid not in self._pushed or last is None or last.brief is None or last.brief.state not in HOLDING:
            return False
        if last.detail is not None and last.detail.nodes:
            return False
        since = self._held_unsettled_since.setdefault(jid, self.clock())
        return self.clock() - since < self.pushed_settle_for

    def _until_pushed_due(self, ids: Sequence[str]) -> float:
        """Seconds until the first pushed job of ``ids`` is due for its check (at least the base interval)."""
        now = self.clock()
        with self._lock:
            dues = [
                self._polled_at.get(jid, float("-inf")) + self._check_interval(jid)
                for jid in ids
                if jid in self._pushed
            ]
        if not dues:
            return self.interval
        return max(self.interval, min(dues) - now)

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
        asked = self.clock()
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
        read_at = self.clock()
        # a site whose slurm.conf turns rl_enable on is named as rate-limiting (tests pass runners of their own)
        limits = read_at - asked >= self.backoff.slow_after and controller_rate_limits(
            getattr(runner, "slurm_conf", None)
        )
        note = self.backoff.answered(read_at - asked, site_limits=limits)
        if note:
            log.warning("slurmlab: %s", note)
        with self._lock:
            for jid in ids:
                self._polled_at[jid] = read_at
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
                detail_missing = self._detail_missing(jid)
            recovered = prev_update is not None and prev_update.error is not None
            if sig == prev and not recovered and not detail_missing:
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
        # a pushed job's node failure reaches its salloc from slurmctld: no sinfo for it
        running = {
            jid: b.nodes for jid, b in briefs.items() if b.state in HOLDING and jid not in self._pushed
        }
        nodes = sorted({n for ns in running.values() for n in ns})
        now = time.monotonic()
        if not nodes:
            for jid in briefs:
                if jid not in self._pushed:
                    self._node_alerts.pop(jid, None)
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


_pollers: dict[tuple[str | None, str | None, str | None], JobPoller] = {}
_poller_lock = threading.Lock()


def get_poller(runner: Runner | None = None) -> JobPoller:
    """The shared poller of one cluster (one per :meth:`Runner.cluster_key`: SSH login, SLURM_CONF, cluster name).

    Job ids are per cluster, so watchers of two clusters (two sandboxes, a local one and one over SSH) never share
    a poller; watchers of one cluster always do.
    """
    r = runner or get_runner()
    key = r.cluster_key()
    with _poller_lock:
        poller = _pollers.get(key)
        if poller is None:
            poller = _pollers[key] = JobPoller(r)
        return poller


def drop_poller(runner: Runner) -> JobPoller | None:
    """Forget the shared poller of ``runner``'s cluster (the caller stops it); None when there was none."""
    with _poller_lock:
        return _pollers.pop(runner.cluster_key(), None)
