"""A background loop that starts on demand and ends by itself: the poller's and the widget updater's thread.

Each thread gets its own pair of events (``stop``, ``done``). A thread told to stop that is still in a slow round
(a poll slower than ``stop``'s wait, a render, or a ``stop()`` cut short by Ctrl-C) finishes alone while
:meth:`LoopThread.ensure_running` starts a new one, so a request made meanwhile (a poke, a new view) is never
swallowed by a thread that is about to end. ``stop()`` waits on ``done``, not ``Thread.join``: on Python 3.11 a
Ctrl-C inside ``join`` marks a still running thread as stopped.

The owner shares its lock: the body sets ``stop`` under that lock when it runs out of work, and
``ensure_running`` checks under it, so a request either reaches the running thread or starts a new one.
"""

from __future__ import annotations

import threading
from collections.abc import Callable
from contextlib import AbstractContextManager

__all__ = ["LoopThread"]


class LoopThread:
    """``body(stop)`` run in a daemon thread named ``name``; ``body`` returns once ``stop`` is set."""

    def __init__(
        self, body: Callable[[threading.Event], None], *, name: str, lock: AbstractContextManager[object]
    ) -> None:
        self._body = body
        self._name = name
        self._lock = lock
        self._stop, self._done = threading.Event(), threading.Event()
        self._thread: threading.Thread | None = None

    @property
    def thread(self) -> threading.Thread | None:
        return self._thread

    @property
    def running(self) -> bool:
        return self._thread is not None and not self._done.is_set()

    def ensure_running(self) -> None:
        """Start a thread unless one runs that has not been told to stop."""
        with self._lock:
            if self._thread is None or self._stop.is_set() or self._done.is_set():
                self._stop, self._done = threading.Event(), threading.Event()
                self._thread = threading.Thread(
                    target=self._run, args=(self._stop, self._done), name=self._name, daemon=True
                )
                self._thread.start()

    def stop(self, wake: threading.Event, timeout: float) -> None:
        """Tell the thread to stop, ``wake`` it, and wait up to ``timeout`` seconds for it to end (not from itself)."""
        with self._lock:
            self._stop.set()
            thread, done = self._thread, self._done
        wake.set()
        if thread is not None and thread is not threading.current_thread():
            done.wait(timeout)

    def _run(self, stop: threading.Event, done: threading.Event) -> None:
        try:
            self._body(stop)
        finally:
            done.set()
