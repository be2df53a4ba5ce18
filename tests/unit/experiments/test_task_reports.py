"""Reports of many tasks, interleaved by srun in 1 KiB pieces, come back whole (or the task is named)."""

from __future__ import annotations

import json
import random
import re
from pathlib import Path
from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from slurmlab.core.framing import BEGIN, END, frame, has_reports, read_reports, split_labelled
from slurmlab.errors import ExperimentError

# eight reports that the verify step's tasks printed in the sandbox (-n8 --gpus-per-task=1)
REAL = json.loads((Path(__file__).parent / "data" / "verify_reports_8tasks.json").read_text())
MSG = 1024  # srun forwards a task's output in messages of at most this many bytes


def _messages(text: str, rng: random.Random | None) -> list[str]:
    """A task's stdout as slurmstepd forwards it: full 1 KiB messages, or random shorter ones."""
    out, at = [], 0
    while at < len(text):
        size = MSG if rng is None else rng.randint(1, MSG)
        out.append(text[at : at + size])
        at += size
    return out


def _srun_label(stdouts: dict[int, str], rng: random.Random, *, random_sizes: bool = False) -> list[str]:
    """What ``srun --label`` prints (write_labelled_message): every piece of every message gets
    the task's label, a piece that does not end a line gets a newline; tasks' messages interleave
    in arrival order, each task's in its own order."""
    width = len(str(max(stdouts)))
    queues = {t: _messages(text, rng if random_sizes else None) for t, text in stdouts.items()}
    printed = []
    while queues:
        task = rng.choice(sorted(queues))
        msg = queues[task].pop(0)
        if not queues[task]:
            del queues[task]
        for piece in re.findall(r"[^\n]*\n|[^\n]+", msg):
            printed.append(f"{task:>{width}}: {piece}" + ("" if piece.endswith("\n") else "\n"))
    return "".join(printed).splitlines()  # as the step runner hands the lines over


def _stdouts(reports: list[dict[str, Any]]) -> dict[int, str]:
    return {t: frame(r) + "\n" for t, r in enumerate(reports)}


def test_the_real_reports_are_long_enough_to_be_split() -> None:
    assert len(REAL) == 8
    assert all(len(frame(r)) > 1.5 * MSG for r in REAL)
    assert [r["label"] for r in REAL] == [str(t) for t in range(8)]


@pytest.mark.parametrize("seed", range(5))
def test_eight_reports_interleaved_in_1kib_pieces_come_back_exactly(seed: int) -> None:
    lines = _srun_label(_stdouts(REAL), random.Random(seed))
    # the pieces really interleave: some task's pieces are not all next to each other
    owners = [int(ln.split(":", 1)[0]) for ln in lines]
    assert any(a != b for a, b in zip(owners, owners[1:], strict=False))
    assert sum(1 for a, b in zip(owners, owners[1:], strict=False) if a != b) > 8
    assert has_reports(lines)
    assert read_reports(lines, 8) == REAL


def test_unlabelled_the_same_interleaving_breaks_reports() -> None:
    # the failure this module exists for: without labels the pieces cannot be told apart
    lines = _srun_label(_stdouts(REAL), random.Random(1))
    unlabelled = "".join(ln.split(": ", 1)[1] for ln in lines)
    whole = [frame(r) for r in REAL]
    assert sum(w in unlabelled for w in whole) < 8


@settings(max_examples=40, deadline=None)
@given(seed=st.integers(0, 2**32 - 1), tasks=st.integers(1, 12), noise=st.booleans())
def test_any_piece_sizes_and_order_give_every_report_back(seed: int, tasks: int, noise: bool) -> None:
    # tasks >= 10 widen srun's label (" 3: "); other lines a task prints around its report
    rng = random.Random(seed)
    reports = [{**REAL[t % 8], "label": str(t)} for t in range(tasks)]
    stdouts = {
        t: ("a warning\n\n  indented: x\n" if noise else "") + frame(r) + "\n" + ("bye\n" if noise else "")
        for t, r in enumerate(reports)
    }
    assert read_reports(_srun_label(stdouts, rng, random_sizes=True), tasks) == reports


