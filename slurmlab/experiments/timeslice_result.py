"""What a time-slicing run measured: :class:`TimesliceResult` and its parts, with their views.

The numbers are computed by :mod:`.analysis` from the workers' run logs; this module holds them and
shows them (summary text, an HTML table, JSON). The Gantt chart of the runs is drawn by
:mod:`slurmlab.viz.gantt`.
"""

from __future__ import annotations

import html
import json
import math
from dataclasses import dataclass, field
from typing import Any

import numpy as np

__all__ = [
    "CONCURRENT",
    "MIXED",
    "RAW_META_KEYS",
    "SOLO",
    "TIME_SLICED",
    "ProcessStats",
    "Spread",
    "TimesliceResult",
    "fmt_ns",
]

TIME_SLICED = "time-sliced"
CONCURRENT = "concurrent"
MIXED = "mixed"
SOLO = "solo"

# meta entries holding raw worker reports (large: every run again)
RAW_META_KEYS = ("reports", "solo_report")


@dataclass(frozen=True)
class Spread:
    """median / p5 / p95 of a set of durations in ns (NaN when there were none), and the count."""

    median: float
    p5: float
    p95: float
    count: int

    @classmethod
    def of(cls, values: np.ndarray) -> Spread:
        if values.size == 0:
            return cls(math.nan, math.nan, math.nan, 0)
        # a full sort is several times faster than np.percentile's partitions here; same
        # linear interpolation as np.percentile's default
        v = np.sort(values)
        last = v.size - 1

        def q(p: float) -> float:
            pos = p * last
            lo = int(pos)
            hi = min(lo + 1, last)
            return float(v[lo] + (v[hi] - v[lo]) * (pos - lo))

        return cls(q(0.5), q(0.05), q(0.95), int(v.size))

    def as_dict(self) -> dict[str, Any]:
        return {k: (None if isinstance(v, float) and math.isnan(v) else v) for k, v in self.__dict__.items()}


@dataclass(frozen=True)
class ProcessStats:
    label: str
    runs: int
    busy_ns: int
    share: float  # busy time / D
    slices: Spread  # run lengths, without the truncated first and last run
    gaps: Spread  # time switched out between two runs of this process
    truncated: bool  # the worker logged more runs than its buffer held
    work_s: float | None = None
    slowdown: float | None = None  # fixed-work time / solo fixed-work time


