"""The MIG figure's blocks."""

from __future__ import annotations

from typing import Any

import pytest
from figure_data import renderer_data as data
from shared_paths import require_shared

pytest.importorskip("bokeh", reason="the viz extra (bokeh) is not installed")

from slurmlab.core.gpu.mig import MigLayout
from slurmlab.core.gpu.smi import parse_mig_lgi, parse_smi_list
from slurmlab.viz.mig_view import mig_figure


def blocks(fig: Any, part: str) -> list[tuple[Any, ...]]:
    d = data(fig, "instances")
    return sorted(
        (g, p, round(x - w / 2), round(w))
        for g, p, x, w, pt in zip(d["gpu"], d["profile"], d["x"], d["w"], d["part"], strict=True)
        if pt == part
    )


def test_mig_blocks_follow_placements() -> None:
    lay = parse_mig_lgi(
        require_shared("nvidia-smi", "mig-lgi-a100-40gb-3-2-1-1-migguide-r450fmt.txt").read_text()
    )
    fig = mig_figure(lay, highlight=[(0, 2)])
    assert blocks(fig, "memory") == [
        (0, "1g.5gb", 0, 1),
        (0, "1g.5gb", 1, 1),
        (0, "2g.10gb", 2, 2),
        (0, "3g.20gb", 4, 4),
    ]
    # compute: 3g at memory 4:4 takes compute slices 4-6
    assert (0, "3g.20gb", 4, 3) in blocks(fig, "compute")
    d = data(fig, "instances")
    hot = {(g, p) for g, p, h in zip(d["gpu"], d["profile"], d["highlighted"], strict=True) if h}
    assert hot == {(0, "3g.20gb")}  # GI 2
    slots = data(fig, "slots")
    assert slots["kind"].count("compute") == 7 and slots["kind"].count("memory") == 8
    assert "GI 2" in " ".join(data(fig, "labels")["text"])


def test_h200_spec_and_inferred_listing() -> None:
    lay = MigLayout.from_spec(
        "H200-141GB", {0: ["3g.71gb", "2g.35gb", "1g.18gb", "1g.18gb"], 1: ["7g.141gb"]}
    )
    fig = mig_figure(lay, highlight=["7g.141gb", (0, "2:2")])
    assert (1, "7g.141gb", 0, 8) in blocks(fig, "memory") and (1, "7g.141gb", 0, 7) in blocks(fig, "compute")
    assert "H200-141GB" in fig.title.text
    d = data(fig, "instances")
    assert sorted(
        {(g, p) for g, p, h in zip(d["gpu"], d["profile"], d["highlighted"], strict=True) if h}
    ) == [(0, "2g.35gb"), (1, "7g.141gb")]
    _, listed = parse_smi_list(
        require_shared("nvidia-smi", "smi-L-h100-80gb-hbm3-ci-uuids-r570-migguide.txt").read_text()
    )
    assert listed is not None
    d = data(mig_figure(listed, highlight=["MIG-405bbda1-6b05-535f-9702-f95e8cd170ce"]), "instances")
    assert set(d["hatch"]) == {"/"} and all(d["inferred"])
    hot = {p for p, h in zip(d["profile"], d["highlighted"], strict=True) if h}
    assert hot == {"3g.40gb"}  # the CI's UUID marks its GPU instance
    assert any("CI ? 1c.3g.40gb MIG-c788539f" in c for c in d["cis"])
