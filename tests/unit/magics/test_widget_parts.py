"""Pieces of the widgets that need no Slurm: plain-word reasons, tables, the one updater thread, the form."""

from __future__ import annotations

import threading
import time
from typing import Any

import pytest

from slurmlab.widgets.live import LiveUpdater
from slurmlab.widgets.rows import Table, fmt_seconds, plain_reason


def test_reasons_in_plain_words_keep_slurms_word() -> None:
    assert plain_reason("Resources").startswith("waiting for resources")
    assert plain_reason("Resources").endswith("(Resources)")
    assert "down, drained or reserved" in plain_reason("ReqNodeNotAvail, UnavailableNodes:node1")
    assert plain_reason("SomethingNew") == "SomethingNew"  # unknown: shown as Slurm wrote it
    assert plain_reason(None) == "" and plain_reason("None") == ""


@pytest.mark.parametrize(
    ("seconds", "text"),
    [
        (None, "-"),
        (0, "00:00:00"),
        (59.9, "00:00:59"),
        (3661, "01:01:01"),
        (90061, "1-01:01:01"),
        (-5, "00:00:00"),
    ],
)
def test_fmt_seconds(seconds: float | None, text: str) -> None:
    assert fmt_seconds(seconds) == text


def test_table_aligns_text_and_escapes_html() -> None:
    t = Table([{"a": "1", "b": "<x>"}, {"a": "22", "b": "y"}], ("a", "b"), title="T")
    lines = t.text().splitlines()
    assert lines[0] == "T" and lines[1].split() == ["A", "B"]
    assert lines[2].index("<x>") == lines[3].index("y")
    assert "&lt;x&gt;" in t._repr_html_() and "<x>" not in t._repr_html_()
    assert "(nothing)" in Table([], ("a",)).text()


class _View:
    def __init__(self, tick: float | None = None, fail: bool = False) -> None:
        self.tick = tick
        self.fail = fail
        self.threads: list[threading.Thread] = []

    def render(self) -> None:
        self.threads.append(threading.current_thread())
        if self.fail:
            raise RuntimeError("broken view")


def _until(cond: Any, timeout: float = 5.0) -> bool:
    end = time.monotonic() + timeout
    while time.monotonic() < end:
        if cond():
            return True
        time.sleep(0.02)
    return bool(cond())


def test_updater_renders_only_in_its_own_thread_and_on_demand() -> None:
    up = LiveUpdater(period=0.05)
    view = _View()
    up.add(view)
    assert _until(lambda: len(view.threads) == 1)
    time.sleep(0.3)
    assert len(view.threads) == 1  # no tick: nothing more until marked dirty
    up.mark_dirty(view)
    assert _until(lambda: len(view.threads) == 2)
    assert all(t is up.thread for t in view.threads) and up.thread is not threading.current_thread()
    up.stop()
    assert not up.running


def test_updater_ticks_and_survives_a_broken_view() -> None:
    up = LiveUpdater(period=0.02)
    ticking, broken = _View(tick=0.05), _View(fail=True)
    up.add(broken)
    up.add(ticking)
    assert _until(lambda: len(ticking.threads) >= 4)
    assert len(broken.threads) == 1 and up.running
    up.stop()


def test_updater_thread_ends_when_no_view_is_left_and_restarts() -> None:
    up = LiveUpdater(period=0.02)
    view = _View(tick=0.05)
    up.add(view)
    assert _until(lambda: up.running)
    up.remove(view)
    assert _until(lambda: not up.running)
    up.add(view)
    assert _until(lambda: up.running and len(view.threads) >= 2)
    up.stop()


