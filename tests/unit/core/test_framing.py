"""One framing for every node program: reports put back together per task from real ``srun --label`` output.

The recordings (``data/srun_label/``, see its README) are what a real srun printed in the sandbox: reports longer
than srun's 1 KiB pieces, interleaved between tasks, and tasks that print another task's label, stray markers,
bytes that are not UTF-8 or half a report. Only srun's label says whose a piece is.
"""

from __future__ import annotations

import io
import json
from pathlib import Path

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from slurmlab.core.framing import BEGIN, END, FRAME_SOURCE, frame, reports_by_task, split_labelled
from slurmlab.core.gpu.binding import TaskReportsError, parse_task_reports
from slurmlab.errors import ExperimentError, ParseError

DATA = Path(__file__).parent / "data" / "srun_label"


def _as_the_step_runner_reads(name: str) -> list[str]:
    """The recording's lines as ``slurm.steps.stream_step`` hands them over for a labelled step: UTF-8 with
    undecodable bytes replaced, split at "\\n" only."""
    stream = io.TextIOWrapper(
        io.BytesIO((DATA / name).read_bytes()), encoding="utf-8", errors="replace", newline="\n"
    )
    return [line.rstrip("\n") for line in stream]


def test_binding_reports_longer_than_srun_pieces_come_back_whole_from_interleaved_pieces() -> None:
    lines = _as_the_step_runner_reads("binding-probe-224cpus-n4-interleaved.txt")
    # what srun really did: every report cut into two pieces, tasks 1 and 2's pieces interleaved
    assert [ln.split(":", 1)[0] for ln in lines] == ["3", "3", "0", "0", "1", "2", "1", "2"]
    pieces = split_labelled(lines).pieces
    assert sorted(pieces) == [0, 1, 2, 3] and all(len(p[0]) == 1024 and len(p) == 2 for p in pieces.values())
    reports = parse_task_reports(lines, 4)
    assert [r.rank for r in reports] == [0, 1, 2, 3]
    assert [r.node for r in reports] == ["node1", "node1", "node1", "node2"]
    assert [r.step_gpus for r in reports] == [(0,), (1,), (2,), (0,)]
    assert all(r.affinity == frozenset(range(224)) for r in reports)
    # the devices travel in the report: each task's own nvidia-smi -L (the sandbox's stand-in)
    for r in reports:
        assert r.smi_list is not None and r.smi_list.count("GPU 0: NVIDIA H100 80GB HBM3 (UUID: GPU-") == 1
    assert len({r.smi_list for r in reports}) == 4
    # a caller that does not know the task count reads every task that printed
    assert parse_task_reports(lines) == reports


def test_a_task_that_prints_another_tasks_label_spoils_only_its_own_report() -> None:
    lines = _as_the_step_runner_reads("binding-probe-n4-task1-writes-label-0.txt")
    assert "1: 0: " + BEGIN in "\n".join(lines)  # srun labelled task 1's forged line as task 1's
    found = reports_by_task(lines, 4)
    env0 = found[0]["env"]
    assert isinstance(env0, dict) and env0["SLURMD_NODENAME"] == "node1" and env0["SLURM_STEP_GPUS"] == "0"
    assert found[0]["affinity"] == list(range(224))
    # the binding probe does not believe a report that names another task; it says which, no traceback
    with pytest.raises(ParseError) as err:
        parse_task_reports(lines, 4)
    text = str(err.value)
    assert "task 1's report of the binding probe" in text and "SLURM_PROCID=0" in text
    assert "forged" not in [
        r.node for r in parse_task_reports([ln for ln in lines if not ln.startswith("1:")])
    ]


def test_a_report_cut_short_names_its_task_and_no_other() -> None:
    lines = _as_the_step_runner_reads("binding-probe-n4-task2-cut-short.txt")
    with pytest.raises(TaskReportsError) as err:
        parse_task_reports(lines, 4)
    text = str(err.value)
    assert text.startswith("the binding probe step: 3 of 4 task report(s) arrived whole")
    assert "task 2's report was cut short" in text and "SLURMD_NODENAME" in text
    assert "task 0" not in text and "task 1" not in text and "task 3" not in text
    assert isinstance(err.value, ParseError) and "Traceback" not in text


