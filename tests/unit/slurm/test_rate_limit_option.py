"""The sandbox's rate-limit option (issue 27, point 3): slurm.conf gets slurmctld's per-user RPC limit only where
Slurm has one (23.02 on), and a 22.05 sandbox refuses it with the reason instead of a slurmctld that will not
start. Rendering is pure: no Slurm runs here."""

from __future__ import annotations

import pytest

from slurmlab.errors import SandboxError
from slurmlab.sandbox import RateLimit, Sandbox, accounting_daemons
from slurmlab.sandbox import control as sandbox_control
from slurmlab.sandbox.profile import load_profile
from slurmlab.sandbox.render import RenderContext, render_slurm_conf


def _ctx(version: tuple[int, int], rate_limit: RateLimit | None) -> RenderContext:
    return RenderContext(
        directory="/srv/sb",
        hostname="vm",
        user="root",
        ctld_port=6817,
        node_ports=(7001,),
        munge_socket="/srv/sb/munge/munged.sock",
        version=version,
        rate_limit=rate_limit,
    )


def _lines(conf: str, key: str) -> list[str]:
    return [line for line in conf.splitlines() if line.startswith(f"{key}=")]


def test_the_limit_goes_into_slurm_conf_on_24_11_and_26_05() -> None:
    profile = load_profile("seed").scaled(1)
    for version in ((24, 11), (26, 5)):
        conf = render_slurm_conf(profile, _ctx(version, RateLimit(bucket_size=3, refill_rate=1)))
        assert _lines(conf, "SlurmctldParameters") == [
            "SlurmctldParameters=rl_enable,rl_bucket_size=3,rl_refill_rate=1,rl_refill_period=1,rl_log_freq=0"
        ]
        assert _lines(render_slurm_conf(profile, _ctx(version, None)), "SlurmctldParameters") == []


def test_22_05_has_no_rate_limit_and_says_so() -> None:
    profile = load_profile("seed").scaled(1)
    with pytest.raises(ValueError, match="came with 23.02"):
        render_slurm_conf(profile, _ctx((22, 5), RateLimit()))


def test_a_22_05_sandbox_refuses_the_option_before_starting_anything(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(sandbox_control, "daemon", lambda name: f"/usr/sbin/{name}")
    monkeypatch.setattr(sandbox_control, "client", lambda name: None)
    monkeypatch.setattr(sandbox_control, "detect_release", lambda exe: "22.05.8")
    monkeypatch.setattr(sandbox_control, "detect_version", lambda exe: (22, 5))
    monkeypatch.setattr(accounting_daemons, "resolve", lambda accounting: (False, {}))
    monkeypatch.setattr(
        sandbox_control, "make_folders", lambda *a: pytest.fail("made folders for a refused option")
    )
    with pytest.raises(SandboxError, match="no RPC rate limit") as caught:
        Sandbox.up("seed", directory="/nonexistent/rl-sandbox", rate_limit=RateLimit())
    assert "23.02" in caught.value.message and caught.value.hint


@pytest.mark.parametrize("field", ["bucket_size", "refill_rate", "refill_period"])
@pytest.mark.parametrize("value", [0, -1, True, 1.5])
def test_a_limit_is_whole_numbers_of_at_least_one(field: str, value: object) -> None:
    with pytest.raises(ValueError, match=field):
        RateLimit(**{field: value})  # type: ignore[arg-type]
