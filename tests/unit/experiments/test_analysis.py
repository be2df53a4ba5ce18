"""The analysis on constructed run sets whose answers are known exactly."""

from __future__ import annotations

import json
import math

import numpy as np
import pytest

from slurmlab.errors import ParseError
from slurmlab.experiments.analysis import (
    CONCURRENT,
    MIXED,
    SOLO,
    TIME_SLICED,
    analyse,
    analyse_reports,
    intersection_ns,
    jain_index,
    merge_gaps,
    union_ns,
)

MS = 1_000_000


def round_robin(n: int, slice_ns: int, rounds: int, gap_ns: int = 0, offset: int = 0) -> list[np.ndarray]:
    """n processes taking turns: process i runs slice i of every round."""
    period = n * (slice_ns + gap_ns)
    out = []
    for i in range(n):
        starts = offset + np.arange(rounds) * period + i * (slice_ns + gap_ns)
        out.append(np.stack([starts, starts + slice_ns], axis=1))
    return out


def test_alternating_two_processes() -> None:
    runs = round_robin(2, 2 * MS, 10)
    r = analyse(runs, (0, 40 * MS), labels=["a", "b"])
    assert r.classification == TIME_SLICED
    assert r.shares == [0.5, 0.5]
    assert r.jain == 1.0
    assert r.overlap[0, 1] == 0.0
    for p in r.processes:
        assert p.runs == 10
        assert p.slices.count == 8  # first and last excluded
        assert (p.slices.median, p.slices.p5, p.slices.p95) == (2 * MS, 2 * MS, 2 * MS)
        assert p.gaps.median == 2 * MS
    assert r.busy_share == 1.0
    assert r.switch_overhead.median == 0


def test_three_way_round_robin_with_switch_gaps() -> None:
    runs = round_robin(3, 1 * MS, 20, gap_ns=100_000)
    d = 20 * 3 * 1_100_000
    r = analyse(runs, (0, d))
    assert r.classification == TIME_SLICED
    for p in r.processes:
        assert p.share == pytest.approx(20 * MS / d)
        assert p.gaps.median == 2 * MS + 3 * 100_000  # two other slices + three switch gaps
    assert r.switch_overhead.median == 100_000
    assert r.busy_share == pytest.approx(60 * MS / d)


def test_overlapping_processes_are_concurrent() -> None:
    a = np.array([[0, 10 * MS], [11 * MS, 20 * MS]])
    b = np.array([[0, 20 * MS]])
    r = analyse([a, b], (0, 20 * MS))
    assert r.classification == CONCURRENT
    assert r.overlap[0, 1] == 1.0  # a lies inside b
    assert r.shares == [pytest.approx(0.95), 1.0]
    assert intersection_ns(a, b) == 19 * MS


def test_partial_overlap_is_mixed() -> None:
    # p0 and p1 alternate (time-sliced on one core), p2 runs alone on another core
    p0, p1 = round_robin(2, MS, 10)
    p2 = np.array([[0, 20 * MS]])
    r = analyse([p0, p1, p2], (0, 20 * MS))
    assert r.classification == MIXED
    assert r.overlap[0, 1] == 0.0
    assert r.overlap[0, 2] == 1.0 and r.overlap[1, 2] == 1.0


def test_unfair_sharing() -> None:
    # a gets 3 ms of every 4 ms, b gets 1 ms
    starts = np.arange(10) * 4 * MS
    a = np.stack([starts, starts + 3 * MS], axis=1)
    b = np.stack([starts + 3 * MS, starts + 4 * MS], axis=1)
    r = analyse([a, b], (0, 40 * MS))
    assert r.shares == [0.75, 0.25]
    assert r.jain == pytest.approx((1.0**2) / (2 * (0.75**2 + 0.25**2)))  # 0.8
    assert r.jain == pytest.approx(0.8)
    assert r.processes[0].slices.median == 3 * MS
    assert r.processes[1].slices.median == 1 * MS
    assert r.classification == TIME_SLICED


