"""Usage of a running allocation: samples over time per GPU (or per step's tasks) and their summary table.

Two sources feed the same model:

- ``nvml``/``nvidia-smi``: the sampler step (:mod:`slurmlab.core.gpu.usage_sampler`) prints one framed report
  (:mod:`slurmlab.core.framing`) per sample on each node; :func:`sampler_report` reads one.
- ``sstat``: on a cluster without GPUs (the sandbox) the CPU time of the job's steps, two readings apart,
  gives the CPU utilisation of their tasks (:func:`cpu_samples`); 100 % = one CPU busy all the time.

API::

    UsageSample(series, t, util, mem_used_mb, mem_total_mb)
    sampler_report(report) -> list[UsageSample] | SamplerNote
    cpu_samples(before, after, t_before, t_after) -> list[UsageSample]
    UsageTable(source, samples, note, error)   # _repr_html_, str, to_dict; per series: mean/peak, memory
"""

from __future__ import annotations

import html
import json
import math
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field

from slurmlab.core.jsontypes import JSONObject
from slurmlab.core.palette import INK_SOFT
from slurmlab.core.slurm.sstat import SstatRecord
from slurmlab.errors import ParseError

__all__ = [
    "SOURCE_LABELS",
    "SamplerNote",
    "SeriesSummary",
    "UsageSample",
    "UsageTable",
    "cpu_samples",
    "sampler_report",
]

SOURCE_LABELS = {
    "nvml": "GPU utilisation of this allocation's GPUs (NVML)",
    "nvidia-smi": "GPU utilisation of this allocation's GPUs (nvidia-smi)",
    "sstat": "CPU of the job's tasks (sstat) — this machine has no GPU",
}
_MAX_GPUS = 4096  # entries of one sample: more is corrupt output, not a node


@dataclass(frozen=True)
class UsageSample:
    """One reading of one series (a GPU, ``node1 GPU 2``, or a step's tasks, ``step 7.0``)."""

    series: str
    t: float  # seconds since the epoch
    util: float  # percent; a GPU's busy time, or CPU time per wall time (100 = one CPU)
    mem_used_mb: float | None = None
    mem_total_mb: float | None = None

    def to_dict(self) -> JSONObject:
        return {
            "series": self.series,
            "t": self.t,
            "util": self.util,
            "mem_used_mb": self.mem_used_mb,
            "mem_total_mb": self.mem_total_mb,
        }


@dataclass(frozen=True)
class SamplerNote:
    """A line the sampler printed instead of a sample: which source it uses, or why it cannot sample."""

    source: str | None = None
    error: str | None = None
    gpus: tuple[str, ...] = ()


def _number(value: object, what: str, line: str, *, lo: float = 0.0, hi: float = math.inf) -> float:
    if isinstance(value, bool) or not isinstance(value, (int, float)) or not lo <= float(value) <= hi:
        raise ParseError(f"usage sample ({what})", line, hint=f"{what} must be a number in [{lo:g}, {hi:g}]")
    return float(value)


def _optional(value: object, what: str, line: str) -> float | None:
    return None if value is None else _number(value, what, line, hi=1e12)


def _gpu_sample(node: str, t: float, gpu: object, line: str) -> UsageSample:
    if not isinstance(gpu, Mapping):
        raise ParseError("usage sample (gpu entry)", line, hint="each entry of 'gpus' is an object")
    index, uuid = gpu.get("index"), gpu.get("uuid")
    name = (
        f"GPU {index}"
        if isinstance(index, int) and not isinstance(index, bool)
        else str(uuid or "GPU ?")[:64]
    )
    return UsageSample(
        f"{node} {name}",
        t,
        _number(gpu.get("util"), "util", line, hi=100.0),
        _optional(gpu.get("mem_used_mb"), "mem_used_mb", line),
        _optional(gpu.get("mem_total_mb"), "mem_total_mb", line),
    )


def sampler_report(report: Mapping[str, object]) -> list[UsageSample] | SamplerNote:
    """One report of the sampler step (a task's framed JSON object, see :class:`slurmlab.core.framing.FrameStream`):
    its samples, one per GPU, or a note (its source, or why it cannot sample). One that does not fit: ParseError."""
    text = json.dumps(report, default=str)[:2000]  # what the error quotes
    if "error" in report or "source" in report:
        gpus = report.get("gpus")
        return SamplerNote(
            str(report["source"])[:40] if report.get("source") else None,
            str(report["error"])[:500] if report.get("error") else None,
            tuple(str(g)[:80] for g in gpus) if isinstance(gpus, list) else (),
        )
    node, gpus = report.get("node"), report.get("gpus")
    if not isinstance(node, str) or not node or len(node) > 200 or not isinstance(gpus, list):
        raise ParseError("usage sample", text, hint="expected 'node' (text) and 'gpus' (a list)")
    if len(gpus) > _MAX_GPUS:
        raise ParseError(
            "usage sample", text, hint=f"more than {_MAX_GPUS} GPUs in one sample is corrupt output"
        )
    t = _number(report.get("t"), "t", text, hi=1e11)
    return [_gpu_sample(node, t, g, text) for g in gpus]


