"""Turn the run logs of N processes on one shared clock into what time-slicing looks like.

Input: for each process the runs it logged, ``(start_ns, end_ns)`` on a clock every process
shares (``%globaltimer`` on a GPU, ``CLOCK_MONOTONIC`` on one host), and the common window
``[t0, t0 + D]``. Output: a :class:`~.timeslice_result.TimesliceResult` with slice lengths, switch
gaps, shares of D, the overlap matrix, Jain's fairness index and a classification. Everything is
vectorised with NumPy so a million runs take well under a second (see ``benchmarks/bench_analysis.py``).
Every number is measured from the logs; nothing is read from configuration.
"""

from __future__ import annotations

import json
import math
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

import numpy as np

from slurmlab.errors import ParseError
from slurmlab.experiments.timeslice_result import (
    CONCURRENT,
    MIXED,
    SOLO,
    TIME_SLICED,
    ProcessStats,
    Spread,
    TimesliceResult,
    fmt_ns,
)

# Pairwise overlap (|A∩B| / min(|A|, |B|)) below this everywhere = time-sliced; at or above
# CONCURRENT_MIN everywhere = concurrent. Independent processes that are each interrupted by
# unrelated load still overlap by about their availability, hence a generous lower bound.
TIME_SLICED_MAX = 0.1
CONCURRENT_MIN = 0.5

# below this share of D with any worker running, something else took the processor
BUSY_SHARE_MIN = 0.9


# -- the computations ----------------------------------------------------------------------------


def as_runs(runs: Any, label: str = "process") -> np.ndarray:
    """Runs as a sorted, non-overlapping ``(n, 2)`` int64 array; bad input raises ParseError."""
    arr = np.asarray(runs, dtype=np.int64)
    if arr.size == 0:
        return np.zeros((0, 2), dtype=np.int64)
    if arr.ndim == 1 and arr.size % 2 == 0:
        arr = arr.reshape(-1, 2)
    if arr.ndim != 2 or arr.shape[1] != 2:
        raise ParseError(f"runs of {label}", repr(runs)[:200], hint="give (start_ns, end_ns) pairs")
    bad = np.flatnonzero(arr[:, 1] < arr[:, 0])
    if bad.size:
        raise ParseError(f"runs of {label}", f"run {bad[0]} ends before it starts: {arr[bad[0]].tolist()}")
    if arr.shape[0] > 1:
        back = np.flatnonzero(arr[1:, 0] < arr[:-1, 1])
        if back.size:
            i = int(back[0])
            raise ParseError(
                f"runs of {label}",
                f"run {i + 1} {arr[i + 1].tolist()} starts before run {i} {arr[i].tolist()} ends",
                hint="runs of one process must be sorted and must not overlap",
            )
    return arr


def clip_runs(runs: np.ndarray, t0: int, t1: int) -> np.ndarray:
    """Runs intersected with ``[t0, t1]``; runs entirely outside go."""
    clipped: np.ndarray = np.clip(runs, t0, t1)
    kept: np.ndarray = clipped[clipped[:, 1] > clipped[:, 0]]
    return kept


def merge_gaps(runs: np.ndarray, min_gap_ns: int) -> np.ndarray:
    """Join runs separated by less than ``min_gap_ns`` (re-threshold a log that was too fine)."""
    if runs.shape[0] < 2 or min_gap_ns <= 0:
        return runs
    keep = (runs[1:, 0] - runs[:-1, 1]) >= min_gap_ns
    starts = runs[np.concatenate(([True], keep)), 0]
    ends = runs[np.concatenate((keep, [True])), 1]
    return np.stack([starts, ends], axis=1)


def _coverage(runs: np.ndarray, t: np.ndarray) -> np.ndarray:
    """Time covered by ``runs`` before each instant of ``t`` (vectorised)."""
    if runs.shape[0] == 0:
        return np.zeros(t.shape, dtype=np.int64)
    lengths = runs[:, 1] - runs[:, 0]
    before = np.concatenate(([0], np.cumsum(lengths)))
    k = np.searchsorted(runs[:, 0], t, side="right") - 1
    kk = np.maximum(k, 0)
    inside = np.minimum(t, runs[kk, 1]) - runs[kk, 0]
    out: np.ndarray = np.where(k >= 0, before[kk] + inside, 0)
    return out


