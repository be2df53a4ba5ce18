"""The widgets follow real allocations of the sandbox by themselves, changed only by the updater thread."""

from __future__ import annotations

import threading
import time
from collections.abc import Iterator
from typing import Any

import pytest

pytestmark = pytest.mark.sandbox
pytest.importorskip("ipywidgets")


def _until(cond: Any, timeout: float) -> bool:
    end = time.monotonic() + timeout
    while time.monotonic() < end:
        if cond():
            return True
        time.sleep(0.05)
    return bool(cond())


@pytest.fixture
def allocations(slurm_sandbox: Any) -> Iterator[list[Any]]:
    made: list[Any] = []
    yield made
    for alloc in made:
        alloc.cancel()


def _submit(allocations: list[Any], *argv: str) -> Any:
    from slurmlab.slurm.allocation import Allocation

    alloc = Allocation.submit(list(argv))
    allocations.append(alloc)
    return alloc


class _ThreadSpy:
    """Records which thread assigns each trait of a widget (observers run in the assigning thread)."""

    def __init__(self, *widgets: Any) -> None:
        self.threads: set[threading.Thread] = set()
        for w in widgets:
            w.observe(lambda _c: self.threads.add(threading.current_thread()))


def test_panel_turns_running_by_itself_when_the_blocker_goes(
    slurm_sandbox: Any, allocations: list[Any]
) -> None:
    from slurmlab.slurm import queries
    from slurmlab.widgets.live import get_updater
    from slurmlab.widgets.panel import AllocationPanel

    blocker = _submit(allocations, f"-N{len(slurm_sandbox.nodes)}", "--gpus-per-node=8", "-t", "5")
    blocker.wait("RUNNING", timeout=30)
    alloc = _submit(allocations, "--gpus=2", "-t", "5")
    panel = AllocationPanel.for_allocation(alloc)
    assert AllocationPanel.for_allocation(alloc) is panel  # one panel per allocation
    spy = _ThreadSpy(panel.header, panel.body, panel.cancel_button)
    assert _until(lambda: "PENDING" in panel.header.value and "Waiting" in panel.body.value, 15)
    queries.cancel_job(blocker.job_id)
    freed = time.monotonic()
    assert _until(lambda: "RUNNING" in panel.header.value, 10)
    assert time.monotonic() - freed < 3.0
    assert _until(lambda: "Time left" in panel.body.value and "GPUs (index)" in panel.body.value, 5)
    node, idx = next(iter(alloc.gpus.items()))
    assert f"#{','.join(map(str, idx))}" in panel.body.value and node in panel.body.value
    assert spy.threads == {get_updater().thread}  # never the poller's thread, never this one


def test_panel_lists_steps_and_cancel_button_releases(allocations: list[Any]) -> None:
    from slurmlab.widgets.panel import AllocationPanel

    alloc = _submit(allocations, "--gpus=1", "-t", "5")
    alloc.wait("RUNNING", timeout=30)
    panel = AllocationPanel.for_allocation(alloc)
    alloc.srun(["true"], on_output=lambda *_: None)
    assert _until(lambda: "Steps</b> (1)" in panel.body.value and "exit 0" in panel.body.value, 5)
    panel.cancel_button.click()
    assert _until(lambda: alloc.state == "CANCELLED", 15)
    assert _until(lambda: "CANCELLED" in panel.header.value and panel.cancel_button.disabled, 5)


def test_display_of_an_allocation_is_its_live_panel(ip_with_magics: Any, allocations: list[Any]) -> None:
    alloc = _submit(allocations, "--gpus=1", "-t", "5")
    bundle, _ = ip_with_magics.display_formatter.format(alloc)  # what the notebook shows: IPython's formatter
    assert "application/vnd.jupyter.widget-view+json" in bundle
    assert bundle["text/plain"].startswith("<Allocation")


@pytest.fixture
def ip_with_magics() -> Iterator[Any]:
    from IPython.testing.globalipapp import get_ipython

    ip = get_ipython()
    ip.run_line_magic("load_ext", "slurmlab.magics")
    yield ip
    ip.run_line_magic("unload_ext", "slurmlab.magics")


def test_queue_monitor_refreshes_filters_and_sorts(allocations: list[Any]) -> None:
    from slurmlab.widgets.live import LiveUpdater
    from slurmlab.widgets.queue import QueueMonitor

    first = _submit(allocations, "--gpus=1", "-t", "5")
    up = LiveUpdater(period=0.05)
    monitor = QueueMonitor(interval=0.5, updater=up)
    try:
        assert _until(lambda: str(first.job_id) in {r["job"] for r in monitor.rows}, 10)
        second = _submit(allocations, "--gpus=1", "-t", "5")
        # no call from here: the monitor refreshes by itself
        assert _until(lambda: str(second.job_id) in monitor.table.value, 10)
        monitor.sort_by.value = "job"
        monitor.descending.value = True

        def second_first() -> bool:
            html = monitor.table.value
            a, b = html.find(f">{second.job_id}<"), html.find(f">{first.job_id}<")
            return -1 < a < b

        assert _until(second_first, 5), monitor.table.value
        monitor.scope.value = "all"
        assert _until(lambda: monitor._fetched_scope == "all", 5)
        assert "jobs, updated" in monitor.status.value
        monitor.stop()
        fetches = monitor.fetches
        time.sleep(1.2)
        assert monitor.fetches == fetches and "not refreshing" in monitor.status.value
    finally:
        up.stop()


def test_form_submit_creates_an_allocation_and_shows_its_panel(allocations: list[Any]) -> None:
    from slurmlab.widgets.form import RequestForm
    from slurmlab.widgets.panel import AllocationPanel

    made: list[Any] = []
    form = RequestForm(on_submit=made.append)
    form.gpu_type.value = "h100"
    form.count.value = 1
    form.time.value = "5"
    form.render()
    assert form.problem is None, form.problem
    alloc = form.submit()
    assert alloc is not None, form.submit_error
    allocations.append(alloc)
    assert made == [alloc]
    alloc.wait("RUNNING", timeout=30)
    assert _until(lambda: AllocationPanel.for_allocation(alloc).widget in form.result.children, 5)


def test_panel_shows_shards_per_gpu(allocations: list[Any]) -> None:
    from slurmlab.widgets.panel import AllocationPanel

    alloc = _submit(allocations, "--gres=shard:4", "-t", "5")
    alloc.wait("RUNNING", timeout=30)
    panel = AllocationPanel.for_allocation(alloc)
    assert _until(lambda: "shards on GPU" in panel.body.value, 5)
    (node_alloc,) = alloc.job.gpu_allocs
    ((gpu, count),) = node_alloc.shares("shard").items()
    assert f"shards on GPU {gpu}: {count}" in panel.body.value and count == 4
