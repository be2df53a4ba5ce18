"""The sidebar's "recent jobs" route on recorded sacct output (FakeRunner): only the server uid's jobs, kept
for a minute, asked off the event loop, and a clear line when accounting is off."""

from __future__ import annotations

import json
import threading
from datetime import datetime
from typing import Any

import pytest

from slurmlab.core.slurm.sacct import parse_sacct
from slurmlab.server.contract import RecentJobsAnswer
from slurmlab.server.recent import recent_answer
from slurmlab.testing import FakeRunner, recorded

SACCT = recorded("22.05/sacct/a02_sacct_recent.txt").stdout
OFF = recorded("22.05/sacct/a04_sacct_disabled.txt").stderr
OWNER = next(r.uid for r in parse_sacct(SACCT) if r.is_job and r.uid is not None)


@pytest.fixture
def jp_server_config() -> dict[str, Any]:
    from traitlets.config import Config

    return Config(
        {
            "ServerApp": {
                "jpserver_extensions": {"slurmlab.server": True},
                "tornado_settings": {"slurmlab_poll_interval": 0.2, "slurmlab_cluster_poll_interval": 0.2},
            }
        }
    )


def test_the_answer_has_my_jobs_newest_first_with_words_and_efficiency(fake_runner: FakeRunner) -> None:
    fake_runner.on(["sacct", ...], stdout=SACCT)
    answer = recent_answer(fake_runner, OWNER)
    jobs = [r for r in parse_sacct(SACCT) if r.is_job]
    assert [j["job_id"] for j in answer["jobs"]] == [r.job_id for r in reversed(jobs)]
    assert answer["accounting"] is True and answer["message"] is None
    for view, record in zip(answer["jobs"], reversed(jobs), strict=True):
        assert view["state"] == record.state and view["gpus"] == record.gpus
        assert view["state_words"] and view["state_words"] != record.state
        assert (view["efficiency"] is None) == (record.start is None)
    assert set(RecentJobsAnswer.__annotations__) - {"as_of", "age_s"} <= set(answer)


def test_jobs_of_another_uid_are_not_shown_whatever_their_name(fake_runner: FakeRunner) -> None:
    t = datetime.now().strftime("%Y-%m-%dT%H:%M:%S")
    other = OWNER + 1000
    fake_runner.on(
        ["sacct", ...],
        stdout=SACCT + f"77|{other}|root|research|debug|normal|COMPLETED|0:0|00:00:01|"
        f"00:05:00|{t}|{t}|{t}|node1|1|cpu=1|1000M||00:00.003||root\n",
    )
    assert "77" not in [j["job_id"] for j in recent_answer(fake_runner, OWNER)["jobs"]]
    assert [j["job_id"] for j in recent_answer(fake_runner, other)["jobs"]] == ["77"]


def test_accounting_off_is_an_answer_with_the_way_to_turn_it_on(fake_runner: FakeRunner) -> None:
    fake_runner.on(["sacct", ...], stderr=OFF, returncode=1)
    answer = recent_answer(fake_runner, OWNER)
    assert answer["accounting"] is False and answer["jobs"] == []
    assert answer["message"] is not None and "--accounting" in answer["message"]


def test_garbage_from_sacct_is_a_line_not_a_crash(fake_runner: FakeRunner) -> None:
    fake_runner.on(["sacct", ...], stdout="1|0|root|x|y|z|COMPLETED|zero|00:00:01|||||n|1|||||bad\n")
    answer = recent_answer(fake_runner, OWNER)
    assert answer["jobs"] == [] and "cannot read recent jobs" in (answer["message"] or "")


async def test_the_route_answers_from_a_worker_and_keeps_the_answer(
    fake_runner: FakeRunner, jp_fetch: Any, monkeypatch: pytest.MonkeyPatch
) -> None:
    from slurmlab.slurm import identity

    monkeypatch.setattr(identity, "current_uid", lambda: OWNER)
    seen: list[str] = []
    real_run = fake_runner.run

    def run(argv: Any, **kw: Any) -> Any:
        seen.append(threading.current_thread().name)
        return real_run(argv, **kw)

    monkeypatch.setattr(fake_runner, "run", run)
    fake_runner.on(["sacct", ...], stdout=SACCT)
    first = json.loads((await jp_fetch("slurmlab", "api", "recent")).body.decode())
    second = json.loads((await jp_fetch("slurmlab", "api", "recent")).body.decode())
    assert first["jobs"] and first["jobs"] == second["jobs"] and "as_of" in first
    assert len(fake_runner.called(["sacct", ...])) == 1  # kept: sacct is asked at most once a minute
    assert seen and threading.main_thread().name not in seen  # never on the server's event loop


class _CountingRecent:
    """RecentJobs whose fetch only counts (the decision of when to ask sacct is what is tested)."""

    @staticmethod
    def make(cache: Any, monkeypatch: pytest.MonkeyPatch) -> Any:
        from types import SimpleNamespace

        from slurmlab.server import recent
        from slurmlab.server.cache import CacheEntry

        kept = recent.RecentJobs(SimpleNamespace(cache=cache))  # type: ignore[arg-type]

        async def fetch() -> None:
            kept.fetches += 1
            kept.entry = CacheEntry(b"{}", "e", 0.0, 0.0)
            kept.fetched_at = clock[0]

        clock = [1000.0]
        monkeypatch.setattr(kept, "_fetch", fetch)
        monkeypatch.setattr(recent.time, "monotonic", lambda: clock[0])
        kept.clock = clock
        return kept


async def test_recent_jobs_are_asked_again_when_my_queue_changes_not_a_minute_later(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """Issue 28: a job that had ended stayed "running" in Recent jobs for up to a minute. The answer is asked
    again as soon as the poller's queue of my jobs changes (and once more a moment later, for slurmdbd), and
    otherwise kept for the minute: sacct is not asked at every sidebar round."""
    from slurmlab.server.cache import ResponseCache

    cache = ResponseCache()
    cache.put("queue:mine", {"jobs": [{"job_id": "7", "state": "RUNNING"}]})
    kept = _CountingRecent.make(cache, monkeypatch)
    await kept.answer()
    kept.clock[0] += 10
    await kept.answer()
    assert kept.fetches == 1  # nothing changed: kept
    cache.put("queue:mine", {"jobs": []})  # job 7 ended and left the queue
    kept.clock[0] += 1
    await kept.answer()
    assert kept.fetches == 2  # at once, not after the minute
    kept.clock[0] += 1
    await kept.answer()
    assert kept.fetches == 2
    kept.clock[0] += 5  # RECENT_SETTLE later: once more, in case slurmdbd had not recorded the end yet
    await kept.answer()
    assert kept.fetches == 3
    kept.clock[0] += 30
    await kept.answer()
    assert kept.fetches == 3  # then the minute again
    kept.clock[0] += 31
    await kept.answer()
    assert kept.fetches == 4
