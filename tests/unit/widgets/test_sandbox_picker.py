"""The sandbox picker: profiles from the shipped profile files, a start that never blocks the caller, and every
outcome as one line with the fix (a stand-in ``start``; no real sandbox)."""

from __future__ import annotations

import threading
import time
from collections.abc import Callable, Iterator

import pytest

pytest.importorskip("ipywidgets")

from slurmlab.errors import SandboxError
from slurmlab.slurm.hardware_files import profile_names
from slurmlab.widgets.live import LiveUpdater
from slurmlab.widgets.sandbox_picker import SandboxPicker, profile_label, sandbox_picker


@pytest.fixture
def updater() -> Iterator[LiveUpdater]:
    up = LiveUpdater(period=0.01)
    yield up
    up.stop()


def _until(check: Callable[[], bool], timeout: float = 5.0) -> None:
    deadline = time.monotonic() + timeout
    while not check():
        assert time.monotonic() < deadline, "the picker did not get there in time"
        time.sleep(0.01)


def test_lists_every_shipped_profile_with_what_it_builds_and_has_a_stable_class(updater: LiveUpdater) -> None:
    picker = SandboxPicker(lambda name: None, updater=updater)
    assert [name for _, name in picker.choices] == profile_names()
    assert picker.dropdown.value == "dgx-h100"
    labels = dict((name, label) for label, name in picker.choices)
    assert labels["dgx-h100"] == "dgx-h100: 2 nodes × 8 h100 GPUs, shards"
    assert "MIG slices" in labels["h200-mig"]
    assert "slurmlab-sandbox-picker" in picker.widget._dom_classes
    assert "slurmlab-sandbox-start" in picker.button._dom_classes
    assert "slurmlab-sandbox-idle" in picker.status._dom_classes
    # the function the magics call returns the widget itself
    assert "slurmlab-sandbox-picker" in sandbox_picker(lambda name: None, updater=updater)._dom_classes


def test_profile_label_reads_the_profile_data() -> None:
    assert profile_label("x", {"nodes": 1, "gpus": [{"model": "a100"}] * 4}) == "x: 1 node × 4 a100 GPUs"
    assert profile_label("y", {}) == "y"


def test_start_runs_in_the_background_shows_progress_then_the_result(updater: LiveUpdater) -> None:
    release = threading.Event()
    calls: list[tuple[str, str]] = []

    def start(name: str) -> str:
        calls.append((name, threading.current_thread().name))
        release.wait(10)
        return "sandbox seed started; this kernel now uses it\ncluster: …"

    picker = SandboxPicker(start, updater=updater)
    picker.dropdown.value = "seed"
    began = time.monotonic()
    picker.button.click()
    assert time.monotonic() - began < 0.5  # the click returns while the sandbox is still starting
    _until(lambda: "starting sandbox seed" in picker.status.value)
    assert picker.button.disabled and picker.dropdown.disabled
    assert "slurmlab-sandbox-starting" in picker.status._dom_classes
    assert picker.start() is None  # a second press while starting does not start another
    release.set()
    _until(lambda: "slurmlab-sandbox-ready" in picker.status._dom_classes)
    assert calls == [("seed", "slurmlab-sandbox-start")]
    assert "sandbox seed started; this kernel now uses it" in picker.status.value
    assert "cluster:" not in picker.status.value  # one line
    assert "%salloc" in picker.status.value and "slurmlab-sandbox-starting" not in picker.status._dom_classes


def test_a_sandbox_error_is_one_line_with_its_fix_and_the_picker_can_retry(updater: LiveUpdater) -> None:
    def start(name: str) -> None:
        raise SandboxError(
            "slurmctld did not start\n(port 6817 in use)",
            hint="stop what uses the port, or `slurmlab sandbox down`",
        )

    picker = SandboxPicker(start, updater=updater)
    thread = picker.start("h200-mig")
    assert thread is not None
    thread.join(5)
    _until(lambda: "slurmlab-sandbox-failed" in picker.status._dom_classes)
    text = picker.status.value
    assert "sandbox h200-mig did not start: slurmctld did not start (port 6817 in use)" in text
    assert "stop what uses the port, or `slurmlab sandbox down`" in text
    assert "\n" not in text and "Traceback" not in text
    assert not picker.button.disabled  # try again, or pick another profile
    assert picker.start("seed") is not None


def test_an_unexpected_failure_is_still_one_line(updater: LiveUpdater) -> None:
    def start(name: str) -> None:
        raise RuntimeError("boom\nsecond line")

    picker = SandboxPicker(start, updater=updater)
    thread = picker.start()
    assert thread is not None
    thread.join(5)
    _until(lambda: "slurmlab-sandbox-failed" in picker.status._dom_classes)
    assert "sandbox dgx-h100 did not start: RuntimeError: boom second line" in picker.status.value
    assert "slurmlab sandbox status --profile dgx-h100" in picker.status.value


def test_the_magics_usage_error_still_reads_as_the_sandbox_error_behind_it() -> None:
    from slurmlab.widgets.sandbox_picker import outcome_line

    class UsageError(Exception):  # IPython's, as the magics raise it: ours re-raised `from None`
        pass

    try:
        try:
            raise SandboxError("munged is not installed", hint="apt-get install munge")
        except SandboxError as exc:
            raise UsageError(f"sandbox up failed: {exc}") from None
    except UsageError as wrapped:
        line = outcome_line("seed", error=wrapped)
    assert line == "sandbox seed did not start: munged is not installed → apt-get install munge"
    assert (
        outcome_line("seed", error=UsageError("sandbox up failed: no\n  -> fix"))
        == "sandbox seed did not start: sandbox up failed: no -> fix"
    )
