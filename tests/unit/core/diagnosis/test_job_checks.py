"""The doctor's job judgement on jobs parsed from a real 22.05 sandbox: pending, held, its blockers (one of them
named ``x UserId=root(0) JobState=RUNNING``), running on a drained node."""

from __future__ import annotations

from dataclasses import replace
from datetime import datetime, timedelta

import pytest

from slurmlab.core.diagnosis.alternatives import Alternative, StartEstimate, Variant
from slurmlab.core.diagnosis.findings import Verdict
from slurmlab.core.diagnosis.job_checks import (
    PlannedStart,
    blockers,
    judge_alternatives,
    judge_blockers,
    judge_ended,
    judge_held,
    judge_pending,
    judge_running,
    parse_planned_start,
    usable_nodes,
    when,
)
from slurmlab.core.slurm.models import Job
from slurmlab.core.slurm.parse_text import (
    parse_scontrol_jobs,
    parse_scontrol_nodes,
    parse_scontrol_partitions,
    parse_scontrol_steps,
)
from slurmlab.errors import ParseError
from tests.unit.core.diagnosis.fake_cluster import read

NODES = parse_scontrol_nodes(read("show_node_d.txt"))
PARTS = parse_scontrol_partitions(read("show_partition.txt"))
ALL = parse_scontrol_jobs(read("show_job_d_all.txt"))


def _job(name: str) -> Job:
    return parse_scontrol_jobs(read(f"show_job_d_{name}.txt"))[0]


def test_a_user_hold_is_released_with_scontrol_release() -> None:
    f = judge_held(_job("held"))
    assert f.verdict is Verdict.FAIL and f.subject == "job 17"
    assert "held by you (JobHeldUser)" in f.evidence and "`scontrol release 17`" in f.fix


def test_an_admin_hold_is_for_the_admins() -> None:
    f = judge_held(replace(_job("held"), reason="JobHeldAdmin"))
    assert "administrator" in f.evidence and "ask the admins" in f.fix


def test_pending_for_resources_says_it_in_words_with_the_expected_start() -> None:
    job = _job("pending")
    now = job.expected_start - timedelta(minutes=30)  # type: ignore[operator]
    f = judge_pending(job, now)
    assert f.verdict is Verdict.WARN and "in use by other jobs (Resources)" in f.evidence
    assert f.details == ("Slurm expects it to start 2026-12-01 08:25:35 (in 30 minutes)",)


def test_squeue_start_gives_the_planned_start_and_nodes() -> None:
    job = _job("pending")
    now = job.expected_start - timedelta(minutes=30)  # type: ignore[operator]
    later = (job.expected_start + timedelta(minutes=10)).strftime("%Y-%m-%dT%H:%M:%S")  # type: ignore[operator]
    planned = parse_planned_start(f"{later}|node2\n")
    assert planned.nodes == "node2" and planned.start is not None
    f = judge_pending(job, now, planned)
    assert f.details == (
        "Slurm expects it to start 2026-12-01 08:35:35 (in 40 minutes) on node2 (squeue --start)",
    )
    # the scheduler has not planned it yet: the job record's StartTime still answers, without the nodes
    unknown = parse_planned_start("N/A|(null)\n")
    assert unknown == PlannedStart(None, None)
    assert judge_pending(job, now, unknown).details == (
        "Slurm expects it to start 2026-12-01 08:25:35 (in 30 minutes)",
    )
    assert parse_planned_start("") == PlannedStart(None, None)  # it started meanwhile: squeue lists nothing


@pytest.mark.parametrize(
    "garbage",
    ["2026-12-01T08:00:00", "a|b|c", "2026-13-45T99:00:00|node1", "x|node1\ny|node2", "\x00" * 5000 + "|n"],
)
def test_squeue_start_garbage_is_a_parse_error(garbage: str) -> None:
    with pytest.raises(ParseError):
        parse_planned_start(garbage)