def intersection_ns(a: np.ndarray, b: np.ndarray) -> int:
    """Total time during which both run sets run."""
    if a.shape[0] == 0 or b.shape[0] == 0:
        return 0
    cov = _coverage(a, b.ravel()).reshape(-1, 2)
    return int((cov[:, 1] - cov[:, 0]).sum())


def union_ns(all_runs: Sequence[np.ndarray]) -> int:
    """Time during which at least one process runs."""
    stacked = [r for r in all_runs if r.shape[0]]
    if not stacked:
        return 0
    r = np.concatenate(stacked)
    r = r[np.argsort(r[:, 0], kind="stable")]
    ends = np.maximum.accumulate(r[:, 1])
    # a new block starts where a run begins after every earlier run has ended
    new = np.concatenate(([True], r[1:, 0] > ends[:-1]))
    block = np.cumsum(new) - 1
    starts = r[new, 0]
    block_end = np.zeros(starts.shape, dtype=np.int64)
    np.maximum.at(block_end, block, r[:, 1])
    return int((block_end - starts).sum())


def jain_index(values: Sequence[float] | np.ndarray) -> float:
    """Jain's fairness index (sum x)^2 / (n sum x^2): 1 = equal, 1/n = one takes all."""
    x = np.asarray(values, dtype=float)
    if x.size == 0:
        return math.nan
    denom = x.size * float((x * x).sum())
    return float(x.sum() ** 2 / denom) if denom > 0 else math.nan


def classify(overlap: np.ndarray) -> str:
    n = overlap.shape[0]
    if n < 2:
        return SOLO
    off = overlap[~np.eye(n, dtype=bool)]
    if off.max() <= TIME_SLICED_MAX:
        return TIME_SLICED
    if off.min() >= CONCURRENT_MIN:
        return CONCURRENT
    return MIXED


# The sweep packs (time since t0, end-before-start flag, process) into one int64 so a single
# plain sort (SIMD-fast in NumPy, unlike a stable argsort) orders every event. Which processes
# run during a segment is a bit mask, so N is bounded by the bits of an int64.
_PROC_BITS = 7
MAX_SWEEP_PROCS = 62


@dataclass(frozen=True)
class Sweep:
    pair_ns: np.ndarray  # (N, N) time both i and j ran; diagonal = busy time of i
    union_ns: int
    idle_gaps: np.ndarray  # idle time from one process's run end to another's run start


def sweep(runs: Sequence[np.ndarray], t0: int) -> Sweep:
    """Pairwise co-running time, union and hand-over gaps of N run sets in one sorted pass."""
    n = len(runs)
    if n > MAX_SWEEP_PROCS:
        raise ParseError(
            "process count", str(n), hint=f"the analysis takes at most {MAX_SWEEP_PROCS} processes"
        )
    start_flag = 1 << (_PROC_BITS - 1)
    keys = []
    for i, r in enumerate(runs):
        rel = r - t0
        keys.append((rel[:, 0] << _PROC_BITS) | start_flag | i)
        keys.append((rel[:, 1] << _PROC_BITS) | i)  # an end sorts before a start at the same instant
    ev = np.sort(np.concatenate(keys)) if keys else np.zeros(0, dtype=np.int64)
    if ev.size == 0:
        return Sweep(np.zeros((n, n)), 0, np.zeros(0, dtype=np.int64))
    times = ev >> _PROC_BITS
    proc = ev & (start_flag - 1)
    bit = np.left_shift(np.int64(1), proc)
    # runs of one process never overlap, so adding/removing its bit keeps an exact mask
    mask = np.cumsum(np.where(ev & start_flag, bit, -bit))
    seg = np.diff(times).astype(np.float64)
    if n <= 16:  # few enough masks to count them directly, with no sort
        weight = np.bincount(mask[:-1], weights=seg, minlength=1 << n)
        masks = np.flatnonzero(weight).astype(np.int64)
        weight = weight[masks]
    else:
        masks, inverse = np.unique(mask[:-1], return_inverse=True)
        weight = np.bincount(inverse.ravel(), weights=seg, minlength=masks.size)
    member = ((masks[:, None] >> np.arange(n)) & 1).astype(np.float64)  # (distinct masks, N)
    pair = np.rint(member.T @ (member * weight[:, None]))
    union = int(round(weight[masks != 0].sum()))
    # nobody runs after an end event: the gap to the next start, when another process takes over
    idle = np.flatnonzero(mask[:-1] == 0)
    handover = proc[idle] != proc[idle + 1]
    gaps = (times[idle + 1] - times[idle])[handover]
    return Sweep(pair, union, gaps)


