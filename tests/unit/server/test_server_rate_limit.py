"""The sidebar's rate-limit line (issue 27, point 3): the status route's JSON says while Slurm's rate limit (or a
slow controller) stretches the server's polls, and how often it asks then; on recorded Slurm 22.05 output
(FakeRunner as the process-wide runner). How the poller gets into and out of such an episode, on recorded 24.11
and 26.05 timings: tests/unit/slurm/test_rate_limit.py."""

from __future__ import annotations

import json
from typing import Any

import pytest
from fake_slurm import OWNER_UID, cluster

from slurmlab.testing import FakeRunner


@pytest.fixture
def jp_server_config() -> dict[str, Any]:
    from traitlets.config import Config

    return Config(
        {
            "ServerApp": {"jpserver_extensions": {"slurmlab.server": True}},
            "SlurmlabServer": {"poll_interval": 20, "cluster_poll_interval": 60},
        }
    )


async def _status(jp_fetch: Any) -> Any:
    return json.loads((await jp_fetch("slurmlab", "api", "status")).body)


async def test_the_status_route_says_while_slurm_rate_limits_the_polls_and_how_often_they_come(
    fake_runner: FakeRunner, jp_fetch: Any, jp_serverapp: Any, monkeypatch: pytest.MonkeyPatch
) -> None:
    from slurmlab.slurm import identity

    monkeypatch.setattr(identity, "current_uid", lambda: OWNER_UID)
    cluster(fake_runner)
    poller = jp_serverapp.web_app.settings["slurmlab_poller"]
    assert (await _status(jp_fetch))["slow"] is None  # quick answers: nothing to say
    # two polls held back where the site's slurm.conf turns the limit on: the interval doubled twice
    for _ in range(2):
        poller.backoff.answered(9.0, site_limits=True)
    poller._put_status()  # what each poll does after taking in its time
    said = (await _status(jp_fetch))["slow"]
    # on 22.05 the own jobs come from the whole listing, every 60 s (own_listing_is_whole): 4 x 60
    assert said == "Slurm is rate-limiting this user's queries: updates come every 240 s"
    # the episode over (quick answers for the calm window): the line goes
    later = [poller.backoff.clock()]
    monkeypatch.setattr(poller.backoff, "clock", lambda: later[0])
    for _ in range(20):  # a quick poll every 20 s
        later[0] += 20
        poller.backoff.answered(0.05)
    assert not poller.backoff.in_episode  # 400 s of quick polls: past the server's calm window (100 s)
    poller._put_status()
    assert (await _status(jp_fetch))["slow"] is None
