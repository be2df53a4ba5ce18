"""The cluster inventory cached per cluster (issue 14, point 2): ``%salloc`` checks against it without asking
Slurm; it is refreshed in the background when old and by the shared poller; a refusal is always confirmed
against a freshly fetched one. Assertions are on the Slurm calls made (FakeRunner's history, fetch counts)
and on a simulated clock, never on wall time."""

from __future__ import annotations

from typing import Any

import pytest

from slurmlab.core.request.inventory import ClusterInventory, NodeInventory
from slurmlab.core.request.request import RequestProblems, parse_request
from slurmlab.errors import ControllerDownError, ParseError
from slurmlab.slurm import inventory as inv_mod
from slurmlab.slurm.inventory import InventoryCache, KnownInventory, check_with_inventory, cluster_inventory
from slurmlab.testing import FakeRunner


class Clock:
    def __init__(self) -> None:
        self.now = 500.0

    def __call__(self) -> float:
        return self.now


def _cluster(gpu_type: str, nodes: int = 4) -> ClusterInventory:
    ns = [
        NodeInventory(f"n{i}", cpus=48, memory_mb=64000, sockets=2, gpus={gpu_type: 4}) for i in range(nodes)
    ]
    return ClusterInventory.build(nodes=ns, partitions={"gpu": [n.name for n in ns]}, default="gpu")


class Controller:
    """What the cluster offers now; every fetch is counted. ``fail`` makes the next fetches raise it."""

    def __init__(self, clock: Clock, gpu_type: str = "h100") -> None:
        self.clock, self.gpu_type = clock, gpu_type
        self.fetched = 0
        self.fail: Exception | None = None

    def fetch(self, runner: Any) -> KnownInventory:
        self.fetched += 1
        if self.fail is not None:
            raise self.fail
        return KnownInventory(_cluster(self.gpu_type), (), self.clock())


def _cache(ctl: Controller) -> InventoryCache:
    return InventoryCache(FakeRunner(), fetch=ctl.fetch, clock=ctl.clock, fresh_for=60, max_age=900)


@pytest.fixture
def cached(monkeypatch: pytest.MonkeyPatch) -> tuple[InventoryCache, Controller]:
    """The cache check_with_inventory finds for a FakeRunner, fed by a Controller on a simulated clock."""
    clock = Clock()
    ctl = Controller(clock)
    runner = FakeRunner()
    cache = InventoryCache(runner, fetch=ctl.fetch, clock=clock)
    monkeypatch.setattr(inv_mod, "_caches", {runner.cluster_key(): cache})
    return cache, ctl


def test_fetched_once_then_served_from_the_cache() -> None:
    ctl = Controller(Clock())
    cache = _cache(ctl)
    first = cache.get()
    assert cache.get() is first and cache.get() is first
    assert ctl.fetched == 1


def test_older_than_fresh_for_is_served_and_refreshed_in_the_background() -> None:
    ctl = Controller(Clock())
    cache = _cache(ctl)
    first = cache.get()
    ctl.clock.now += 61
    assert cache.get() is first  # no wait for Slurm: the old one now, a new one for the next check
    cache.join(timeout=10)
    assert ctl.fetched == 2 and cache.peek() is not first and cache.age() == 0


def test_older_than_max_age_is_fetched_before_use() -> None:
    ctl = Controller(Clock())
    cache = _cache(ctl)
    first = cache.get()
    ctl.clock.now += 901
    assert cache.get() is not first and ctl.fetched == 2


def test_a_failed_background_refresh_keeps_the_cached_inventory_and_says_why() -> None:
    ctl = Controller(Clock())
    cache = _cache(ctl)
    first = cache.get()
    ctl.clock.now += 61
    ctl.fail = ControllerDownError("the Slurm controller is not responding")
    assert cache.get() is first
    cache.join(timeout=10)
    assert cache.peek() is first and isinstance(cache.last_error, ControllerDownError)


def test_no_inventory_and_no_controller_is_the_controllers_error() -> None:
    ctl = Controller(Clock())
    ctl.fail = ControllerDownError("the Slurm controller is not responding")
    with pytest.raises(ControllerDownError, match="not responding"):
        _cache(ctl).get()


def test_a_request_the_cache_accepts_costs_no_fetch(cached: tuple[InventoryCache, Controller]) -> None:
    cache, ctl = cached
    runner = cache.runner
    for _ in range(5):
        checked = check_with_inventory(parse_request(["--gpus=h100:2", "-t", "30"]), runner)
        assert checked.checked is not None and checked.checked.partitions == 1
    assert ctl.fetched == 1