def analyse(
    runs: Sequence[Any],
    window: tuple[int, int],
    *,
    labels: Sequence[str] | None = None,
    backend: str = "unknown",
    merge_below_ns: int | None = None,
    threshold_ns: int | None = None,
    noise_floor_ns: float | None = None,
    truncated: Sequence[bool] | None = None,
    late_ns: Sequence[int] | None = None,
    work_s: Sequence[float | None] | None = None,
    solo_work_s: float | None = None,
    meta: Mapping[str, Any] | None = None,
) -> TimesliceResult:
    """Analyse the runs of N processes over the common window ``(t0, t1)`` (ns, shared clock).

    ``late_ns`` says how long after T0 each worker got the start time (0: in time);
    ``merge_below_ns`` joins runs separated by less (a coarser threshold than the worker's);
    ``work_s``/``solo_work_s`` are fixed-work durations for slowdown and aggregate efficiency.
    """
    t0, t1 = int(window[0]), int(window[1])
    if t1 <= t0:
        raise ParseError("time window", f"{window!r}", hint="the window must end after it starts")
    n = len(runs)
    labels = list(labels) if labels is not None else [f"p{i}" for i in range(n)]
    if len(labels) != n:
        raise ParseError("labels", repr(labels), hint=f"give one label per process ({n})")
    duration = t1 - t0
    clean = _clean_runs(runs, labels, (t0, t1), merge_below_ns)
    work = list(work_s) if work_s is not None else [None] * n

    busy = np.array([int((r[:, 1] - r[:, 0]).sum()) for r in clean], dtype=np.int64)
    shares = busy / duration
    procs, warnings = _process_stats(labels, clean, busy, shares, truncated, late_ns, work, solo_work_s)
    sw = sweep(clean, t0)
    overlap = _overlap(sw, busy)
    busy_share = sw.union_ns / duration
    warnings += _run_warnings(n, busy_share, threshold_ns, noise_floor_ns)

    return TimesliceResult(
        backend=backend,
        window=(t0, t1),
        labels=labels,
        runs=clean,
        processes=procs,
        overlap=overlap,
        jain=jain_index(shares),
        classification=classify(overlap),
        busy_share=busy_share,
        switch_overhead=Spread.of(sw.idle_gaps),
        threshold_ns=threshold_ns,
        noise_floor_ns=noise_floor_ns,
        solo_work_s=solo_work_s,
        aggregate_efficiency=_aggregate_efficiency(work, solo_work_s, n),
        warnings=warnings,
        meta=dict(meta or {}),
    )


# -- the parts of analyse ------------------------------------------------------------------------


def _clean_runs(
    runs: Sequence[Any], labels: Sequence[str], window: tuple[int, int], merge_below_ns: int | None
) -> list[np.ndarray]:
    """Each process's runs checked, clipped to the window and, when asked, with short gaps joined."""
    clean: list[np.ndarray] = []
    for lab, r in zip(labels, runs, strict=True):
        arr = clip_runs(as_runs(r, lab), window[0], window[1])
        if merge_below_ns:
            arr = merge_gaps(arr, int(merge_below_ns))
        clean.append(arr)
    return clean


def _process_stats(
    labels: Sequence[str],
    clean: Sequence[np.ndarray],
    busy: np.ndarray,
    shares: np.ndarray,
    truncated: Sequence[bool] | None,
    late_ns: Sequence[int] | None,
    work: Sequence[float | None],
    solo_work_s: float | None,
) -> tuple[list[ProcessStats], list[str]]:
    """(each process's numbers, the warnings about single processes)."""
    n = len(clean)
    truncated = list(truncated) if truncated is not None else [False] * n
    late = list(late_ns) if late_ns is not None else [0] * n
    procs: list[ProcessStats] = []
    warnings: list[str] = []
    for i, r in enumerate(clean):
        lengths = r[:, 1] - r[:, 0]
        w = work[i]
        slowdown = None
        if w is not None and solo_work_s:
            slowdown = float(w) / solo_work_s
        procs.append(
            ProcessStats(
                label=labels[i],
                runs=int(r.shape[0]),
                busy_ns=int(busy[i]),
                share=float(shares[i]),
                slices=Spread.of(lengths[1:-1]),
                gaps=Spread.of(r[1:, 0] - r[:-1, 1]),
                truncated=bool(truncated[i]),
                work_s=None if w is None else float(w),
                slowdown=slowdown,
            )
        )
        if late[i]:
            warnings.append(
                f"{labels[i]}: started {fmt_ns(float(late[i]))} after T0 (it was not ready in time)"
            )
        if truncated[i]:
            warnings.append(f"{labels[i]}: the run log was truncated (buffer full); later runs are missing")
        if r.shape[0] == 0:
            warnings.append(f"{labels[i]}: no run inside the window (the process never ran during D)")
        elif r.shape[0] < 3:
            warnings.append(f"{labels[i]}: fewer than 3 runs, so no untruncated slice was measured")
    return procs, warnings


