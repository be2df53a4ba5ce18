"""The cheap poll format and its parser."""

from __future__ import annotations

from datetime import timezone

import pytest

from slurmlab.core.slurm.detect import detect_and_parse
from slurmlab.core.slurm.squeue_brief import BRIEF_FIELDS, BRIEF_FORMAT, parse_squeue_brief
from slurmlab.errors import ParseError

# Lines as squeue -h -o BRIEF_FORMAT prints them for the recorded workload (values from s06/s19).
SAMPLE = (
    "2|2|2|N/A|RUNNING|None|2026-11-29T15:04:03|2026-11-29T16:04:03|1:00:00|58:10|1:50|2|node[1-2]|gpu|root|gres:gpu:h100:1\n"
    "10_[2-5%3]|10|10|2-5%3|PENDING|Resources|N/A|N/A|1:00:00|1:00:00|0:00|1||gpu|root|N/A\n"
    "7|7|7|N/A|PENDING|JobHeldUser|N/A|N/A|30:00|30:00|0:00|1||gpu|root|N/A\n"
    "10_1|15|10|1|RUNNING|None|2026-11-29T15:05:31|2026-11-29T16:05:31|1:00:00|59:34|0:26|1|node2|gpu|root|N/A\n"
)


def test_format_has_one_letter_per_field_and_no_free_text() -> None:
    letters = BRIEF_FORMAT.split("|")
    assert len(letters) == len(BRIEF_FIELDS)
    assert all(x.startswith("%") and len(x) == 2 for x in letters)
    # the job name (%j) and comment (%k) are free text: a newline in one would forge lines
    assert "%j" not in letters and "%k" not in letters


def test_a_line_with_a_forged_tail_is_refused_not_misread() -> None:
    # what an old format with the name last would have let through: extra fields are an error
    with pytest.raises(ParseError):
        parse_squeue_brief("2|2|2|N/A|RUNNING|None|N/A|N/A|1:00:00|58:10|1:50|1|node1|gpu|root|N/A|x|y")


def test_parse_brief_lines() -> None:
    jobs = parse_squeue_brief(SAMPLE, tz=timezone.utc)
    j2, pend, held, task = jobs
    assert (j2.job_id, j2.state, j2.nodes, j2.time_limit, j2.time_left, j2.reason) == (
        2,
        "RUNNING",
        ("node1", "node2"),
        3600,
        3490,
        None,
    )
    assert [(g.name, g.type, g.count) for g in j2.tres_per_node] == [("gpu", "h100", 1)]
    assert (pend.display_id, pend.array_task, pend.reason, pend.start_time, pend.nodes) == (
        "10_[2-5%3]",
        "2-5%3",
        "Resources",
        None,
        (),
    )
    assert held.held and held.name == ""
    assert (j2.array_job_id, j2.array_task) == (None, None)  # %F repeats the job id outside arrays
    assert (task.job_id, task.array_job_id, task.array_task, task.nodes) == (15, 10, "1", ("node2",))
    assert j2.to_dict()["start_time"] == "2026-11-29T15:04:03+00:00"


def test_detect_recognises_brief_output() -> None:
    parsed = detect_and_parse(SAMPLE, tz=timezone.utc)
    assert parsed.kind == "brief" and len(parsed.items) == 4


@pytest.mark.parametrize(
    "bad",
    [
        "2|RUNNING|None",  # another format string
        "x|x|2|N/A|RUNNING|None|N/A|N/A|1:00:00|1:00:00|0:00|1|node1|gpu|root|N/A",  # job id not a number
        "2|2|2|N/A|RUNNING|None|yesterday|N/A|1:00:00|1:00:00|0:00|1|node1|gpu|root|N/A",
        "2|2|2|N/A|RUNNING|None|N/A|N/A|1:00:00|1:00:00|0:00|1|node[1-|gpu|root|N/A",
    ],
)
def test_bad_lines_raise_quoting_the_line(bad: str) -> None:
    with pytest.raises(ParseError) as info:
        parse_squeue_brief("2|2|2|N/A|RUNNING|None|N/A|N/A|1:00:00|1:00:00|0:00|1|node1|gpu|root|N/A\n" + bad)
    assert bad[:10] in str(info.value)


def test_sinfo_node_states() -> None:
    import pytest

    from slurmlab.core.slurm.parse_text import parse_sinfo_node_states
    from slurmlab.errors import ParseError

    assert parse_sinfo_node_states("node1|idle\nnode2|mixed\nnode1|idle\nnode3|down*\n") == {
        "node1": "idle",
        "node2": "mixed",
        "node3": "down*",
    }
    with pytest.raises(ParseError, match="node1 idle"):
        parse_sinfo_node_states("node1 idle\n")