def test_a_reason_that_never_resolves_fails() -> None:
    job = replace(_job("pending"), reason="PartitionTimeLimit", start_time=None)
    f = judge_pending(job, datetime.now().astimezone())
    assert f.verdict is Verdict.FAIL and "will not start as asked" in f.evidence and f.fix
    assert "no expected start" in f.details[0]


def test_blockers_are_the_running_jobs_holding_its_gpus_soonest_first() -> None:
    job = _job("pending")
    found = blockers(job, ALL, usable_nodes(job, NODES, PARTS))
    assert [(o.job_id, held) for o, held in found] == [
        (14, ["4 gpu:h100 on node1 [0-3]"]),
        (15, ["4 gpu:h100 on node2 [0-3]"]),
    ]
    # the hostile name is a name, not a state or an owner
    assert found[1][0].name == "x UserId=root(0) JobState=RUNNING"
    f = judge_blockers(job, found, job.expected_start - timedelta(minutes=30))  # type: ignore[operator]
    assert f.verdict is Verdict.WARN and f.details[0].startswith(
        "job 14 (root, RUNNING): 4 gpu:h100 on node1 [0-3]"
    )
    assert "the first ends 2026-12-01 08:25:35 (in 30 minutes)" in f.evidence


def test_a_job_holding_another_gpu_type_or_other_nodes_does_not_block() -> None:
    job = _job("pending")
    typed = replace(job, tres_per_job=(replace(job.tres_per_job[0], type="a100"),))
    assert blockers(typed, ALL, NODES) == []
    only_node1 = [n for n in NODES if n.name == "node1"]
    assert [o.job_id for o, _ in blockers(job, ALL, only_node1)] == [14]
    assert judge_blockers(job, [], datetime.now().astimezone()).verdict is Verdict.OK


def test_alternatives_best_first_with_the_salloc_line() -> None:
    job = _job("pending")
    start = job.expected_start
    v = Variant("gpus", "4 GPU(s) (--gpus) instead of 8", ("-p", "gpu", "--gpus=4", "-t", "20"))
    good = Alternative(v, StartEstimate(start - timedelta(minutes=20), "node1", "gpu"))  # type: ignore[operator]
    late = Alternative(Variant("time", "-t 10", ("-t", "10")), StartEstimate(start, "node1", "gpu"))
    f = judge_alternatives(job, [good], [late])
    assert f.verdict is Verdict.WARN and "best: 4 GPU(s)" in f.evidence
    assert f.fix == "`%scancel 16` then `%salloc -p gpu --gpus=4 -t 20`"
    assert f.details[0].endswith("->  %salloc -p gpu --gpus=4 -t 20") and f.details[1].startswith(
        "(not sooner)"
    )
    none = judge_alternatives(job, [], [late])
    assert none.verdict is Verdict.OK and "waiting is the fastest" in none.evidence
    assert judge_alternatives(job, [], []).verdict is Verdict.SKIP


def test_running_on_a_drained_node_warns_with_nodes_steps_and_time_left() -> None:
    job = replace(_job("running"), nodes=("node2",), nodelist="node2")
    steps = parse_scontrol_steps(read("show_step_running.txt"))
    now = job.end_time - timedelta(minutes=5)  # type: ignore[operator]
    f = judge_running(job, NODES, steps, now)
    assert f.verdict is Verdict.WARN and "node2" in f.evidence and "DRAIN" in f.evidence
    assert "time left: 5 minutes" in f.details and "node node2: MIXED+DRAIN" in f.details
    assert any(d.startswith("step 14.batch (batch): RUNNING") for d in f.details)
    ok = judge_running(_job("running"), NODES, [], now)
    assert ok.verdict is Verdict.OK and "no steps" in ok.details


def test_ended_and_when() -> None:
    assert judge_ended(replace(_job("running"), state="COMPLETED", reason="None")).verdict is Verdict.OK
    now = datetime(2026, 1, 1, 12, 0).astimezone()
    assert when(None, now) == "unknown"
    assert when(now + timedelta(hours=1), now).endswith("(in 1 hour)")
    assert when(now - timedelta(seconds=90), now).endswith("(1 minute 30 seconds ago)")
