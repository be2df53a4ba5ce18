"""The usage model: the sampler's JSON lines (good, garbled, hostile) and the summary table in every form."""

from __future__ import annotations

import json

import pytest

from slurmlab.core.gpu.usage import SAMPLE_PREFIX, SamplerNote, UsageSample, UsageTable, parse_sampler_line
from slurmlab.errors import ParseError


def _line(obj: object, label: str = "") -> str:
    return label + SAMPLE_PREFIX + json.dumps(obj)


def test_a_sample_line_gives_one_sample_per_gpu_named_by_node_and_index() -> None:
    got = parse_sampler_line(
        _line(
            {
                "t": 1000.5,
                "node": "gpu7",
                "gpus": [
                    {"index": 2, "uuid": "GPU-aa", "util": 55, "mem_used_mb": 1024.5, "mem_total_mb": 81559},
                    {"index": None, "uuid": "MIG-bb", "util": 0.0, "mem_used_mb": None, "mem_total_mb": None},
                ],
            },
            "0: ",
        )
    )
    assert isinstance(got, list) and [s.series for s in got] == ["gpu7 GPU 2", "gpu7 MIG-bb"]
    assert got[0] == UsageSample("gpu7 GPU 2", 1000.5, 55.0, 1024.5, 81559.0)
    assert got[1].mem_used_mb is None


def test_notes_and_other_lines() -> None:
    note = parse_sampler_line(_line({"source": "nvml", "gpus": ["GPU-aa"]}))
    assert note == SamplerNote("nvml", None, ("GPU-aa",))
    err = parse_sampler_line(_line({"error": "none of this job's GPUs is visible"}))
    assert isinstance(err, SamplerNote) and err.error and err.source is None
    assert parse_sampler_line("srun: Job step aborted") is None
    assert parse_sampler_line("") is None


@pytest.mark.parametrize(
    "line",
    [
        SAMPLE_PREFIX + "{not json",
        SAMPLE_PREFIX + "[1, 2]",
        SAMPLE_PREFIX + json.dumps({"t": 1, "node": "n", "gpus": "x"}),
        SAMPLE_PREFIX + json.dumps({"t": 1, "node": "", "gpus": []}),
        SAMPLE_PREFIX + json.dumps({"t": "soon", "node": "n", "gpus": []}),
        SAMPLE_PREFIX + json.dumps({"t": 1, "node": "n", "gpus": [{"index": 0, "util": 140}]}),
        SAMPLE_PREFIX + json.dumps({"t": 1, "node": "n", "gpus": [{"index": 0, "util": -1}]}),
        SAMPLE_PREFIX + json.dumps({"t": 1, "node": "n", "gpus": [{"index": 0, "util": True}]}),
        SAMPLE_PREFIX + '{"t": 1, "node": "n", "gpus": [{"index": 0, "util": NaN}]}',
        SAMPLE_PREFIX
        + json.dumps({"t": 1, "node": "n", "gpus": [{"index": 0, "util": 5, "mem_used_mb": "1G"}]}),
        SAMPLE_PREFIX + json.dumps({"t": 1, "node": "n", "gpus": [7]}),
        SAMPLE_PREFIX + '{"t": 1, "node": "n", "gpus": [' + "1," * 60_000 + "1]}",
        # a line another task's output cut in two (srun forwards in chunks)
        SAMPLE_PREFIX + '{"t": 1, "node": "n", "gpus": [{"index": 0, "ut',
    ],
)
def test_garbled_sampler_lines_are_parse_errors(line: str) -> None:
    with pytest.raises(ParseError, match="usage sample"):
        parse_sampler_line(line)


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