def test_truncated_first_and_last_runs_are_clipped_and_excluded() -> None:
    # runs stick out of the window on both sides; the edge runs are shorter after clipping
    a = np.array([[-5 * MS, 1 * MS], [3 * MS, 5 * MS], [7 * MS, 9 * MS], [11 * MS, 20 * MS]])
    r = analyse([a], (0, 12 * MS))
    p = r.processes[0]
    assert r.runs[0].tolist() == [[0, 1 * MS], [3 * MS, 5 * MS], [7 * MS, 9 * MS], [11 * MS, 12 * MS]]
    assert p.slices.count == 2 and p.slices.median == 2 * MS  # only the two whole runs
    assert p.share == pytest.approx(6 / 12)
    assert r.classification == SOLO


def test_buffer_truncation_is_reported() -> None:
    runs = round_robin(2, MS, 5)
    r = analyse(runs, (0, 10 * MS), truncated=[False, True])
    assert [p.truncated for p in r.processes] == [False, True]
    assert any("truncated" in w for w in r.warnings)
    assert "TRUNCATED" in r.summary()


def test_noisy_log_is_re_thresholded() -> None:
    rng = np.random.default_rng(7)
    a, b = round_robin(2, 4 * MS, 50, gap_ns=50_000)
    # split every run of a at a random point by a 5 µs hiccup (noise, not a switch)
    cut = a[:, 0] + rng.integers(MS, 3 * MS, a.shape[0])
    noisy = np.empty((2 * a.shape[0], 2), dtype=np.int64)
    noisy[0::2] = np.stack([a[:, 0], cut], axis=1)
    noisy[1::2] = np.stack([cut + 5_000, a[:, 1]], axis=1)
    d = int(b[-1, 1])
    raw = analyse([noisy, b], (0, d))
    assert raw.processes[0].runs == 100  # the hiccups look like switches
    r = analyse([noisy, b], (0, d), merge_below_ns=20_000, threshold_ns=20_000, noise_floor_ns=5_000)
    assert r.processes[0].runs == 50
    assert r.processes[0].slices.median == 4 * MS
    assert r.switch_overhead.median == 50_000
    assert r.classification == TIME_SLICED
    assert r.jain == pytest.approx(1.0, abs=1e-4)
    assert not r.warnings


def test_threshold_too_close_to_noise_warns() -> None:
    r = analyse(round_robin(2, MS, 4), (0, 8 * MS), threshold_ns=10_000, noise_floor_ns=5_000)
    assert any("noise floor" in w for w in r.warnings)


def test_slowdown_and_aggregate_efficiency() -> None:
    r = analyse(round_robin(2, MS, 4), (0, 8 * MS), work_s=[2.0, 2.5], solo_work_s=1.0)
    assert [p.slowdown for p in r.processes] == [2.0, 2.5]
    assert r.aggregate_efficiency == pytest.approx(0.5 + 0.4)


def test_union_merges_nested_runs() -> None:
    a = np.array([[0, 10], [20, 30]])
    b = np.array([[5, 8], [9, 25], [40, 41]])
    assert union_ns([a, b]) == 31
    assert intersection_ns(a, b) == 3 + 1 + 5


def test_merge_gaps_and_jain_basics() -> None:
    r = np.array([[0, 10], [12, 20], [40, 50]])
    assert merge_gaps(r, 5).tolist() == [[0, 20], [40, 50]]
    assert jain_index([1, 0, 0]) == pytest.approx(1 / 3)
    assert math.isnan(jain_index([]))


@pytest.mark.parametrize(
    "bad",
    [
        [[0, 10], [5, 20]],  # overlapping runs of one process
        [[10, 5]],  # ends before it starts
        [[1, 2, 3]],  # not pairs
    ],
)
def test_bad_runs_raise_parse_error_quoting_them(bad: list[list[int]]) -> None:
    with pytest.raises(ParseError) as info:
        analyse([bad], (0, 100))
    assert "runs of p0" in str(info.value)


