"""The first poll of a large queue shows the brief view at once and the poll that follows brings the details;
the nodes answer spliced from each node's JSON is the canonical encoding (recorded Slurm 22.05 output)."""

from __future__ import annotations

import asyncio
import json

import pytest
from fake_slurm import cluster

from slurmlab.server import jobtracker
from slurmlab.server.cache import ResponseCache
from slurmlab.server.jobtracker import JobTracker
from slurmlab.server.nodetracker import NodeViews
from slurmlab.server.poller import ClusterPoller
from slurmlab.server.views import nodes_view
from slurmlab.server.worker import ClusterMemory, PollOutcome, collect, encode_answers
from slurmlab.slurm import queries
from slurmlab.testing import FakeRunner

ME = 0
LISTING = ["scontrol", "show", "job", "-d"]


def test_a_large_first_poll_is_brief_and_the_next_brings_the_detail(
    fake_runner: FakeRunner, monkeypatch: pytest.MonkeyPatch
) -> None:
    cluster(fake_runner)
    owners = queries.job_owners(fake_runner)
    full = JobTracker().poll(fake_runner, owners, ME, {})
    assert full.complete
    asked = len(fake_runner.called(LISTING))
    monkeypatch.setattr(jobtracker, "BRIEF_FIRST_OVER", 0)  # the recording's few jobs count as a large queue
    tracker = JobTracker()
    first = tracker.poll(fake_runner, owners, ME, {})
    assert not first.complete
    assert len(fake_runner.called(LISTING)) == asked  # no detail asked
    assert first.views and not any(v["gpus"] for v in first.views)
    assert [v["job_id"] for v in first.views] == [v["job_id"] for v in full.views]
    assert [v["state"] for v in first.views] == [v["state"] for v in full.views]
    assert any(v["gpus"] for v in full.views)
    second = tracker.poll(fake_runner, owners, ME, {})
    assert second.complete
    assert [dict(v) for v in second.views] == [dict(v) for v in full.views]


def test_an_incomplete_poll_is_followed_by_another_at_once() -> None:
    class Source:
        user = "alice"

        def __init__(self) -> None:
            self.outcomes = [PollOutcome("22.05.8", complete=False), PollOutcome("22.05.8")]

        async def poll(self, version: str | None, whole: bool = True) -> PollOutcome:
            return self.outcomes.pop(0) if self.outcomes else PollOutcome("22.05.8")

    async def run() -> int:
        poller = ClusterPoller(Source(), interval=3600)  # type: ignore[arg-type]
        await poller.refresh()
        for _ in range(50):
            await asyncio.sleep(0)
            if poller.polls >= 2 and not poller.polling:
                break
        return poller.polls

    assert asyncio.run(run()) == 2  # the follow-up, and no third: it was complete


def test_the_spliced_nodes_answer_is_the_canonical_encoding(fake_runner: FakeRunner) -> None:
    cluster(fake_runner)
    nodes = sorted(queries.list_nodes(fake_runner), key=lambda n: n.name)
    jobs = list(queries.list_jobs(fake_runner, all_users=True))
    views, bodies = NodeViews().build(nodes, jobs)
    problems = [{"kind": "node", "record": "node9", "message": 'bad "record"'}]
    spliced = encode_answers(views, [], problems, "root", node_bodies=bodies)  # type: ignore[list-item]
    whole = encode_answers(nodes_view(nodes, jobs), [], problems, "root")  # type: ignore[list-item]
    assert spliced["nodes"] == whole["nodes"]
    assert (
        json.loads(spliced["nodes"].body)["nodes"]
        == json.loads(ResponseCache.encode({"nodes": nodes_view(nodes, jobs)}))["nodes"]
    )


def test_collect_with_its_memory_gives_the_same_answers_as_a_fresh_one(fake_runner: FakeRunner) -> None:
    cluster(fake_runner)
    memory = ClusterMemory()
    first = collect(fake_runner, "root", ME, None, memory)
    again = collect(fake_runner, "root", ME, first.version, memory)
    fresh = collect(fake_runner, "root", ME, first.version)
    assert first.error_kind is None and again.complete
    for key in ("nodes", "queue:all", "queue:mine"):
        assert again.answers[key] == fresh.answers[key] == first.answers[key], key