def cpu_samples(
    before: Iterable[SstatRecord], after: Iterable[SstatRecord], t_before: float, t_after: float
) -> list[UsageSample]:
    """CPU utilisation of each step seen in both readings: its tasks' CPU time gained per wall second."""
    wall = t_after - t_before
    if wall <= 0:
        return []
    old = {r.step_id: r for r in before}
    samples = []
    for rec in after:
        prev = old.get(rec.step_id)
        if prev is None or rec.step == "extern" or rec.total_cpu_s is None or prev.total_cpu_s is None:
            continue  # a step seen once, or one the gatherer has no reading of yet: no utilisation to say
        gained = max(0.0, rec.total_cpu_s - prev.total_cpu_s)  # a restarted gatherer never goes negative
        samples.append(
            UsageSample(f"step {rec.step_id}", t_after, round(100.0 * gained / wall, 1), rec.max_rss_mb, None)
        )
    return samples


@dataclass(frozen=True)
class SeriesSummary:
    series: str
    samples: int
    mean_util: float
    peak_util: float
    last_util: float
    mem_used_mb: float | None  # the latest reading
    peak_mem_mb: float | None
    mem_total_mb: float | None

    def to_dict(self) -> JSONObject:
        return {
            "series": self.series,
            "samples": self.samples,
            "mean_util": self.mean_util,
            "peak_util": self.peak_util,
            "last_util": self.last_util,
            "mem_used_mb": self.mem_used_mb,
            "peak_mem_mb": self.peak_mem_mb,
            "mem_total_mb": self.mem_total_mb,
        }


def _summary(series: str, rows: Sequence[UsageSample]) -> SeriesSummary:
    utils = [s.util for s in rows]
    mems = [s.mem_used_mb for s in rows if s.mem_used_mb is not None]
    totals = [s.mem_total_mb for s in rows if s.mem_total_mb is not None]
    return SeriesSummary(
        series,
        len(rows),
        round(sum(utils) / len(utils), 1),
        max(utils),
        utils[-1],
        mems[-1] if mems else None,
        max(mems) if mems else None,
        totals[-1] if totals else None,
    )


def _mem_text(used: float | None, total: float | None) -> str:
    if used is None:
        return "-"
    return f"{used:,.0f} MiB" + (f" of {total:,.0f} MiB" if total else "")


@dataclass(frozen=True)
class UsageTable:
    """The samples of one allocation so far, summarised per series. ``note`` says what is happening (sampling
    started, no step running); ``error`` why sampling stopped."""

    job_id: str
    source: str | None
    samples: tuple[UsageSample, ...] = ()
    note: str | None = None
    error: str | None = None
    _by_series: dict[str, list[UsageSample]] = field(default_factory=dict, compare=False, repr=False)

    def __post_init__(self) -> None:
        for s in self.samples:
            self._by_series.setdefault(s.series, []).append(s)

    @property
    def label(self) -> str:
        return SOURCE_LABELS.get(self.source or "", "usage (sampler not started)")

    @property
    def rows(self) -> list[SeriesSummary]:
        return [_summary(name, rows) for name, rows in sorted(self._by_series.items())]

    def series(self, name: str) -> list[UsageSample]:
        return list(self._by_series.get(name, ()))

    def to_dict(self) -> JSONObject:
        return {
            "job_id": self.job_id,
            "source": self.source,
            "label": self.label,
            "note": self.note,
            "error": self.error,
            "rows": [r.to_dict() for r in self.rows],
            "samples": [s.to_dict() for s in self.samples],
        }

    def _lines(self) -> list[str]:
        said = [x for x in (self.note, f"stopped: {self.error}" if self.error else None) if x]
        return [f"usage of allocation {self.job_id}: {self.label}", *said]

    def __str__(self) -> str:
        lines = self._lines()
        rows = self.rows
        if not rows:
            return "\n".join([*lines, "no samples yet"])
        head = ("series", "util mean", "util peak", "memory (latest)", "samples")
        body = [
            (
                r.series,
                f"{r.mean_util:.0f} %",
                f"{r.peak_util:.0f} %",
                _mem_text(r.mem_used_mb, r.mem_total_mb),
                str(r.samples),
            )
            for r in rows
        ]
        widths = [max(len(row[i]) for row in (head, *body)) for i in range(len(head))]
        lines += [
            "  ".join(c.ljust(w) for c, w in zip(row, widths, strict=True)).rstrip() for row in (head, *body)
        ]
        return "\n".join(lines)

    def __repr__(self) -> str:
        return (
            f"<UsageTable job {self.job_id}: {len(self.samples)} samples from {self.source or 'nothing yet'}>"
        )

    def _repr_html_(self) -> str:
        esc = html.escape
        said = "".join(f"<div style='color:{INK_SOFT}'>{esc(x)}</div>" for x in self._lines()[1:])
        rows = (
            "".join(
                f"<tr><td>{esc(r.series)}</td><td>{r.mean_util:.0f} %</td><td>{r.peak_util:.0f} %</td>"
                f"<td>{esc(_mem_text(r.mem_used_mb, r.mem_total_mb))}</td><td>{r.samples}</td></tr>"
                for r in self.rows
            )
            or "<tr><td colspan='5'>no samples yet</td></tr>"
        )
        return (
            f"<div class='slurmlab-usage-table'><b>{esc(self._lines()[0])}</b>{said}<table><thead><tr>"
            "<th>series</th><th>util mean</th><th>util peak</th><th>memory (latest)</th><th>samples</th>"
            f"</tr></thead><tbody>{rows}</tbody></table></div>"
        )
