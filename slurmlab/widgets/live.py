"""The ONE thread that changes widgets.

ipykernel delivers widget updates sent from a background thread, but only reliably when one
owned thread assigns traits (earlier ipykernel 7 releases had threading bugs; ``with out:``
from a thread fails on 6.29). So every live view registers here; the poller thread and button
handlers only *mark* a view dirty, and this thread calls ``view.render()`` — the only place a
trait is assigned after display. A thread rather than an asyncio task: thread updates keep
arriving while another cell runs, asyncio tasks stall until it ends.

    updater = get_updater()
    updater.add(view)        # view.render() now; again when dirty or every view.tick seconds
    updater.mark_dirty(view) # from any thread
    updater.remove(view); updater.stop()
"""

from __future__ import annotations

import logging
import threading
import time
from typing import Protocol

from slurmlab.slurm.loop_thread import LoopThread

__all__ = ["LiveUpdater", "LiveView", "get_updater"]

log = logging.getLogger(__name__)


class LiveView(Protocol):
    """What the updater drives. ``tick`` (seconds) re-renders ticking clocks; None = only when dirty."""

    tick: float | None

    def render(self) -> None: ...


class LiveUpdater:
    """Owns the render thread; started on the first ``add``, ended by ``stop`` (an Event)."""

    def __init__(self, *, period: float = 0.25) -> None:
        self.period = period
        # strong references: a displayed panel must keep updating after the cell that made it
        # dropped its name; views remove themselves when done (ended, or the widget closed)
        self._views: dict[LiveView, float] = {}
        self._dirty: set[LiveView] = set()
        self._lock = threading.Lock()
        self._wake = threading.Event()
        self._loop_thread = LoopThread(self._loop, name="slurmlab-widgets", lock=self._lock)
        self.renders = 0  # for tests: how many renders this thread made

    @property
    def thread(self) -> threading.Thread | None:
        return self._loop_thread.thread

    @property
    def running(self) -> bool:
        return self._loop_thread.running

    def add(self, view: LiveView) -> None:
        with self._lock:
            self._views[view] = 0.0
            self._dirty.add(view)
        # a thread told to stop ends alone (slurm.loop_thread): a stop() cut short by a slow render or by Ctrl-C
        # never leaves a new view without a thread
        self._loop_thread.ensure_running()
        self._wake.set()

    def remove(self, view: LiveView) -> None:
        with self._lock:
            self._views.pop(view, None)
            self._dirty.discard(view)

    def mark_dirty(self, view: LiveView) -> None:
        """Ask for ``view.render()`` soon. Safe from any thread; never renders itself."""
        with self._lock:
            if view in self._views:
                self._dirty.add(view)
        self._wake.set()

    def views(self) -> list[LiveView]:
        with self._lock:
            return list(self._views)

    def stop(self, timeout: float = 5.0) -> None:
        self._loop_thread.stop(self._wake, timeout)

    def _due(self) -> list[LiveView]:
        now = time.monotonic()
        due = []
        with self._lock:
            for view, last in list(self._views.items()):
                tick = view.tick
                if view in self._dirty or (tick is not None and now - last >= tick):
                    due.append(view)
                    self._views[view] = now
            self._dirty = set()
        return due

    def _loop(self, stop: threading.Event) -> None:
        while not stop.is_set():
            self._wake.clear()
            for view in self._due():
                try:
                    view.render()
                    self.renders += 1
                except Exception:  # one broken view must not freeze the others
                    log.exception("slurmlab: a live widget failed to render; it stays registered")
            with self._lock:
                if not self._views:
                    stop.set()  # under the lock: an add() now starts a thread of its own
                    return
            self._wake.wait(self.period)


_updater: LiveUpdater | None = None
_updater_lock = threading.Lock()


def get_updater() -> LiveUpdater:
    """The process-wide updater that every panel and monitor shares."""
    global _updater
    with _updater_lock:
        if _updater is None:
            _updater = LiveUpdater()
        return _updater
