"""What the sandbox adapts to the machine (cgroups, host name) and the hint each start-up failure gets."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from slurmlab.sandbox import Sandbox
from slurmlab.sandbox.machine import (
    MachineFacts,
    cgroup_kind,
    explain_failure,
    host_address,
    sandbox_settings,
)
from slurmlab.sandbox.profile import load_profile
from slurmlab.sandbox.render import RenderContext, render_cgroup_conf, render_slurm_conf

HYBRID = """cgroup /sys/fs/cgroup tmpfs rw 0 0
cgroup /sys/fs/cgroup/memory cgroup rw,memory 0 0
cgroup2 /sys/fs/cgroup/unified cgroup2 rw 0 0
"""
UNIFIED = "cgroup2 /sys/fs/cgroup cgroup2 rw,nsdelegate 0 0\n"
V1_MEMBER = "4:memory:/x\n0::/\n"


@pytest.mark.parametrize(
    ("mounts", "member", "systemd", "kind"),
    [
        (HYBRID, V1_MEMBER, True, "v1"),
        (UNIFIED, "0::/user.slice\n", True, "v2"),
        (UNIFIED, "0::/\n", False, "v2-bare"),
        (UNIFIED, V1_MEMBER, True, "hybrid-v2"),  # what Slurm refuses: "Hybrid mode is not supported"
        ("proc /proc proc rw 0 0\n", "0::/\n", True, "none"),
        ("tmpfs /sys/fs/cgroup tmpfs rw 0 0\n", "", True, "none"),  # an empty tmpfs holds no hierarchy
        (HYBRID + UNIFIED, "0::/\n", True, "v2"),  # the last mount on the path is the one in effect
    ],
)
def test_cgroup_kind(mounts: str, member: str, systemd: bool, kind: str) -> None:
    assert cgroup_kind(mounts, member, systemd) == kind


@pytest.mark.parametrize("kind", ["none", "hybrid-v2", "v2-bare", "refused"])
def test_unusable_cgroups_are_disabled_from_23_11_and_said(kind: str) -> None:
    settings = sandbox_settings(MachineFacts("vm", "127.0.0.1", kind), (24, 11))
    assert settings.cgroup_plugin == "disabled"
    assert len(settings.notes) == 1 and "CgroupPlugin=disabled" in settings.notes[0]
    # 22.05 loads no cgroup plugin with linuxproc/affinity, and knows no "disabled": nothing changes there
    old = sandbox_settings(MachineFacts("vm", "127.0.0.1", kind), (22, 5))
    assert old.cgroup_plugin is None and old.notes == ()


@pytest.mark.parametrize("kind", ["v1", "v2"])
def test_usable_cgroups_keep_slurms_default(kind: str) -> None:
    settings = sandbox_settings(MachineFacts("vm", "127.0.0.1", kind), (26, 5))
    assert settings.cgroup_plugin is None and settings.notes == () and settings.bind_address == "127.0.0.1"


def _ctx(**kw: object) -> RenderContext:
    kw = {"node_ports": (7001,), **kw}
    return RenderContext(
        directory="/srv/sb",
        hostname="vm",
        user="root",
        ctld_port=6817,
        munge_socket="/srv/sb/munge/munged.sock",
        version=(24, 11),
        **kw,
    )  # type: ignore[arg-type]


def test_unresolvable_host_name_drops_binding_by_name_but_keeps_loopback_addresses() -> None:
    settings = sandbox_settings(MachineFacts("nowhere", None, "v1"), (24, 11))
    assert settings.bind_address is None and "'nowhere' does not resolve" in settings.notes[0]
    profile = load_profile("seed").scaled(1)
    conf = render_slurm_conf(profile, _ctx(bind_address=None))
    assert "InAddrAny" not in conf  # both daemons would look the host name up to bind it
    assert "SlurmctldHost=vm(127.0.0.1)" in conf and "NodeAddr=127.0.0.1" in conf
    assert "CommunicationParameters=NoCtldInAddrAny,NoInAddrAny" in render_slurm_conf(profile, _ctx())


def test_a_host_name_on_another_loopback_address_is_bound_and_named_everywhere() -> None:
    """Debian's /etc/hosts names the machine on 127.0.1.1: binding by name binds there, so every file names it
    (slurm.conf said 127.0.0.1, where nothing listened, and the sandbox did not start)."""
    settings = sandbox_settings(MachineFacts("vm", "127.0.1.1", "v1"), (22, 5))
    assert settings.bind_address == "127.0.1.1" and "resolves to 127.0.1.1" in settings.notes[0]
    conf = render_slurm_conf(
        load_profile("seed").scaled(2), _ctx(bind_address="127.0.1.1", node_ports=(7001, 7002))
    )
    assert "CommunicationParameters=NoCtldInAddrAny,NoInAddrAny" in conf
    assert "SlurmctldHost=vm(127.0.1.1)" in conf and conf.count("NodeAddr=127.0.1.1 ") == 2
    assert "127.0.0.1" not in conf


def test_a_host_name_on_a_network_address_is_not_bound_by_name() -> None:
    """Binding by name would put the daemons on the network address, where slurm.conf does not call them: they
    listen on every address instead, and the note says so and how to keep them on loopback."""
    settings = sandbox_settings(MachineFacts("vm", "10.1.2.3", "v1"), (24, 11))
    assert settings.bind_address is None
    assert "resolves to 10.1.2.3, not to a loopback address" in settings.notes[0]
    assert (
        "listen on every address" in settings.notes[0] and "127.0.0.1 line of /etc/hosts" in settings.notes[0]
    )


def test_host_address_is_the_first_ipv4_answer_as_slurm_asks() -> None:
    assert host_address("127.0.1.1") == "127.0.1.1" and host_address("localhost") == "127.0.0.1"
    assert host_address("name-that-does-not-exist.invalid") is None


def test_cgroup_conf_only_where_needed() -> None:
    assert render_cgroup_conf(_ctx()) is None
    assert "CgroupPlugin=disabled\n" in (render_cgroup_conf(_ctx(cgroup_plugin="disabled")) or "")


LOGS = {
    "cgroup": (
        "slurmd: error: No filesystem mounted on /sys/fs/cgroup\nslurmd: error: Unable to initialize cgroup "
        "plugin\nslurmd: error: slurmd initialization failed\n",
        "SLURMLAB_SANDBOX_CGROUP=disabled",
    ),
    "hybrid": (
        "fatal: Hybrid mode is not supported. Mounted cgroups are: 4:memory:/\n",
        "SLURMLAB_SANDBOX_CGROUP=disabled",
    ),
    "host": (
        'error: slurm_set_addr: Unable to resolve "vm"\nfatal: _open_ports: Unable to listen to file '
        "descriptors.\n",
        "/etc/hosts",
    ),
    "port": ("error: Error binding slurm stream socket: Address already in use\n", "--port"),
}


@pytest.mark.parametrize("case", LOGS)
def test_each_start_failure_gets_the_hint_of_its_cause(case: str, tmp_path: Path) -> None:
    log, step = LOGS[case]
    assert explain_failure(log) is not None
    (tmp_path / "log").mkdir()
    (tmp_path / "log" / "slurmd-node1.log").write_text("[t] started\n" + log)
    sb = Sandbox(tmp_path, json.loads('{"profile": "seed", "pids": {}, "conf_path": "/x/slurm.conf"}'))
    err = sb._failure("slurmd:node1 exited at once (exit code 1)", "slurmd:node1")
    assert step in err.hint and "apt-get install" not in err.hint, err.hint
    assert log.splitlines()[0] in err.message  # the daemon's own words are shown


def test_an_unknown_failure_points_at_the_logs_only(tmp_path: Path) -> None:
    (tmp_path / "log").mkdir()
    (tmp_path / "log" / "slurmctld.log").write_text("fatal: something new\n")
    err = Sandbox(tmp_path, {"profile": "seed", "pids": {}, "conf_path": "/x"})._failure(
        "it died", "slurmctld"
    )
    assert explain_failure("fatal: something new") is None
    assert "something new" in err.message and str(tmp_path / "log") in err.hint and "apt-get" not in err.hint