def test_empty_window_raises() -> None:
    with pytest.raises(ParseError):
        analyse([[[0, 1]]], (10, 10))


def test_views_carry_measured_numbers() -> None:
    r = analyse(round_robin(2, MS, 6), (0, 12 * MS), labels=["a", "b"], backend="cpu")
    data = json.loads(r.to_json(include_runs=True))
    assert data["classification"] == TIME_SLICED
    assert data["measured"]["processes"][0]["share"] == 0.5
    assert data["runs_ns"]["a"][0] == [0, MS]
    text = r.summary()
    assert "measured share 0.500" in text and "time-sliced" in text
    page = r._repr_html_()
    assert "<table>" in page and "measured share of D" in page


def _report(label: str, runs: list[list[int]], start: int, work: float | None = None) -> dict[str, object]:
    rep: dict[str, object] = {
        "backend": "cpu",
        "label": label,
        "calibration": {"threshold_ns": 20_000, "noise_floor_ns": 2_000.0},
        "timeslice": {
            "window_ns": [start, start + 8 * MS],
            "runs_ns": [x for r in runs for x in r],
            "truncated": False,
        },
    }
    if work is not None:
        rep["fixed_work"] = {"seconds": work}
    return rep


def test_analyse_reports_uses_the_common_window() -> None:
    a, b = round_robin(2, MS, 4)
    reports = [_report("a", a.tolist(), 0, 2.0), _report("b", b.tolist(), 1_000, 2.0)]
    r = analyse_reports(reports, solo={"fixed_work": {"seconds": 1.0}})
    assert r.window == (500, 500 + 8 * MS)
    assert r.labels == ["a", "b"]
    assert r.aggregate_efficiency == pytest.approx(1.0)
    assert r.threshold_ns == 20_000
    assert r.meta["window_start_spread_ns"] == 1_000


def test_analyse_reports_rejects_a_report_without_a_log() -> None:
    with pytest.raises(ParseError):
        analyse_reports([{"label": "x"}])


def test_the_one_pass_sweep_agrees_with_pairwise_intersection() -> None:
    rng = np.random.default_rng(3)
    runs = []
    for _ in range(4):
        edges = np.sort(rng.choice(1_000_000, 400, replace=False))
        runs.append(edges.reshape(-1, 2))
    r = analyse(runs, (0, 1_000_000))
    for i in range(4):
        for j in range(4):
            if i != j:
                want = intersection_ns(runs[i], runs[j]) / min(r.processes[i].busy_ns, r.processes[j].busy_ns)
                assert r.overlap[i, j] == pytest.approx(want)
    assert r.busy_share == pytest.approx(union_ns(runs) / 1_000_000)


def test_many_processes_take_the_general_sweep_path() -> None:
    runs = round_robin(18, MS, 3)
    r = analyse(runs, (0, 54 * MS))
    assert r.classification == TIME_SLICED
    assert r.shares == [pytest.approx(1 / 18)] * 18
    assert r.busy_share == 1.0
    both = analyse([runs[0], runs[0] + 0] + runs[1:17], (0, 54 * MS))  # p0 twice: fully overlapping
    assert both.overlap[0, 1] == 1.0 and both.classification == MIXED


def test_the_text_form_is_a_one_line_summary_not_the_run_arrays() -> None:
    r = analyse(round_robin(2, 2 * MS, 300), (0, 1200 * MS), labels=["a", "b"], backend="cpu")
    text = repr(r)
    assert text.startswith("<TimesliceResult time-sliced: 2 process(es), cpu, D = 1.200 s, 600 runs")
    assert "\n" not in text and "array(" not in text and len(text) < 200
    assert "measured Jain fairness 1.000" in text
