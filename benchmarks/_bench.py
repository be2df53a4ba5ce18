"""Shared pieces of the benchmarks: one result row, medians of repeated timings, the verdict.

Every benchmark module under ``benchmarks/`` that ``make bench`` runs exposes
``measure(quick: bool = False) -> list[Row]``; ``benchmarks/run_all.py`` collects the rows, prints
one table (figure, baseline, ratio, target, verdict) and writes ``build/bench.json``.
"""

from __future__ import annotations

import statistics
import time
from collections.abc import Callable
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
