"""What the cluster offers (nodes, partitions, GRES, CPUs, memory), cached per cluster.

``%salloc`` checks every request against the inventory before it submits. Fetched each time, that is the whole
node and partition lists from the controller and their parse: about a third of a second of CPU at 1,000 nodes,
and three Slurm calls, for something that changes when an administrator edits slurm.conf. So the inventory is
kept per cluster (one per SLURM_CONF and cluster name, like the shared poller) and a check reads it without
asking Slurm:

- younger than ``fresh_for`` (60 s) it is used as it is;
- older, it is still used, and a refresh starts in the background (the shared poller also starts one after
  its rounds while jobs are watched), so the next check finds it fresh;
- older than ``max_age`` (15 min), or never fetched, the check fetches it first;
- a request it refuses is checked again against an inventory fetched then: a refusal never comes from stale
  data. A request it accepts goes to Slurm, which has the last word anyway.

API::

    cluster_inventory(runner) -> InventoryCache      the cache of the runner's cluster
    cache.get() -> KnownInventory                    cached (fetched when missing or too old)
    cache.refresh() -> KnownInventory                fetched now
    forget_inventories()                             drop every cached one (a cluster reconfigured, tests)
    check_with_inventory(request, runner, version=)  the request pipeline against the cached inventory
"""

from __future__ import annotations

import logging
import threading
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass, replace

from slurmlab.core.request.inventory import ClusterInventory
from slurmlab.core.request.problems import RequestProblems
from slurmlab.core.request.request import GpuRequest
from slurmlab.core.slurm.models import Partition
from slurmlab.errors import ParseError
from slurmlab.slurm.runner import Runner, get_runner

__all__ = [
    "InventoryCache",
    "KnownInventory",
    "check_with_inventory",
    "cluster_inventory",
    "fetch_inventory",
    "forget_inventories",
]

log = logging.getLogger(__name__)


@dataclass(frozen=True)
class KnownInventory:
    """One fetch of the inventory: the model requests are checked against, the partitions as Slurm described
    them (their default and time limits, for ``%salloc``'s notes), and when it was fetched."""

    inventory: ClusterInventory
    partitions: tuple[Partition, ...]
    fetched_at: float  # when the fetch began, on the cache's clock (time.monotonic)
    problems: tuple[ParseError, ...] = ()  # records that could not be read (the others were)


def fetch_inventory(runner: Runner, clock: Callable[[], float] = time.monotonic) -> KnownInventory:
    """Ask Slurm for the partitions and nodes (and, where the partitions do not say, sinfo for the default)."""
    from slurmlab.slurm.node_queries import build_inventory, default_partition, list_nodes, list_partitions

    started = clock()  # the data is at least this new: what "fetched after a check began" compares
    partitions = list_partitions(runner)
    problems = list(partitions.problems)
    found = list(partitions)
    # JSON of 24.11+ may carry no partition flags: unknown is not "no default"
    if not any(p.default for p in found) and any(p.default is None for p in found):
        name = default_partition(runner)
        found = [replace(p, default=p.name == name) for p in found]
    nodes = list_nodes(runner)
    problems += nodes.problems
    return KnownInventory(build_inventory(nodes, found), tuple(found), started, tuple(problems))


