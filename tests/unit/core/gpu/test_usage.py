"""The usage model: the sampler's framed reports (good, garbled, hostile, cut by srun) and the summary table in every
form."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from slurmlab.core.framing import FrameStream, frame
from slurmlab.core.gpu.usage import SamplerNote, UsageSample, UsageTable, sampler_report
from slurmlab.errors import ParseError

RECORDED = Path(__file__).parents[1] / "data" / "srun_label"


def test_a_sample_gives_one_sample_per_gpu_named_by_node_and_index() -> None:
    got = sampler_report(
        {
            "t": 1000.5,
            "node": "gpu7",
            "gpus": [
                {"index": 2, "uuid": "GPU-aa", "util": 55, "mem_used_mb": 1024.5, "mem_total_mb": 81559},
                {"index": None, "uuid": "MIG-bb", "util": 0.0, "mem_used_mb": None, "mem_total_mb": None},
            ],
        }
    )
    assert isinstance(got, list) and [s.series for s in got] == ["gpu7 GPU 2", "gpu7 MIG-bb"]
    assert got[0] == UsageSample("gpu7 GPU 2", 1000.5, 55.0, 1024.5, 81559.0)
    assert got[1].mem_used_mb is None


def test_notes() -> None:
    assert sampler_report({"source": "nvml", "gpus": ["GPU-aa"]}) == SamplerNote("nvml", None, ("GPU-aa",))
    err = sampler_report({"error": "none of this job's GPUs is visible"})
    assert isinstance(err, SamplerNote) and err.error and err.source is None


def test_eight_gpus_cut_by_srun_and_interleaved_between_nodes_come_back_whole() -> None:
    # a real srun --label of two nodes' samplers printing samples of eight GPUs: srun cut each at 1027 bytes and
    # the two nodes' pieces arrived interleaved; before the framing each first piece was "a garbled sample"
    stream = FrameStream()
    reports = []
    for line in (RECORDED / "usage-samples-8gpus-n2-interleaved.txt").read_text().splitlines():
        for item in stream.feed(line):
            assert item.problem is None and not (item.text or "").strip(), item
            if item.report is not None:
                reports.append((item.task, sampler_report(item.report)))
    samples = [(task, got) for task, got in reports if isinstance(got, list)]
    assert len(reports) == 8 and len(samples) == 6
    for task, got in samples:
        assert isinstance(got, list) and len(got) == 8
        assert {s.series.split()[0] for s in got} == {f"node{task + 1}"}
        assert [s.series.split()[-1] for s in got] == [str(i) for i in range(8)]


def test_text_outside_frames_is_passed_on_and_a_frame_never_forges_another_tasks() -> None:
    stream = FrameStream()
    assert [i.text for i in stream.feed("srun: Job step aborted")] == ["srun: Job step aborted"]
    # task 1 prints task 0's label and a whole frame: it is task 1's report, not task 0's
    items = stream.feed("1: 0: " + frame({"t": 1, "node": "forged", "gpus": []}))
    assert [(i.task, i.text) for i in items if i.text] == [(1, "0: ")]
    assert [(i.task, i.report) for i in items if i.report] == [(1, {"t": 1, "node": "forged", "gpus": []})]


@pytest.mark.parametrize(
    ("body", "why"),
    [
        ("{not json", "arrived broken"),
        ("[1, 2]", "not a JSON object"),
        ('{"t": 1, "node": "n", "gpus": [{"index": 0, "ut', "arrived broken"),
    ],
)
def test_a_broken_frame_is_that_tasks_problem(body: str, why: str) -> None:
    items = FrameStream().feed("3: <slurmlab-report>" + body + "</slurmlab-report>")
    assert [(i.task, i.report) for i in items] == [(3, None)]
    assert items[0].problem is not None and why in items[0].problem and "task 3" in items[0].problem


def test_a_frame_that_never_ends_costs_bounded_memory() -> None:
    stream = FrameStream(limit=1000)
    assert stream.feed("0: <slurmlab-report>" + "x" * 600) == []
    items = stream.feed("0: " + "y" * 600)
    assert len(items) == 1 and items[0].problem and "no end" in items[0].problem
    assert [i.report for i in stream.feed("0: " + frame({"source": "nvml"}))] == [{"source": "nvml"}]


@pytest.mark.parametrize(
    "report",
    [
        {"t": 1, "node": "n", "gpus": "x"},
        {"t": 1, "node": "", "gpus": []},
        {"t": "soon", "node": "n", "gpus": []},
        {"t": 1, "node": "n", "gpus": [{"index": 0, "util": 140}]},
        {"t": 1, "node": "n", "gpus": [{"index": 0, "util": -1}]},
        {"t": 1, "node": "n", "gpus": [{"index": 0, "util": True}]},
        {"t": 1, "node": "n", "gpus": [{"index": 0, "util": float("nan")}]},
        {"t": 1, "node": "n", "gpus": [{"index": 0, "util": 5, "mem_used_mb": "1G"}]},
        {"t": 1, "node": "n", "gpus": [7]},
        {"t": 1, "node": "n", "gpus": [1] * 60_000},
    ],
)
def test_garbled_samples_are_parse_errors(report: dict[str, object]) -> None:
    with pytest.raises(ParseError, match="usage sample"):
        sampler_report(report)


def _table() -> UsageTable:
    samples = [
        UsageSample("n1 GPU 0", t, u, m, 80_000.0) for t, u, m in ((1, 10, 100), (2, 90, 300), (3, 50, 200))
    ]
    samples.append(UsageSample("n1 GPU 1", 2, 0, None, None))
    return UsageTable("42", "nvml", tuple(samples))


def test_the_table_summarises_each_series() -> None:
    rows = {r.series: r for r in _table().rows}
    g0 = rows["n1 GPU 0"]
    assert (g0.samples, g0.mean_util, g0.peak_util, g0.last_util) == (3, 50.0, 90.0, 50.0)
    assert (g0.mem_used_mb, g0.peak_mem_mb, g0.mem_total_mb) == (200.0, 300.0, 80_000.0)
    assert rows["n1 GPU 1"].mem_used_mb is None


def test_the_table_as_text_html_and_json() -> None:
    table = _table()
    text = str(table)
    assert "NVML" in text.splitlines()[0] and "42" in text.splitlines()[0]
    assert "n1 GPU 0" in text and "90 %" in text and "200 MiB of 80,000 MiB" in text
    html = table._repr_html_()
    assert "slurmlab-usage-table" in html and "<td>n1 GPU 0</td>" in html
    data = json.loads(json.dumps(table.to_dict()))
    assert data["source"] == "nvml" and len(data["samples"]) == 4 and data["rows"][0]["peak_util"] == 90.0


def test_an_empty_table_says_so_and_names_the_sandbox_source() -> None:
    table = UsageTable("7", "sstat", (), "sampling started", "sstat failed")
    text = str(table)
    assert "CPU of the job's tasks (sstat) — this machine has no GPU" in text
    assert "no samples yet" in text and "stopped: sstat failed" in text and "sampling started" in text
    assert "no samples yet" in table._repr_html_()
    html = UsageTable("7", None, (), "<script>")._repr_html_()
    assert "<script>" not in html and "&lt;script&gt;" in html
