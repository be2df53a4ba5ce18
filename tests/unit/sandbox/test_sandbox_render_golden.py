"""Rendering of slurm.conf/gres.conf for every profile x {22.05, 24.11, 26.05}, against golden files.

Regenerate the golden files after an intended change with SLURMLAB_UPDATE_GOLDEN=1.
"""

from __future__ import annotations

import os
from pathlib import Path

import pytest
from fake_slurm import golden_path, golden_with

from slurmlab.sandbox.profile import expand_ranges, list_profiles, load_profile
from slurmlab.sandbox.render import RenderContext, render_gres_conf, render_slurm_conf

GOLDEN = Path(__file__).resolve().parents[2] / "golden" / "sandbox"
VERSIONS = {"22.05": (22, 5), "24.11": (24, 11), "26.05": (26, 5)}


def context(nodes: int, version: tuple[int, int], *, root: bool = True) -> RenderContext:
    return RenderContext(
        directory="/srv/sandbox",
        hostname="vm",
        user="root" if root else "alice",
        ctld_port=6817,
        node_ports=tuple(7001 + i for i in range(nodes)),
        munge_socket="/srv/sandbox/munge/munged.sock",
        version=version,
        device_dir="/srv/sandbox/dev" if root else None,
    )


@pytest.mark.parametrize("version", VERSIONS)
@pytest.mark.parametrize("name", list_profiles())
def test_rendering_matches_golden(name: str, version: str) -> None:
    profile = load_profile(name)
    ctx = context(profile.nodes, VERSIONS[version])
    for kind, text in (
        ("slurm.conf", render_slurm_conf(profile, ctx)),
        ("gres.conf", render_gres_conf(profile, ctx)),
    ):
        path = GOLDEN / f"{name}-{version}.{kind}"
        if os.environ.get("SLURMLAB_UPDATE_GOLDEN"):
            path.parent.mkdir(parents=True, exist_ok=True)
            path.write_text(text)
        assert path.exists(), f"golden file {path} missing: run with SLURMLAB_UPDATE_GOLDEN=1"
        assert text == path.read_text(), f"{path.name} differs from the rendering"


def _gres_cores(text: str) -> list[tuple[int, ...]]:
    out = []
    for line in text.splitlines():
        fields = dict(f.split("=", 1) for f in line.split() if "=" in f)
        if fields.get("Name") == "gpu":
            out.append(expand_ranges(fields["Cores"]))
    return out