class InventoryCache:
    """The inventory of one cluster, kept between checks. Thread-safe; :func:`cluster_inventory` gives the
    shared one of a runner's cluster."""

    def __init__(
        self,
        runner: Runner,
        *,
        fresh_for: float = 60.0,
        max_age: float = 900.0,
        fetch: Callable[[Runner], KnownInventory] | None = None,
        clock: Callable[[], float] = time.monotonic,
    ) -> None:
        self.runner = runner
        self.fresh_for = fresh_for
        self.max_age = max_age
        self.clock = clock
        self._fetch = fetch or (lambda r: fetch_inventory(r, clock))
        self._known: KnownInventory | None = None
        self._lock = threading.Lock()  # guards _known and _thread
        self._fetching = threading.Lock()  # one fetch at a time
        self._thread: threading.Thread | None = None
        self.fetches = 0  # for tests and benchmarks
        self.last_error: Exception | None = None  # of the last background refresh, None once one succeeds

    def peek(self) -> KnownInventory | None:
        """What is cached, however old; None before the first fetch."""
        with self._lock:
            return self._known

    def age(self) -> float | None:
        known = self.peek()
        return None if known is None else self.clock() - known.fetched_at

    def get(self) -> KnownInventory:
        """The cached inventory; fetched first when there is none or it is older than ``max_age``, refreshed in
        the background when older than ``fresh_for``. Raises what the fetch raises (SlurmError ...)."""
        known = self.peek()
        if known is None or self.clock() - known.fetched_at > self.max_age:
            return self.refresh()
        if self.clock() - known.fetched_at > self.fresh_for:
            self.refresh_in_background()
        return known

    def refresh(self) -> KnownInventory:
        """Fetch the inventory now. A fetch that started while this one waited for the previous is reused."""
        asked = self.clock()
        with self._fetching:
            known = self.peek()
            if known is not None and known.fetched_at >= asked:
                return known  # fetched by the background refresh while this call waited for it
            self.fetches += 1
            known = self._fetch(self.runner)
            with self._lock:
                self._known = known
            return known

    def refresh_in_background(self) -> None:
        """Start a refresh in a daemon thread unless one is running; its failure keeps the cached inventory."""
        with self._lock:
            if self._thread is not None and self._thread.is_alive():
                return
            self._thread = threading.Thread(
                target=self._refresh_quietly, name="slurmlab-inventory", daemon=True
            )
            self._thread.start()

    def refresh_if_stale(self) -> None:
        """The shared poller's round hook: refresh in the background what is cached and older than
        ``fresh_for`` (an inventory nobody has asked for is not fetched)."""
        age = self.age()
        if age is not None and age > self.fresh_for:
            self.refresh_in_background()

    def join(self, timeout: float | None = None) -> None:
        """Wait for a background refresh (tests, benchmarks)."""
        with self._lock:
            t = self._thread
        if t is not None:
            t.join(timeout)

    def _refresh_quietly(self) -> None:
        try:
            self.refresh()
            self.last_error = None
        except Exception as exc:  # a controller that does not answer now: the next check says so
            self.last_error = exc
            log.debug("slurmlab: background inventory refresh failed", exc_info=True)


_Key = tuple[str | None, str | None, str | None]
_caches: dict[_Key, InventoryCache] = {}
_hooked: set[_Key] = set()  # clusters whose poller refreshes their inventory
_caches_lock = threading.Lock()


def cluster_inventory(runner: Runner | None = None) -> InventoryCache:
    """The inventory cache of the runner's cluster (one per :meth:`Runner.cluster_key`).

    The cluster's shared poller refreshes it after its rounds once it is older than ``fresh_for``."""
    from slurmlab.slurm.poller import get_poller

    r = runner or get_runner()
    key = r.cluster_key()
    with _caches_lock:
        cache = _caches.get(key)
        if cache is None:
            cache = _caches[key] = InventoryCache(r)
        hook = key not in _hooked
        _hooked.add(key)
    if hook:  # the hook finds the cache by its key: forget_inventories() leaves no stale one behind
        get_poller(r).add_round_hook(lambda: _refresh_if_stale(key))
    return cache


def _refresh_if_stale(key: _Key) -> None:
    with _caches_lock:
        cache = _caches.get(key)
    if cache is not None:
        cache.refresh_if_stale()


def forget_inventories() -> None:
    """Drop every cached inventory (the next check fetches): after the cluster's configuration changed."""
    with _caches_lock:
        _caches.clear()


def check_with_inventory(
    request: GpuRequest, runner: Runner | None = None, *, version: Sequence[int] | None = None
) -> GpuRequest:
    """The request pipeline against the cluster's cached inventory; a refusal is confirmed against a fresh one.

    Raises RequestProblems (a refusal the fresh inventory confirms), or SlurmError when the inventory cannot be
    fetched (none cached, too old, or needed to confirm a refusal)."""
    from slurmlab.core.request import pipeline

    cache = cluster_inventory(runner)
    asked = cache.clock()
    known = cache.get()
    try:
        return pipeline.check_request(request, known.inventory, version=version)
    except RequestProblems:
        if known.fetched_at >= asked:  # fetched for this check: nothing fresher to ask
            raise
    return pipeline.check_request(request, cache.refresh().inventory, version=version)