@dataclass(repr=False)  # the generated repr would print every run array: __repr__ summarises instead
class TimesliceResult:
    """The measured picture of N processes sharing (or not) one processor."""

    backend: str
    window: tuple[int, int]
    labels: list[str]
    runs: list[np.ndarray]  # per process, (n, 2) int64, clipped to the window
    processes: list[ProcessStats]
    overlap: np.ndarray  # (N, N) |A∩B| / min(|A|, |B|), diagonal 1
    jain: float
    classification: str
    busy_share: float  # share of D when at least one process ran
    switch_overhead: Spread  # idle time between a run of one process and the next run of another
    threshold_ns: int | None
    noise_floor_ns: float | None
    solo_work_s: float | None = None
    aggregate_efficiency: float | None = None  # sum over processes of solo time / their time
    warnings: list[str] = field(default_factory=list)
    meta: dict[str, Any] = field(default_factory=dict)

    @property
    def duration_ns(self) -> int:
        return self.window[1] - self.window[0]

    @property
    def shares(self) -> list[float]:
        return [p.share for p in self.processes]

    # -- views -------------------------------------------------------------------------------
    def as_dict(self, *, include_runs: bool = False) -> dict[str, Any]:
        n = len(self.labels)
        pairs = self.overlap[~np.eye(n, dtype=bool)] if n > 1 else np.array([])
        out: dict[str, Any] = {
            "backend": self.backend,
            "window_ns": list(self.window),
            "duration_s": self.duration_ns / 1e9,
            "classification": self.classification,
            "measured": {
                "jain_fairness": self.jain,
                "busy_share": self.busy_share,
                "overlap_matrix": self.overlap.tolist(),
                "overlap_mean": float(pairs.mean()) if pairs.size else None,
                "switch_overhead_ns": self.switch_overhead.as_dict(),
                "noise_floor_ns": self.noise_floor_ns,
                "solo_work_s": self.solo_work_s,
                "aggregate_efficiency": self.aggregate_efficiency,
                "processes": [
                    {
                        "label": p.label,
                        "runs": p.runs,
                        "busy_ns": p.busy_ns,
                        "share": p.share,
                        "slices_ns": p.slices.as_dict(),
                        "gaps_ns": p.gaps.as_dict(),
                        "truncated": p.truncated,
                        "work_s": p.work_s,
                        "slowdown": p.slowdown,
                    }
                    for p in self.processes
                ],
            },
            "threshold_ns": self.threshold_ns,
            "warnings": list(self.warnings),
            # the raw worker reports repeat every run; they travel only with the runs
            "meta": {k: v for k, v in self.meta.items() if include_runs or k not in RAW_META_KEYS},
        }
        if include_runs:
            out["runs_ns"] = {lab: r.tolist() for lab, r in zip(self.labels, self.runs, strict=True)}
        return out

    def to_json(self, *, include_runs: bool = False, indent: int | None = 2) -> str:
        return json.dumps(self.as_dict(include_runs=include_runs), indent=indent, default=_json_default)

    def summary(self) -> str:
        d = self.duration_ns / 1e9
        lines = [
            f"{len(self.labels)} process(es), {self.backend}, window D = {d:.3f} s: {self.classification}",
            f"  measured Jain fairness {self.jain:.3f}; measured busy share {self.busy_share:.3f}",
        ]
        if len(self.labels) > 1:
            n = len(self.labels)
            off = self.overlap[~np.eye(n, dtype=bool)]
            lines.append(f"  measured overlap between processes: mean {off.mean():.3f}, max {off.max():.3f}")
        if self.switch_overhead.count:
            lines.append(f"  measured switch overhead median {fmt_ns(self.switch_overhead.median)}")
        for p in self.processes:
            text = (
                f"  {p.label}: measured share {p.share:.3f}, {p.runs} runs, slice median "
                f"{fmt_ns(p.slices.median)} (p5 {fmt_ns(p.slices.p5)}, p95 {fmt_ns(p.slices.p95)}), "
                f"switched-out median {fmt_ns(p.gaps.median)}"
            )
            if p.slowdown is not None:
                text += f", measured slowdown {p.slowdown:.2f}x"
            if p.truncated:
                text += " [TRUNCATED log]"
            lines.append(text)
        if self.aggregate_efficiency is not None:
            lines.append(f"  measured aggregate efficiency vs solo {self.aggregate_efficiency:.2f}")
        if self.threshold_ns is not None:
            lines.append(
                f"  switch threshold {fmt_ns(self.threshold_ns)} (chosen from the measured calibration)"
            )
        if self.noise_floor_ns is not None:
            lines.append(f"  measured timer noise floor {fmt_ns(self.noise_floor_ns)}")
        lines += [f"  warning: {w}" for w in self.warnings]
        return "\n".join(lines)

    def __str__(self) -> str:
        return self.summary()

    def __repr__(self) -> str:
        """One line: what was measured, never the run arrays (``str()`` has the whole summary)."""
        runs = sum(p.runs for p in self.processes)
        return (
            f"<TimesliceResult {self.classification}: {len(self.labels)} process(es), {self.backend}, "
            f"D = {self.duration_ns / 1e9:.3f} s, {runs} runs, measured Jain fairness {self.jain:.3f}"
            + (f", {len(self.warnings)} warning(s)" if self.warnings else "")
            + ">"
        )

    def _repr_html_(self) -> str:
        rows = "".join(
            "<tr>"
            + "".join(
                f"<td>{html.escape(str(c))}</td>"
                for c in (
                    p.label,
                    f"{p.share:.3f}",
                    p.runs,
                    fmt_ns(p.slices.median),
                    fmt_ns(p.slices.p5),
                    fmt_ns(p.slices.p95),
                    fmt_ns(p.gaps.median),
                    "-" if p.slowdown is None else f"{p.slowdown:.2f}x",
                    "yes" if p.truncated else "no",
                )
            )
            + "</tr>"
            for p in self.processes
        )
        head = "".join(
            f"<th>{h}</th>"
            for h in (
                "process",
                "measured share of D",
                "runs",
                "slice median",
                "slice p5",
                "slice p95",
                "switched-out median",
                "measured slowdown",
                "truncated",
            )
        )
        extra = f"measured Jain fairness {self.jain:.3f} · measured busy share {self.busy_share:.3f}"
        if self.aggregate_efficiency is not None:
            extra += f" · measured aggregate efficiency {self.aggregate_efficiency:.2f}"
        warn = "".join(f"<li>{html.escape(w)}</li>" for w in self.warnings)
        return (
            f"<div><b>{html.escape(self.classification)}</b> — {len(self.labels)} process(es), "
            f"{html.escape(self.backend)}, D = {self.duration_ns / 1e9:.3f} s<br>{extra}"
            f"<table><tr>{head}</tr>{rows}</table>" + (f"<ul>{warn}</ul>" if warn else "") + "</div>"
        )


def _json_default(obj: Any) -> Any:
    if isinstance(obj, np.generic):
        return obj.item()
    if isinstance(obj, np.ndarray):
        return obj.tolist()
    raise TypeError(f"not JSON serialisable: {type(obj).__name__}")


def fmt_ns(ns: float | None) -> str:
    if ns is None or (isinstance(ns, float) and math.isnan(ns)):
        return "-"
    if abs(ns) >= 1e6:
        return f"{ns / 1e6:.3f} ms"
    if abs(ns) >= 1e3:
        return f"{ns / 1e3:.1f} µs"
    return f"{ns:.0f} ns"