def test_a_carriage_return_keeps_the_rest_of_the_line_in_its_tasks_piece() -> None:
    lines = _as_the_step_runner_reads("task1-prints-cr-and-label-0.txt")
    out = split_labelled(lines)
    assert list(out.pieces) == [1] and out.text(1).startswith("x\r0: " + BEGIN)
    with pytest.raises(ExperimentError, match=r"task 0 sent no report \(it printed nothing\)"):
        reports_by_task(lines, 2)


def test_the_reader_never_raises_anything_but_its_error_on_garbage() -> None:
    junk = [
        "\ufffd\ufffd" + BEGIN,
        "0: " + BEGIN + "{" * 100_000 + END,  # JSON too deep to decode
        "1: " + BEGIN + '"a string"' + END,
        "2: " + END + BEGIN,
        "3",
    ]
    with pytest.raises(ExperimentError) as err:
        reports_by_task(junk, 4)
    text = str(err.value)
    assert "task 0's report arrived broken" in text and "task 1's report is not a JSON object" in text
    with pytest.raises(ExperimentError, match="more tasks than the 4 expected"):
        reports_by_task([*junk, "9999999: " + frame({})], 4)


_JSON = st.recursive(
    st.none() | st.booleans() | st.integers() | st.text(),
    lambda inner: st.lists(inner, max_size=4) | st.dictionaries(st.text(), inner, max_size=4),
    max_leaves=20,
)


@settings(max_examples=100, deadline=None)
@given(report=st.dictionaries(st.text(), _JSON, max_size=6))
def test_the_frame_source_a_node_runs_frames_as_frame_does(report: dict[str, object]) -> None:
    space: dict[str, object] = {}
    exec(FRAME_SOURCE, space)  # what python3 -c runs on a node without slurmlab
    line = space["frame"](report)  # type: ignore[operator]
    assert line == frame(report) and "\n" not in line and line.count(END) == 1
    assert json.loads(line[len(BEGIN) : -len(END)]) == report


_PIECE = st.one_of(
    st.text(max_size=40),
    st.sampled_from(
        [BEGIN, END, "{", "}", '"env": {', '"SLURM_PROCID": ', "null", "[", "]", ",", "\ufffd", "\r"]
    ),
)
_LINE = st.builds(
    lambda label, parts: (f"{label}: " if label is not None else "") + "".join(parts),
    st.one_of(st.none(), st.integers(0, 5)),
    st.lists(_PIECE, max_size=6),
)


@settings(max_examples=300, deadline=None)
@given(lines=st.lists(_LINE, max_size=12), tasks=st.one_of(st.none(), st.integers(1, 6)))
def test_any_output_gives_reports_or_the_readers_error_never_a_traceback(
    lines: list[str], tasks: int | None
) -> None:
    try:
        found = reports_by_task(lines, tasks)
    except ExperimentError:
        pass
    else:
        assert all(isinstance(r, dict) for r in found.values())
    try:
        parse_task_reports(lines, tasks)
    except ParseError:
        pass


_ENV = st.fixed_dictionaries(
    {"SLURM_PROCID": st.one_of(st.just("0"), _JSON), "SLURMD_NODENAME": st.one_of(st.just("n1"), _JSON)},
    optional={
        k: st.one_of(st.just("0,1"), _JSON)
        for k in ("SLURM_STEP_GPUS", "SLURM_JOB_GPUS", "CUDA_VISIBLE_DEVICES")
    },
)
_REPORT = st.fixed_dictionaries(
    {"env": st.one_of(_ENV, _JSON)},
    optional={"affinity": _JSON, "host_cpus": _JSON, "L": _JSON, "pci": _JSON},
)


@settings(max_examples=300, deadline=None)
@given(report=_REPORT)
def test_any_report_content_reads_or_is_a_parse_error_never_a_traceback(report: dict[str, object]) -> None:
    try:
        (read,) = parse_task_reports(["0: " + frame(report)], 1)
    except ParseError:
        return
    assert read.rank == 0 and isinstance(read.node, str)
