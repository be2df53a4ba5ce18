"""The catalogue figure (what can still be carved) and the model and room on the MIG layout figure."""

from __future__ import annotations

import pytest
from figure_data import renderer_data as data
from shared_paths import smi_capture as read

pytest.importorskip("bokeh", reason="the viz extra (bokeh) is not installed")

from slurmlab.core.gpu.captures import read_mig_capture
from slurmlab.core.gpu.mig import MigLayout
from slurmlab.core.gpu.smi import parse_mig_cgi_log, parse_smi_list
from slurmlab.viz.mig_view import mig_catalogue_figure, mig_figure


def test_lgip_catalogue_boxes_are_the_printed_counts() -> None:
    capture = read_mig_capture(read("mig-lgip-a100-80gb-partially-used.txt"), "lgip")
    cat = capture.catalogue()
    assert cat is not None and cat.source == "-lgip"
    counts = data(mig_catalogue_figure(cat), "counts")
    per = {(p, s): 0 for p in {r.name for r in capture.profiles} for s in ("free", "taken")}
    for p, s in zip(counts["profile"], counts["state"], strict=True):
        per[(p, s)] += 1
    for r in capture.profiles:
        assert (per[(r.name, "free")], per[(r.name, "free")] + per[(r.name, "taken")]) == (r.free, r.total)
    # -lgip gives counts only; these counts leave one layout (a 3g.40gb at 4:4), so the free placements follow
    d = data(mig_catalogue_figure(cat), "placements")
    free = {
        (p, pl) for p, pl, st in zip(d["profile"], d["placement"], d["state"], strict=True) if st == "free"
    }
    assert free == (
        {("1g.10gb", f"{s}:1") for s in range(4)}
        | {("1g.10gb+me", f"{s}:1") for s in range(4)}
        | {("2g.20gb", "0:2"), ("2g.20gb", "2:2"), ("3g.40gb", "0:4")}
    )
    assert "unknown" not in d["state"]


def test_lgip_counts_that_fit_several_layouts_leave_placements_unknown() -> None:
    # one 1g.10gb used at 4:1 or at 5:1 leaves the same counts (6/7 1g, 2/3 2g, 1/2 3g, 1/1 4g): where the 1g
    # sits the counts do not say, so its free starts stay unknown, while every 2g start is the same in both
    text = read("mig-lgip-a100-80gb-partially-used.txt")
    edited = text.replace("4/7", "6/7").replace("0/1        39.50", "1/1        39.50")
    assert edited.count("6/7") == 1 and edited.count("1/1        39.50") == 1
    cat = read_mig_capture(edited, "lgip").catalogue()
    assert cat is not None
    starts = {r.profile: r.free_starts for r in cat.rows}
    assert starts["1g.10gb"] is None and starts["2g.20gb"] == (0, 2) and starts["4g.40gb"] == (0,)
    d = data(mig_catalogue_figure(cat), "placements")
    assert {st for p, st in zip(d["profile"], d["state"], strict=True) if p == "1g.10gb"} == {"unknown"}


def test_lgipp_catalogue_shows_every_allowed_placement() -> None:
    capture = read_mig_capture(read("mig-lgipp-a30-24gb.txt"), "lgipp")
    cat = capture.catalogue()
    assert cat is not None and cat.memory_slices == 4 and cat.model == "A30-24GB"
    d = data(mig_catalogue_figure(cat), "placements")
    got = sorted(zip(d["profile"], d["placement"], strict=True))
    assert got == sorted(
        [("1g.6gb", f"{s}:1") for s in range(4)]
        + [("1g.6gb+me", f"{s}:1") for s in range(4)]
        + [("2g.12gb", "0:2"), ("2g.12gb", "2:2"), ("4g.24gb", "0:4")]
    )
    # a 7x8 -lgipp names no GPU: the rows are named by shape, and the figure says the names need the model
    h100 = read_mig_capture(read("mig-lgipp-h100-pcie-80gb-drv525.txt"), "lgipp").catalogue()
    assert h100 is not None and h100.model is None
    assert [r.profile for r in h100.rows][:3] == [
        "1g (1 memory slice)",
        "1g+me (1 memory slice)",
        "1g (2 memory slices)",
    ]
    named = read_mig_capture(
        read("mig-lgipp-h100-pcie-80gb-drv525.txt"), "lgipp", model="H100-80GB"
    ).catalogue()
    assert named is not None and [r.profile for r in named.rows][0] == "1g.10gb"


def test_layout_catalogue_marks_free_and_taken_placements() -> None:
    layout = parse_mig_cgi_log(read("mig-cgi-C-h100-pcie-create-log.txt"), gpu_model="H100-80GB")
    cat = layout.catalogue()
    assert cat is not None
    d = data(mig_catalogue_figure(cat), "placements")
    free = sorted(
        (p, pl) for p, pl, s in zip(d["profile"], d["placement"], d["state"], strict=True) if s == "free"
    )
    assert free == [("1g.10gb", "0:1"), ("1g.10gb+me", "0:1")]


def test_layout_title_names_the_model_the_input_names() -> None:
    _, listed = parse_smi_list(read("smi-L-h100-80gb-hbm3-ci-uuids-r570-migguide.txt"))
    assert listed is not None
    assert mig_figure(listed).title.text == "MIG layout — NVIDIA H100 80GB HBM3"
    unnamed = parse_mig_cgi_log(read("mig-cgi-C-h100-pcie-create-log.txt"))
    assert mig_figure(unnamed).title.text == "MIG layout — A100-80GB or H100-80GB"
    fig = mig_figure(MigLayout.from_spec("H200-141GB", {0: ["3g.71gb"]}))
    assert fig.title.text == "MIG layout — H200-141GB"
    room = " ".join(data(fig, "room")["text"])
    assert "room for up to 4x 1g.18gb" in room and "1x 3g.71gb" in room
