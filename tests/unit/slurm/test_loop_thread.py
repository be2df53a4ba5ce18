"""The poller's and the widget updater's background loop: started on demand, ended alone, never swallowing a start."""

from __future__ import annotations

import threading
import time

from slurmlab.slurm.loop_thread import LoopThread


def _until(cond: object, timeout: float = 5.0) -> bool:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if cond():  # type: ignore[operator]
            return True
        time.sleep(0.01)
    return False


def test_a_start_while_the_old_thread_is_still_stopping_gets_a_new_thread() -> None:
    lock = threading.Lock()
    wake = threading.Event()
    gate = threading.Event()
    runs: list[threading.Thread] = []

    def body(stop: threading.Event) -> None:
        runs.append(threading.current_thread())
        if len(runs) == 1:
            gate.wait(10)  # the first round is slow
        while not stop.is_set():
            wake.wait(0.01)

    loop = LoopThread(body, name="test-loop", lock=lock)
    loop.ensure_running()
    first = loop.thread
    assert first is not None and _until(lambda: runs)
    started = time.monotonic()
    loop.stop(wake, timeout=0.1)  # cut short: the slow round is still going
    assert time.monotonic() - started < 2 and first.is_alive()
    loop.ensure_running()
    assert loop.thread is not first and _until(lambda: len(runs) == 2)
    assert loop.running and runs[1].name == "test-loop" and runs[1].daemon
    gate.set()
    assert _until(lambda: not first.is_alive())
    assert loop.running, "the old thread's end stopped the new one"
    loop.ensure_running()  # a running thread is reused
    assert len(runs) == 2
    loop.stop(wake, timeout=5)
    assert not loop.running  # its body has returned (the thread itself may take a moment more to end)
    assert _until(lambda: not runs[1].is_alive())


def test_a_body_that_ends_by_itself_is_restarted_and_stop_from_inside_does_not_wait_for_itself() -> None:
    lock = threading.RLock()
    wake = threading.Event()
    ran: list[float] = []
    loop: LoopThread

    def body(stop: threading.Event) -> None:
        ran.append(time.monotonic())
        loop.stop(wake, timeout=30)  # from its own thread: must not wait 30 s for itself

    loop = LoopThread(body, name="test-loop", lock=lock)
    loop.ensure_running()
    assert _until(lambda: ran and not loop.running, timeout=3)
    loop.ensure_running()
    assert _until(lambda: len(ran) == 2 and not loop.running, timeout=3)