@pytest.mark.parametrize("name", list_profiles())
def test_24_11_cores_follow_socket_boundaries(name: str) -> None:
    profile = load_profile(name)
    per = profile.cpu.cores_per_socket
    for cores in _gres_cores(render_gres_conf(profile, context(profile.nodes, (24, 11)))):
        sockets = {c // per for c in cores}
        assert set(cores) == {c for s in sockets for c in range(s * per, (s + 1) * per)}, cores


def test_22_05_keeps_the_exact_cores_of_the_seed() -> None:
    profile = load_profile("seed")
    cores = _gres_cores(render_gres_conf(profile, context(profile.nodes, (22, 5))))
    assert cores == [tuple(range(12 * i, 12 * i + 12)) for i in range(4)]
    widened = _gres_cores(render_gres_conf(profile, context(profile.nodes, (24, 11))))
    assert widened == [tuple(range(0, 24))] * 2 + [tuple(range(24, 48))] * 2


def test_seed_renders_the_origin_cluster() -> None:
    profile = load_profile("seed")
    conf = render_slurm_conf(profile, context(profile.nodes, (22, 5)))
    assert "GresTypes=gpu\n" in conf
    assert "PartitionName=debug Nodes=node[1-4] Default=YES" in conf
    node_lines = [line for line in conf.splitlines() if line.startswith("NodeName=")]
    assert [line.split()[0] for line in node_lines] == [f"NodeName=node{i}" for i in range(1, 5)]
    assert all(" CPUs=48 " in line and " Gres=gpu:4 " in line for line in node_lines)


def test_everything_listens_on_loopback_only() -> None:
    profile = load_profile("dgx-h100")
    conf = render_slurm_conf(profile, context(profile.nodes, (22, 5)))
    assert "SlurmctldHost=vm(127.0.0.1)" in conf
    assert "CommunicationParameters=NoCtldInAddrAny,NoInAddrAny" in conf
    assert all("NodeAddr=127.0.0.1" in line for line in conf.splitlines() if line.startswith("NodeName="))


def test_unprivileged_rendering_uses_tty_devices_and_the_user() -> None:
    profile = load_profile("h200-mig")
    ctx = context(profile.nodes, (22, 5), root=False)
    gres = render_gres_conf(profile, ctx)
    files = [f.split("=", 1)[1] for line in gres.splitlines() for f in line.split() if f.startswith("File=")]
    assert files == [f"/dev/tty{i}" for i in range(4, 8)] + [f"/dev/tty{i}" for i in range(8, 8 + 16)]
    conf = render_slurm_conf(profile, ctx)
    assert "SlurmUser=alice\n" in conf and "SlurmdUser=alice\n" in conf
    assert "AuthInfo=socket=/srv/sandbox/munge/munged.sock" in conf


def test_mig_profile_offers_each_instance_type_in_its_partition() -> None:
    profile = load_profile("h200-mig")
    conf = render_slurm_conf(profile, context(1, (22, 5)))
    node = next(line for line in conf.splitlines() if line.startswith("NodeName="))
    gres = dict(item.rsplit(":", 1) for item in node.split("Gres=")[1].split()[0].split(","))
    assert gres == {
        "gpu:h200": "4",
        "gpu:1g.18gb": "9",
        "gpu:3g.71gb": "2",
        "gpu:4g.71gb": "1",
        "gpu:2g.35gb": "3",
        "gpu:1g.35gb": "1",
    }
    assert "PartitionName=mig Nodes=node1 Default=YES" in conf
    assert "Links=" not in render_gres_conf(profile, context(1, (22, 5)))


def test_scaling_the_node_count() -> None:
    profile = load_profile("dgx-h100").scaled(3)
    conf = render_slurm_conf(profile, context(3, (22, 5)))
    assert "PartitionName=gpu Nodes=node[1-3] Default=YES" in conf
    assert "NodeName=node[1-3] Name=shard Type=h100 Count=32" in render_gres_conf(
        profile, context(3, (22, 5))
    )


SETTINGS = (
    "AuthType",
    "CredType",
    "ProctrackType",
    "TaskPlugin",
    "SelectType",
    "SelectTypeParameters",
    "GresTypes",
    "SlurmdParameters",
    "DefMemPerCPU",
    "ReturnToService",
)


@pytest.mark.parametrize("version", golden_with("s12b_scontrol_show_config.txt"))
def test_settings_are_what_the_recorded_slurm_ran_with(version: str) -> None:
    """The rendered dgx-h100 slurm.conf against `scontrol show config` of the sandbox the golden files were
    recorded in (Slurm prints some values in its own case: CR_CORE_MEMORY for CR_Core_Memory)."""
    running = {}
    for line in golden_path(version, "s12b_scontrol_show_config.txt").read_text().splitlines():
        key, sep, value = line.partition(" = ")
        if sep:
            running[key.strip()] = value.strip()
    profile = load_profile("dgx-h100")
    ours = render_slurm_conf(profile, context(profile.nodes, VERSIONS[version]))
    our_settings = dict(line.split("=", 1) for line in ours.splitlines() if "=" in line and " " not in line)
    for key in SETTINGS:
        assert our_settings[key].lower() == running[key].lower(), key


def test_settings_match_the_recorded_reference_cluster() -> None:
    """Extra: the shared capture's cluster, which the sandbox's settings were first taken from."""
    from shared_paths import require_shared

    ref = require_shared("slurm", "22.05", "slurm.conf").read_text()
    ref_settings = dict(line.split("=", 1) for line in ref.splitlines() if "=" in line and " " not in line)
    profile = load_profile("dgx-h100")
    ours = render_slurm_conf(profile, context(profile.nodes, (22, 5)))
    our_settings = dict(line.split("=", 1) for line in ours.splitlines() if "=" in line and " " not in line)
    for key in SETTINGS:
        assert our_settings[key] == ref_settings[key], key