def test_a_view_added_after_a_stop_cut_short_is_rendered_by_a_new_thread() -> None:
    # stop() waits at most `timeout` for a render in progress (Ctrl-C can cut it shorter); a panel shown then
    # must still be drawn: by a new thread, not by the one that is ending
    up = LiveUpdater(period=0.02)
    gate, started = threading.Event(), threading.Event()

    class _Slow(_View):
        def render(self) -> None:
            super().render()
            started.set()
            gate.wait(10)

    slow, fresh = _Slow(), _View()
    up.add(slow)
    assert started.wait(5)
    up.stop(timeout=0.05)  # gave up waiting: the thread is still in its render
    up.remove(slow)
    up.add(fresh)
    assert _until(lambda: len(fresh.threads) == 1), "the new view was never rendered"
    assert fresh.threads[0] is not slow.threads[0]
    gate.set()
    up.mark_dirty(fresh)
    assert _until(lambda: len(fresh.threads) == 2) and up.running
    up.stop()
    assert not up.running


def test_mark_dirty_of_an_unregistered_view_does_nothing() -> None:
    up = LiveUpdater(period=0.02)
    view = _View()
    up.mark_dirty(view)
    time.sleep(0.1)
    assert view.threads == [] and not up.running


# ---- the request form against a hand-built inventory (what a teacher would build) ------------------
@pytest.fixture
def inventory() -> Any:
    from slurmlab.core.request.inventory import ClusterInventory, NodeInventory

    h100 = [
        NodeInventory(f"node{i}", cpus=112, memory_mb=2_000_000, sockets=2, gpus={"h100": 8}, shards=32)
        for i in (1, 2)
    ]
    mig = NodeInventory("mig1", cpus=96, memory_mb=1_000_000, sockets=2, gpus={"1g.18gb": 7, "3g.71gb": 2})
    return ClusterInventory.build(
        nodes=[*h100, mig],
        partitions={"gpu": ["node1", "node2"], "mig": ["mig1"]},
        default="gpu",
        max_time={"mig": 3600},
    )


@pytest.fixture
def form(inventory: Any) -> Any:
    pytest.importorskip("ipywidgets")
    from slurmlab.widgets.form import RequestForm

    up = LiveUpdater(period=0.02)
    f = RequestForm(inventory=inventory, updater=up)
    yield f
    up.stop()


def test_mig_types_are_recognised() -> None:
    from slurmlab.widgets.form import is_mig_type

    assert is_mig_type("1g.18gb") and is_mig_type("7g.141gb")
    assert not is_mig_type("h100") and not is_mig_type("a100.pcie")


def test_form_offers_only_what_the_partition_has(form: Any) -> None:
    assert form.partition.value == "gpu"
    assert [m for _, m in form.sharing.options] == ["gpu", "shard"]
    assert [v for _, v in form.gpu_type.options] == ["", "h100"]
    form.partition.value = "mig"
    form.render()
    assert [m for _, m in form.sharing.options] == ["mig"]
    assert [v for _, v in form.gpu_type.options] == ["1g.18gb", "3g.71gb"]


def test_form_shows_the_exact_command_and_its_explanation(form: Any) -> None:
    form.gpu_type.value = "h100"
    form.count.value = 2
    form.gpu_bind.value = "closest"
    form.enforce.value = True
    form.render()
    assert form.problem is None
    assert "salloc --no-shell" in form.command.value and "--gpus=h100:2" in form.command.value
    assert "--gres-flags=enforce-binding" in form.command.value and "What it asks for" in form.command.value
    assert not form.submit_button.disabled


def test_form_validates_as_the_user_types(form: Any) -> None:
    form.count.value = 9
    form.per_node.value = True
    # the updater thread re-renders on the change; no explicit render here
    assert _until(lambda: form.problem is not None)
    assert "8" in form.problem and form.submit_button.disabled
    assert "slurmlab-form-problem" in form.command.value
    form.count.value = 8
    assert _until(lambda: form.problem is None and not form.submit_button.disabled)


def test_form_time_over_the_partition_limit_is_refused(form: Any) -> None:
    form.partition.value = "mig"
    form.time.value = "02:00:00"
    form.render()
    assert form.problem is not None and "mig" in form.problem


def test_form_shards(form: Any) -> None:
    form.sharing.value = "shard"
    form.count.value = 4
    form.render()
    assert "--gres=shard:4" in form.tokens()
    assert form.problem is None
