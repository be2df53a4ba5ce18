"""Shared pieces of the benchmarks: one result row, medians of repeated timings, the verdict.

Every benchmark module under ``benchmarks/`` that ``make bench`` runs exposes
``measure(quick: bool = False) -> list[Row]``; ``benchmarks/run_all.py`` collects the rows, prints
one table (figure, baseline, ratio, target, verdict) and writes ``build/bench.json``.

A benchmark that starts things outside its own process (a sandbox, an sshd, Unix users, a workshop) runs them
under :func:`terminate_as_exit`, so that a SIGTERM cleans up as an exception or Ctrl-C does.
"""

from __future__ import annotations

import contextlib
import signal
import statistics
import time
from collections.abc import Callable, Iterator
from dataclasses import asdict, dataclass


@dataclass(frozen=True)
class Row:
    """One measured figure beside its baseline and its target.

    ``target`` is checked as ``value <= target`` in ``unit`` (``s``, ``ms``, ``x`` for a ratio, ``MB`` ...);
    a row whose target is a ratio to its baseline gives unit ``x`` and puts the ratio in ``value``.
    ``group`` names the row of the issue's table it belongs to; ``size`` says at which scale it was measured
    (``1000 nodes x 10000 jobs``), so growth tables can be built from rows of one group.
    """

    group: str
    name: str
    value: float
    unit: str
    target: float | None = None
    baseline: float | None = None
    baseline_name: str = ""
    size: str = ""
    note: str = ""

    @property
    def ok(self) -> bool | None:
        return None if self.target is None else self.value <= self.target

    def to_dict(self) -> dict[str, object]:
        return {**asdict(self), "ok": self.ok}


def median_time(fn: Callable[[], object], repeat: int = 5, warmup: int = 1) -> float:
    """Median wall time of ``fn()`` in seconds over ``repeat`` runs (after ``warmup`` untimed ones)."""
    for _ in range(warmup):
        fn()
    times = []
    for _ in range(repeat):
        t0 = time.perf_counter()
        fn()
        times.append(time.perf_counter() - t0)
    return statistics.median(times)


def paired_times(
    fn: Callable[[], object], baseline: Callable[[], object], repeat: int = 5, warmup: int = 1
) -> tuple[float, float]:
    """Medians of ``fn()`` and ``baseline()`` timed in alternation, so that a busy machine slows both alike
    (the ratio of two medians taken minutes apart would measure the neighbours, not the code)."""
    for _ in range(warmup):
        baseline()
        fn()
    ours, theirs = [], []
    for _ in range(repeat):
        t0 = time.perf_counter()
        baseline()
        theirs.append(time.perf_counter() - t0)
        t0 = time.perf_counter()
        fn()
        ours.append(time.perf_counter() - t0)
    return statistics.median(ours), statistics.median(theirs)


@contextlib.contextmanager
def terminate_as_exit() -> Iterator[None]:
    """SIGTERM (a stopped run, a timeout) ends this process through its ``finally`` blocks, which clean up: the
    signal raises SystemExit where the main thread is. Outside the main thread signals are left as they are."""

    def stop(signum: int, frame: object) -> None:
        raise SystemExit(f"stopped by signal {signum}")

    try:
        old = signal.signal(signal.SIGTERM, stop)
    except ValueError:  # not the main thread: leave signals as they are
        yield
        return
    try:
        yield
    finally:
        signal.signal(signal.SIGTERM, old)