def test_a_marker_or_newline_inside_a_value_does_not_end_the_report() -> None:
    report = {**REAL[0], "slurm_env": {"SLURM_JOB_NAME": f"x{END}y\n{BEGIN}z </", "TAB": "\t"}}
    line = frame(report)
    assert "\n" not in line and line.count(END) == 1
    assert read_reports(_srun_label({0: line + "\n"}, random.Random(0)), 1) == [report]


def _with(stdouts: dict[int, str], seed: int = 0) -> list[str]:
    return _srun_label(stdouts, random.Random(seed))


def test_a_missing_task_is_named_as_missing_with_what_it_said() -> None:
    stdouts = _stdouts(REAL)
    stdouts[3] = "starting\n"
    with pytest.raises(ExperimentError) as err:
        read_reports(_with(stdouts), 8, stderr=["3: Traceback (most recent call last)", "3: OSError: boom"])
    text = str(err.value)
    assert "7 of 8" in text and "task 3 sent no report" in text and "'starting'" in text
    assert "OSError: boom" in text
    del stdouts[3]
    with pytest.raises(ExperimentError, match=r"task 3 sent no report \(it printed nothing\)"):
        read_reports(_with(stdouts), 8)


def test_a_report_cut_short_names_the_task_and_shows_what_arrived() -> None:
    stdouts = _stdouts(REAL)
    stdouts[5] = stdouts[5][: MSG + 10]  # the task died after its first message
    with pytest.raises(ExperimentError) as err:
        read_reports(_with(stdouts), 8)
    text = str(err.value)
    assert "task 5's report was cut short" in text
    assert repr(stdouts[5][len(BEGIN) : len(BEGIN) + 40])[:-1] in text  # the start of what arrived
    assert "JSONDecodeError" not in text and len(text) < 2000


def test_a_broken_report_names_the_task_and_the_place() -> None:
    stdouts = _stdouts(REAL)
    body = stdouts[6]
    stdouts[6] = body[:1500] + "\x00}{" + body[1500:]
    with pytest.raises(ExperimentError) as err:
        read_reports(_with(stdouts), 8)
    assert not isinstance(err.value, json.JSONDecodeError)
    text = str(err.value)
    assert "task 6's report arrived broken" in text and "\\x00}{" in text
    assert "task 0" not in text and "task 5" not in text


def test_a_task_that_failed_is_quoted_and_every_problem_listed() -> None:
    stdouts = _stdouts(REAL)
    stdouts[2] = frame({"error": "RuntimeError: no CUDA here", "label": "2"}) + "\n"
    stdouts[4] = BEGIN + "[1, 2]" + END + "\n"
    with pytest.raises(ExperimentError) as err:
        read_reports(_with(stdouts), 8, what="the verify step in allocation 12")
    text = str(err.value)
    assert text.startswith("the verify step in allocation 12: 6 of 8")
    assert (
        "task 2 failed: RuntimeError: no CUDA here" in text and "task 4's report is not a JSON object" in text
    )


def test_more_reports_than_tasks_is_an_error_not_a_silent_drop() -> None:
    with pytest.raises(
        ExperimentError, match=r"more tasks than the 4 expected \(reports from task\(s\) 4, 5\)"
    ):
        read_reports(_with(_stdouts(REAL[:6])), 4)


def test_unlabelled_lines_are_kept_apart() -> None:
    out = split_labelled(["srun: warning", "0: {", " 1: x", "12:", "0: }"])
    assert out.other == ["srun: warning"]
    assert out.text(0) == "{}" and out.text(1) == "x" and out.pieces[12] == [""]
    assert not has_reports(["0: {}", "srun: error"])


def test_a_huge_task_count_with_few_reports_is_named_quickly() -> None:
    lines = _with(_stdouts(REAL[:2]))
    with pytest.raises(ExperimentError) as err:
        read_reports(lines, 10**9, stderr=["7: srun: error: task 7 launch failed"])
    text = str(err.value)
    assert "2 of 1000000000" in text and "… and 999999994 more" in text
    assert "task 2 sent no report (it printed nothing)" in text
    assert "task 7 sent no report (it printed nothing); its stderr: srun: error: task 7" in text
    assert "task 6 " not in text  # four tasks named, the rest counted
