"""The poll never holds up a request: Slurm's answers, parsing, views and encoding happen in a worker, and
the routes answer from the cache (or without it) while a poll is in flight. Not timed: a poll blocked on an
event stays in progress until the test releases it, and every request must come back before that."""

from __future__ import annotations

import asyncio
import json
import threading
from collections.abc import Sequence
from typing import Any

import pytest
from fake_slurm import OWNER_UID, cluster

from slurmlab.core.slurm.gres import parse_gres
from slurmlab.core.slurm.models import GresAlloc, Job, Node
from slurmlab.errors import SlurmlabError
from slurmlab.server.poller import ClusterPoller
from slurmlab.server.views import node_view, nodes_view
from slurmlab.server.worker import PollWorker, collect, mode_from
from slurmlab.slurm.runner import Runner
from slurmlab.testing import FakeRunner


@pytest.fixture
def jp_server_config() -> dict[str, Any]:
    from traitlets.config import Config

    # a long interval: the test starts the polls itself, and no timer poll gets in between
    return Config(
        {
            "ServerApp": {
                "jpserver_extensions": {"slurmlab.server": True},
                "tornado_settings": {"slurmlab_poll_interval": 60},
            }
        }
    )


class _Gate:
    """Holds every look at the nodes (the brief ``sinfo -N`` is asked at every poll, ``scontrol show node``
    when they changed) until released: a slow controller."""

    def __init__(self, fake: FakeRunner) -> None:
        self.entered = threading.Event()
        self.release = threading.Event()
        self._run = fake.run
        fake.run = self._gated  # type: ignore[method-assign]

    def _gated(self, argv: Sequence[str], **kw: Any) -> Any:
        if ("node" in argv and "show" in argv) or (list(argv[:1]) == ["sinfo"] and "-N" in argv):
            self.entered.set()
            if not self.release.wait(30):
                raise SlurmlabError("test gate never released")
        return self._run(argv, **kw)


async def _wait_for(event: threading.Event) -> None:
    for _ in range(600):
        if event.is_set():
            return
        await asyncio.sleep(0.05)
    raise AssertionError("the poll never reached Slurm")


async def test_routes_answer_while_a_poll_is_in_progress(
    fake_runner: FakeRunner, jp_fetch: Any, jp_serverapp: Any, monkeypatch: pytest.MonkeyPatch
) -> None:
    from slurmlab.slurm import identity

    monkeypatch.setattr(identity, "current_uid", lambda: OWNER_UID)
    cluster(fake_runner)
    first = json.loads((await jp_fetch("slurmlab", "api", "nodes")).body)  # the first poll, not gated
    poller: ClusterPoller = jp_serverapp.web_app.settings["slurmlab_poller"]
    gate = _Gate(fake_runner)
    poll = asyncio.ensure_future(poller.refresh())
    await _wait_for(gate.entered)
    try:
        assert poller.polling
        jupyter_status = await jp_fetch("api", "status")
        nodes = json.loads((await jp_fetch("slurmlab", "api", "nodes")).body)
        status = json.loads((await jp_fetch("slurmlab", "api", "status")).body)
        clusters = json.loads((await jp_fetch("slurmlab", "api", "clusters")).body)
        # every answer came back while Slurm was still being asked
        assert poller.polling and not poll.done()
    finally:
        gate.release.set()
    await poll
    assert jupyter_status.code == 200
    assert [n["name"] for n in nodes["nodes"]] == [n["name"] for n in first["nodes"]]
    assert status["reachable"] is True and clusters["clusters"]
    assert poller.polls == 2


def test_worker_process_reports_a_missing_slurm_as_an_answer() -> None:
    """The worker process rebuilds the runner from its settings; Slurm missing there is a 503, not a crash."""
    worker = PollWorker("process")
    runner = Runner(env={"PATH": "/nonexistent"})
    assert worker.uses_process(runner) and not worker.uses_process(FakeRunner())
    outcome = asyncio.run(worker.poll(runner, "alice", 1000, None))
    assert outcome.error_kind is not None and outcome.error_status == 503
    assert "sinfo" in (outcome.error_message or "") or "scontrol" in (outcome.error_message or "")
    assert not outcome.unexpected and not outcome.answers


def test_the_poll_worker_process_yields_the_cpu_to_the_server() -> None:
    import os

    from slurmlab.server.worker import _POOLS, WORKER_NICENESS

    pool = _POOLS.process("test-niceness")
    try:
        theirs = pool.submit(os.nice, 0).result(timeout=60)
    finally:
        _POOLS.forget_process("test-niceness", pool)
    assert theirs == min(os.nice(0) + WORKER_NICENESS, 19)


def test_a_parser_bug_is_an_error_answer(fake_runner: FakeRunner, monkeypatch: pytest.MonkeyPatch) -> None:
    from slurmlab.slurm import queries

    cluster(fake_runner)

    def broken(*args: Any, **kw: Any) -> Any:
        raise KeyError("job_state")

    monkeypatch.setattr(queries, "list_jobs", broken)
    outcome = collect(fake_runner, "alice", 0)
    assert outcome.unexpected and outcome.error_status == 500 and "job_state" in (outcome.error_message or "")


def test_a_bad_worker_mode_says_which_are_known(monkeypatch: pytest.MonkeyPatch) -> None:
    with pytest.raises(SlurmlabError, match="process"):
        mode_from("fork")
    monkeypatch.setenv("SLURMLAB_POLL_WORKER", "thread")
    assert mode_from() == "thread"


def _node(i: int) -> Node:
    return Node(
        name=f"gpu{i:03d}",
        state="MIXED",
        partitions=("gpu",),
        cpus=64,
        alloc_cpus=8,
        gres=parse_gres("gpu:h100:4,shard:h100:16"),
        gres_used=parse_gres("gpu:h100:0(IDX:N/A)"),
    )


def _job(jid: int, node: str, gres: str, state: str = "RUNNING") -> Job:
    return Job(
        job_id=jid,
        name=f"j{jid}",
        state=state,
        user="alice",
        nodelist=node,
        nodes=(node,),
        gpu_allocs=(GresAlloc(node=node, items=parse_gres(gres)),),
    )


def test_nodes_view_indexes_jobs_by_node_with_the_same_answer() -> None:
    """The indexed nodes view equals asking every node about every job (what it replaced)."""
    nodes = [_node(i) for i in range(12)]
    jobs = [_job(100 + k, f"gpu{k % 12:03d}", f"gpu:h100:1(IDX:{k % 4})") for k in range(30)]
    jobs += [_job(200 + k, f"gpu{k:03d}", "shard:h100:2(IDX:1)") for k in range(5)]
    jobs += [
        _job(300, "gpu000", "gpu:h100:1(IDX:3)", state="COMPLETED"),
        _job(301, "gpu001", "gpu:h100:1(IDX:2)", state="PENDING"),
    ]
    naive = [node_view(n, jobs) for n in sorted(nodes, key=lambda n: n.name)]
    assert nodes_view(nodes, jobs) == naive
    held = {j for view in naive for gpu in view["gpus"] for j in gpu["jobs"]}
    assert "300" not in held and "301" not in held and "100" in held and "200" in held
