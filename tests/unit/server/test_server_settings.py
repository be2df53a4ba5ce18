"""The site's settings of the server extension (issue 27): traits of ``SlurmlabServer`` in jupyter_server_config,
which win over a user's tornado setting or environment; the status answer names both cadences."""

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
            "ServerApp": {
                "jpserver_extensions": {"slurmlab.server": True},
                # a user's own setting: the site's trait below wins over it
                "tornado_settings": {"slurmlab_poll_interval": 2},
            },
            "SlurmlabServer": {"poll_interval": 30, "cluster_poll_interval": 90, "idle_after": 45},
        }
    )


async def test_the_sites_intervals_reach_the_poller_and_the_status(
    fake_runner: FakeRunner, jp_fetch: Any, jp_serverapp: Any, monkeypatch: pytest.MonkeyPatch
) -> None:
    from slurmlab.slurm import identity

    monkeypatch.setattr(identity, "current_uid", lambda: OWNER_UID)
    cluster(fake_runner)
    poller = jp_serverapp.web_app.settings["slurmlab_poller"]
    assert (poller.interval, poller.cluster_interval, poller.idle_after) == (30, 90, 45)
    status = json.loads((await jp_fetch("slurmlab", "api", "status")).body)
    assert status["poll_interval_s"] == 30 and status["cluster_poll_interval_s"] == 90


def test_a_bad_interval_says_where_to_set_it(monkeypatch: pytest.MonkeyPatch) -> None:
    from slurmlab.errors import SlurmlabError
    from slurmlab.server.extension import setting

    monkeypatch.setenv("SLURMLAB_CLUSTER_POLL_INTERVAL", "soon")
    with pytest.raises(SlurmlabError) as err:
        setting({}, "slurmlab_cluster_poll_interval", "SLURMLAB_CLUSTER_POLL_INTERVAL", 60)
    assert "c.SlurmlabServer.cluster_poll_interval" in (err.value.hint or "")


def test_each_intervals_help_says_what_it_polls_and_what_that_costs_the_controller() -> None:
    """Admins size the intervals by their cost to slurmctld (issue 27): the help an admin reads (``jupyter server
    --help-all``, docs/admin.md) names the commands each poll runs and their RPCs, and where the own listing is
    folded into the whole one (22.05) or no RPC is sent at all (the host's shared poll, an idle sidebar)."""
    import re

    from slurmlab.server.extension import SlurmlabServer
    from slurmlab.server.jobtracker import BRIEF_QUEUE_ARGV, my_queue_argv
    from slurmlab.server.nodetracker import NODE_BRIEF_ARGV

    traits = SlurmlabServer.class_traits(config=True)
    own, whole, idle = (
        traits[name].help for name in ("poll_interval", "cluster_poll_interval", "idle_after")
    )
    assert "squeue -u UID" in own and my_queue_argv(1000)[4] == "-u"  # what the own poll runs
    assert BRIEF_QUEUE_ARGV[0] in whole and " ".join(a for a in NODE_BRIEF_ARGV[:3] if a != "-h") in whole
    for help_text in (own, whole):
        assert re.search(r"\b\d+ RPCs\b", help_text), help_text
        assert "22.05" in help_text  # where a listing of one user's jobs costs a whole one
    assert "shared poll" in own
    assert re.search(r"\b0 RPCs\b", idle), idle
