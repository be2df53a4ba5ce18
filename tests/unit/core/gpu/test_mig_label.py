"""A MIG slice has one name everywhere: the text summaries, the figure, the topology's notes and the CLI."""

from __future__ import annotations

import pytest
from shared_paths import require_shared

from slurmlab.core.gpu.hardware_profile import SandboxHardware
from slurmlab.core.gpu.mig import MigLayout, mig_slice_label
from slurmlab.core.gpu.node_models import NodeMig
from slurmlab.core.gpu.smi import parse_mig_lgi, parse_smi_list
from slurmlab.slurm.hardware_files import profile_data


def test_the_label_names_gpu_profile_placement_and_the_gi_where_known() -> None:
    assert mig_slice_label(0, "3g.71gb", 4, 4) == "GPU 0 · 3g.71gb @ 4:4"
    assert mig_slice_label(2, "1g.5gb", 6, 1, gi_id=13) == "GPU 2 · 1g.5gb @ 6:1 · GI 13"
    assert mig_slice_label(1, "2g.10gb", None, None) == "GPU 1 · 2g.10gb @ ?"


def test_every_source_names_the_same_slice_the_same_way() -> None:
    lgi = parse_mig_lgi(
        require_shared("nvidia-smi", "mig-lgi-a100-40gb-3-2-1-1-migguide-r450fmt.txt").read_text()
    )
    (inst,) = [i for i in lgi.instances() if i.profile == "3g.20gb"]
    assert inst.label == "GPU 0 · 3g.20gb @ 4:4 · GI 2"
    assert "  GPU 0 · 3g.20gb @ 4:4 · GI 2" in lgi.summary().splitlines()
    spec = MigLayout.from_spec("A100-40GB", {0: ["3g.20gb", "2g.10gb", "1g.5gb", "1g.5gb"]})
    # the same slice from a layout built without GI ids: the same name, less the GI
    assert "GPU 0 · 3g.20gb @ 4:4" in [i.label for i in spec.instances()]
    _, listed = parse_smi_list(
        require_shared("nvidia-smi", "smi-L-h100-80gb-hbm3-ci-uuids-r570-migguide.txt").read_text()
    )
    assert listed is not None
    assert all(
        line.endswith("(placement inferred)") for line in listed.summary().splitlines() if " @ " in line
    )


def test_the_allocations_slices_and_the_topology_note_use_the_name() -> None:
    data = profile_data("h200-mig")
    # Slurm IDX: whole H200s 0-3, 9 x 1g.18gb 4-12, then the 3g.71gb slices 13-14
    mig = data["mig"]
    assert isinstance(mig, list)
    pos = next(i for i, m in enumerate(mig) if m["profile"] == "3g.71gb" and m["start"] == 4)
    hw = SandboxHardware(data, ("node1",), ((1, pos),), "/tmp/sb")
    nm = hw.node_mig("node1", (0,))
    assert nm.slices()[0].label == "GPU 1 · 3g.71gb @ 4:4"
    assert "this allocation's slices: GPU 1 · 3g.71gb @ 4:4" in nm.summary()
    assert hw.node_topology("node1", (0,)).notes == ("Slurm IDX 0 is the MIG slice GPU 1 · 3g.71gb @ 4:4",)
    # a key that names no instance is still shown, never dropped
    odd = NodeMig(nm.layout, "file", "x", highlight=("MIG-unknown",))
    assert "this allocation's slices: MIG-unknown" in odd.summary()


def test_the_mig_cli_prints_the_name(capsys: pytest.CaptureFixture[str]) -> None:
    from slurmlab.cli import main

    assert main(["mig", "--profile", "h200-mig"]) == 0
    out = capsys.readouterr().out
    assert "  GPU 1 · 3g.71gb @ 4:4" in out.splitlines() and "GPU 3 · 1g.35gb @ 4:2" in out


def test_the_mig_cli_names_listed_devices_by_their_slice(capsys: pytest.CaptureFixture[str]) -> None:
    from slurmlab.cli import main

    path = require_shared("nvidia-smi", "smi-L-h100-80gb-hbm3-ci-uuids-r570-migguide.txt")
    assert main(["mig", str(path)]) == 0
    lines = capsys.readouterr().out.splitlines()
    # nvidia-smi's "MIG 1c.3g.40gb Device 1" is the slice GPU 0 · 3g.40gb @ 4:4 (placement inferred from -L)
    assert (
        "    GPU 0 · 3g.40gb @ 4:4 — -L device 1 (1c.3g.40gb): MIG-405bbda1-6b05-535f-9702-f95e8cd170ce"
        in lines
    )
    assert "  GPU 0 · 3g.40gb @ 4:4 (placement inferred)" in lines
