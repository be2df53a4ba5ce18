"""The server's job tracker on recorded Slurm 22.05 output: one brief listing per poll, details only for the
jobs that need them, and the same views as parsing every job's detail."""

from __future__ import annotations

from pathlib import Path

from fake_slurm import cluster

from slurmlab.core.slurm.squeue_brief import BRIEF_FORMAT
from slurmlab.server.jobtracker import JobTracker
from slurmlab.server.views import job_view
from slurmlab.slurm import queries
from slurmlab.testing import FakeRunner
from slurmlab.testing.fake_runner import golden_dir

BRIEF = ["squeue", "-h", "-t", "all", "-o", BRIEF_FORMAT]
LISTING = ["scontrol", "show", "job", "-d"]
ME = 0


def _brief_lines() -> list[str]:
    return (Path(golden_dir()) / "22.05" / "s21_squeue_brief.txt").read_text().splitlines()


def _poll(tracker: JobTracker, fake: FakeRunner) -> tuple[list[dict[str, object]], list[dict[str, object]]]:
    owners = queries.job_owners(fake)
    found = tracker.poll(fake, owners, ME, {})
    return [dict(v) for v in found.views], [dict(p) for p in found.problems]


def test_first_poll_gives_the_views_of_the_whole_listing(fake_runner: FakeRunner) -> None:
    cluster(fake_runner)
    views, problems = _poll(JobTracker(), fake_runner)
    owners = queries.job_owners(fake_runner)
    full = {
        str(j.job_id): dict(job_view(j, owners, ME)) for j in queries.list_jobs(fake_runner, all_users=True)
    }
    assert {v["job_id"] for v in views} == set(full)  # the active jobs, no ended ones
    for view in views:
        assert view == full[str(view["job_id"])]
    assert not problems


def test_later_polls_ask_only_the_brief_listing_until_something_moves(fake_runner: FakeRunner) -> None:
    cluster(fake_runner)
    tracker = JobTracker()
    first, _ = _poll(tracker, fake_runner)
    listings = len(fake_runner.called(LISTING))
    # the clock ticks: time used and time left change on every running line, nothing else
    ticked = [line.replace("|59:27|0:33|", "|59:00|1:00|") for line in _brief_lines()]
    fake_runner.on(BRIEF, stdout="\n".join(ticked) + "\n")
    again, _ = _poll(tracker, fake_runner)
    assert again == first
    assert len(fake_runner.called(["scontrol", "show", "job", "-d", ...])) == listings


def test_a_reason_change_is_laid_over_without_detail_and_an_ended_job_is_forgotten(
    fake_runner: FakeRunner,
) -> None:
    cluster(fake_runner)
    tracker = JobTracker()
    _poll(tracker, fake_runner)
    calls = len(fake_runner.history)
    lines = _brief_lines()
    moved = [
        line.replace("|PENDING|Resources|", "|PENDING|Priority|") if line.startswith("9|") else line
        for line in lines
        if not line.startswith("1|")
    ]
    fake_runner.on(BRIEF, stdout="\n".join(moved) + "\n")
    views, _ = _poll(tracker, fake_runner)
    by_id = {v["job_id"]: v for v in views}
    assert "1" not in by_id
    assert by_id["9"]["reason"] == "Priority" and by_id["9"]["reason_words"]
    assert not [a for a in fake_runner.history[calls:] if a[:2] == ["scontrol", "show"]]


def test_a_new_job_gets_its_own_detail_and_garbage_lines_are_problems(fake_runner: FakeRunner) -> None:
    cluster(fake_runner)
    tracker = JobTracker()
    _poll(tracker, fake_runner)
    record = (Path(golden_dir()) / "22.05" / "l06_scontrol_show_job_d_running.txt").read_text()
    brief = (Path(golden_dir()) / "22.05" / "l06_squeue_brief_running.txt").read_text().strip()
    fake_runner.on(["scontrol", "show", "job", "-d", "19"], stdout=record)
    hostile = [
        "x|y",
        "19|19|19|N/A|RUNNING|None|garbage-time|N/A|1:00:00|5:00|0:01|1|node1|gpu|root|N/A".replace(
            "19|19|19", "77|77|77"
        ),
    ]
    fake_runner.on(BRIEF, stdout="\n".join([*_brief_lines(), brief, *hostile]) + "\n")
    views, problems = _poll(tracker, fake_runner)
    assert "19" in {v["job_id"] for v in views}
    assert fake_runner.called(["scontrol", "show", "job", "-d", "19"])
    assert len(problems) == 2 and all(p["kind"] == "job" for p in problems)
    assert len(fake_runner.called(LISTING)) == 1  # the new job alone was asked about, not the whole queue


def test_answers_joined_from_each_jobs_json_are_the_canonical_encoding(fake_runner: FakeRunner) -> None:
    """The queue answer is spliced from each job's JSON, encoded when the job changed: byte for byte (and so
    ETag for ETag) what encoding the whole answer gives."""
    from slurmlab.server.worker import encode_answers

    cluster(fake_runner)
    found = JobTracker().poll(fake_runner, queries.job_owners(fake_runner), ME, {})
    problems = [{"kind": "job", "record": "9", "message": 'bad "record"'}]
    spliced = encode_answers([], found.views, problems, "root", found.bodies)  # type: ignore[list-item]
    whole = encode_answers([], found.views, problems, "root")  # type: ignore[list-item]
    assert len(found.views) > 3 and any(v["mine"] for v in found.views)
    for key in ("queue:all", "queue:mine"):
        assert spliced[key] == whole[key]
    assert spliced["queue:mine"].body != spliced["queue:all"].body