def test_a_refusal_is_confirmed_against_a_fresh_inventory(cached: tuple[InventoryCache, Controller]) -> None:
    cache, ctl = cached
    runner = cache.runner
    check_with_inventory(parse_request(["--gpus=h100:1"]), runner)
    # the administrators replaced the GPUs since: the cached inventory would refuse a100
    ctl.gpu_type = "a100"
    ctl.clock.now += 5
    checked = check_with_inventory(parse_request(["--gpus=a100:2"]), runner)
    assert checked.checked is not None and ctl.fetched == 2
    # and a request the fresh inventory also refuses is refused, with the fresh inventory's words
    ctl.clock.now += 5
    with pytest.raises(RequestProblems, match="h100") as refused:
        check_with_inventory(parse_request(["--gpus=h100:1"]), runner)
    assert "a100" in str(refused.value) and ctl.fetched == 3


def test_a_refusal_from_an_inventory_fetched_for_this_check_is_not_fetched_again(
    cached: tuple[InventoryCache, Controller],
) -> None:
    cache, ctl = cached
    with pytest.raises(RequestProblems):
        check_with_inventory(parse_request(["--gpus=v100:1"]), cache.runner)
    assert ctl.fetched == 1


def test_a_refusal_the_controller_cannot_confirm_is_not_given(
    cached: tuple[InventoryCache, Controller],
) -> None:
    cache, ctl = cached
    check_with_inventory(parse_request(["--gpus=h100:1"]), cache.runner)
    ctl.clock.now += 5
    ctl.fail = ControllerDownError("the Slurm controller is not responding")
    with pytest.raises(ControllerDownError):  # never "no v100 GPUs" from what the cluster offered before
        check_with_inventory(parse_request(["--gpus=v100:1"]), cache.runner)


def test_the_shared_poller_refreshes_a_stale_inventory_after_its_rounds(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    from slurmlab.slurm.poller import get_poller

    monkeypatch.setattr(inv_mod, "_caches", {})
    runner = FakeRunner()
    cache = cluster_inventory(runner)
    assert cluster_inventory(runner) is cache  # one per cluster
    ctl = Controller(Clock())
    cache._fetch, cache.clock = ctl.fetch, ctl.clock
    poller = get_poller(runner)
    poller._run_round_hooks()
    assert ctl.fetched == 0  # nobody asked for it yet: the poller does not fetch it
    cache.get()
    ctl.clock.now += 61
    poller._run_round_hooks()
    cache.join(timeout=10)
    assert ctl.fetched == 2


def test_fetched_from_recorded_slurm_output_then_no_slurm_call_per_check() -> None:
    """The real queries through the one Runner (24.11's JSON, with sinfo naming the default partition that
    24.11's partition JSON leaves out): the first check asks Slurm, the next ones do not."""
    from slurmlab.slurm.allocation.request import check_request

    fake = FakeRunner()
    fake.replay_cluster("24.11")
    first = check_request(["--gpus=1", "-t", "10"], fake)
    asked = len(fake.history)
    assert any(a[:3] == ["scontrol", "--json", "show"] and "node" in a for a in fake.history)
    for _ in range(3):
        again = check_request(["--gpus=1", "-t", "10"], fake)
        assert again.checked == first.checked
    assert len(fake.history) == asked  # from the cache: not one more Slurm call
    known = cluster_inventory(fake).peek()
    assert known is not None and known.inventory.default_partition is not None
    assert {p.name for p in known.partitions} == set(known.inventory.partition_names)
    fake.close()


@pytest.mark.parametrize("garbage", ["{", "not json at all", '{"nodes": 7}'])
def test_unreadable_node_output_is_one_clear_error_and_nothing_is_cached(garbage: str) -> None:
    fake = FakeRunner()
    fake.replay_cluster("24.11")
    fake.on(["scontrol", "--json", "show", "node"], stdout=garbage)
    cache = InventoryCache(fake)
    with pytest.raises(ParseError, match="cannot parse") as err:
        cache.get()
    assert err.value.hint and "Traceback" not in str(err.value)
    assert cache.peek() is None  # the next check asks again
    fake.close()


@pytest.mark.parametrize("record", ['{"name": null}', '{"name": "x", "cpus": "lots"}'])
def test_an_unreadable_node_record_is_kept_as_a_problem_not_dropped_silently(record: str) -> None:
    fake = FakeRunner()
    fake.replay_cluster("24.11")
    fake.on(["scontrol", "--json", "show", "node"], stdout='{"nodes": [' + record + "]}")
    known = InventoryCache(fake).get()
    assert len(known.problems) == 1 and isinstance(known.problems[0], ParseError)
    assert all(p.nodes == () for p in known.inventory.partitions)  # no node invented from the bad record
    fake.close()