def _overlap(sw: Sweep, busy: np.ndarray) -> np.ndarray:
    """Pairwise overlap |A∩B| / min(|A|, |B|); 1 on the diagonal."""
    n = busy.shape[0]
    smaller = np.minimum.outer(busy, busy).astype(np.float64)
    overlap: np.ndarray = np.divide(sw.pair_ns, smaller, out=np.zeros((n, n)), where=smaller > 0)
    np.fill_diagonal(overlap, 1.0)
    return overlap


def _run_warnings(
    n: int, busy_share: float, threshold_ns: int | None, noise_floor_ns: float | None
) -> list[str]:
    """The warnings about the run as a whole: idle processor, a threshold too close to the noise."""
    warnings: list[str] = []
    if n > 1 and busy_share < BUSY_SHARE_MIN:
        warnings.append(
            f"no worker ran for {1 - busy_share:.0%} of D: other load shared the processor, or "
            "switching between the workers is expensive"
        )
    if threshold_ns is not None and noise_floor_ns is not None and threshold_ns < 3 * noise_floor_ns:
        warnings.append(
            f"switch threshold {fmt_ns(threshold_ns)} is under 3x the measured noise floor "
            f"{fmt_ns(noise_floor_ns)}: some gaps may be noise, not switches"
        )
    return warnings


def _aggregate_efficiency(work: Sequence[float | None], solo_work_s: float | None, n: int) -> float | None:
    """Sum of solo time / shared time over the ``n`` processes, when every one finished its fixed work."""
    done = [float(w) for w in work if w is not None]
    if solo_work_s and n and len(done) == n:
        return float(sum(solo_work_s / w for w in done))
    return None


def analyse_reports(
    reports: Sequence[Mapping[str, Any]],
    *,
    solo: Mapping[str, Any] | None = None,
    merge_below_ns: int | None = None,
) -> TimesliceResult:
    """Analyse the JSON reports of the workers of one run (see :mod:`.worker`)."""
    if not reports:
        raise ParseError("worker reports", "[]", hint="no worker reported; run at least one")
    try:
        ts = [r["timeslice"] for r in reports]
        starts = [int(t["window_ns"][0]) for t in ts]
        duration = int(ts[0]["window_ns"][1]) - int(ts[0]["window_ns"][0])
    except (KeyError, TypeError, IndexError, ValueError) as exc:
        raise ParseError("worker report", json.dumps(reports[0])[:200], hint=f"missing field: {exc}") from exc
    # every worker converted T0 to the shared clock on its own; they agree to within the
    # conversion error, so the median is the common window
    t0 = int(np.median(starts))
    work = [(r.get("fixed_work") or {}).get("seconds") for r in reports]
    solo_s = None if solo is None else (solo.get("fixed_work") or {}).get("seconds")
    thresholds = [int(r["calibration"]["threshold_ns"]) for r in reports if r.get("calibration")]
    noise = [float(r["calibration"]["noise_floor_ns"]) for r in reports if r.get("calibration")]
    return analyse(
        [t["runs_ns"] for t in ts],
        (t0, t0 + duration),
        labels=[str(r.get("label", f"p{i}")) for i, r in enumerate(reports)],
        backend=str(reports[0].get("backend", "unknown")),
        merge_below_ns=merge_below_ns,
        threshold_ns=max(thresholds) if thresholds else None,
        noise_floor_ns=max(noise) if noise else None,
        truncated=[bool(t.get("truncated", False)) for t in ts],
        late_ns=[int(r.get("late_ns") or 0) for r in reports],
        work_s=work if any(w is not None for w in work) else None,
        solo_work_s=solo_s,
        meta={"window_start_spread_ns": int(max(starts) - min(starts))},
    )
