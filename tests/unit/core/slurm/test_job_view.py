"""The one typed view of a job: built from the full record, the cheap poll, or both, and read the same way."""

from __future__ import annotations

from datetime import datetime, timedelta, timezone

from slurmlab.core.slurm.gres import parse_gres
from slurmlab.core.slurm.job_view import JobView, job_view
from slurmlab.core.slurm.models import GresAlloc, Job, Tres
from slurmlab.core.slurm.squeue_brief import parse_squeue_brief
from slurmlab.widgets.rows import gpus_text, job_row, shards_text

START = datetime(2026, 11, 29, 15, 4, 3, tzinfo=timezone.utc)
BRIEF = parse_squeue_brief(
    "2|2|2|N/A|RUNNING|None|2026-11-29T15:04:03|2026-11-29T16:04:03|1:00:00|58:10|1:50|2|node[1-2]|gpu|root|"
    "gres:gpu:h100:1\n"
    "7|7|7|N/A|PENDING|JobHeldUser|2026-11-29T18:00:00|N/A|30:00|30:00|0:00|1||gpu|root|N/A\n",
    tz=timezone.utc,
)


def _job(**kw: object) -> Job:
    fields: dict[str, object] = dict(
        job_id=2,
        name="train",
        state="RUNNING",
        user="ada",
        partition="gpu",
        nodelist="node[1-2]",
        nodes=("node1", "node2"),
        start_time=START,
        end_time=START + timedelta(hours=1),
        time_limit=3600,
        gpu_allocs=(
            GresAlloc("node1", parse_gres("gpu:h100:2(IDX:0-1),shard:h100:4(IDX:3)")),
            GresAlloc("node2", parse_gres("gpu:h100:1(IDX:2)")),
        ),
        num_tasks=4,
        comment="slurmlab:host:1:ab",
    )
    fields.update(kw)
    return Job(**fields)  # type: ignore[arg-type]


def test_a_view_of_the_full_record_keeps_what_only_the_detail_knows() -> None:
    job = _job()
    view = JobView.from_job(job)
    assert view.detailed and view.gpus_by_node() == job.gpus_by_node() == {"node1": (0, 1), "node2": (2,)}
    assert (view.display_id, view.name, view.user, view.num_tasks, view.comment) == (
        "2",
        "train",
        "ada",
        4,
        "slurmlab:host:1:ab",
    )
    now = START + timedelta(minutes=10)
    assert view.time_left(now) == job.time_left(now) == 3000.0
    assert view.elapsed(now) == 600.0 and view.expected_start is None


def test_a_view_of_the_brief_poll_has_no_gpu_indices_but_the_same_times() -> None:
    running, held = (JobView.from_brief(b) for b in BRIEF)
    assert not running.detailed and running.gpu_allocs == () and running.nodes == ("node1", "node2")
    assert running.gpus_asked == ("gres:gpu:h100:1",)  # as Slurm wrote it
    assert running.time_left(START + timedelta(minutes=30)) == 1800.0
    assert held.held and held.expected_start == datetime(2026, 11, 29, 18, 0, tzinfo=timezone.utc)
    assert held.time_left(START) is None and held.elapsed(START) is None


def test_both_records_merge_state_from_the_poll_and_the_rest_from_the_detail() -> None:
    brief = BRIEF[0]
    job = _job(state="CONFIGURING", user=None, end_time=None)
    view = job_view(job, brief)
    assert view is not None and view.detailed
    assert view.state == "RUNNING"  # the poll is what an allocation follows
    assert view.user == "root" and view.end_time == brief.end_time  # gaps of the detail filled from the poll
    assert view.gpus_by_node() == {"node1": (0, 1), "node2": (2,)}
    assert job_view(None, None) is None
    only_brief = job_view(None, brief)
    assert only_brief is not None and only_brief == JobView.from_brief(brief)


def test_the_job_table_reads_a_job_and_its_view_alike() -> None:
    now = START + timedelta(minutes=5)
    for job in (
        _job(),
        _job(
            state="PENDING",
            reason="Resources",
            gpu_allocs=(),
            nodes=(),
            nodelist="",
            tres_req=Tres.parse("cpu=4,node=1,gres/gpu=2"),
        ),
    ):
        assert job_row(job, now) == job_row(JobView.from_job(job), now)
    job = _job()
    assert gpus_text(job) == "node1:0,1 (h100) node2:2 (h100)" and shards_text(job) == "node1 gpu3:4"
    pending = _job(state="PENDING", gpu_allocs=(), tres_per_node=parse_gres("gres/gpu:h100:2"))
    assert gpus_text(pending) == "asked gres/gpu:h100:2"
    assert gpus_text(_job(gpu_allocs=(), tres_req=Tres.parse("cpu=4,gres/gpu=3"))) == "asked gpu:3"
