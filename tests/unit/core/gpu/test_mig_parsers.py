"""MIG captures (-lgip, -lgipp, -lgi, -lci, -cgi log, -L) and the profile tables they must agree with."""

from __future__ import annotations

import warnings

import pytest
from shared_paths import smi_capture as read

from slurmlab.core.gpu.mig import MIG_PROFILE_TABLES, MigLayout, parse_profile_name, table_for_model
from slurmlab.core.gpu.smi import (
    SmiParseWarning,
    parse_mig_cgi_log,
    parse_mig_devices,
    parse_mig_lci,
    parse_mig_lgi,
    parse_mig_lgip,
    parse_mig_lgipp,
    parse_smi_list,
    sniff,
)
from slurmlab.errors import ParseError, RequestError


def test_lgip_multi_gpu_h100_sxm5() -> None:
    rows = parse_mig_lgip(read("mig-lgip-4x-h100-sxm5-80gb-multi-gpu.txt"))
    assert len(rows) == 28 and sorted({r.gpu for r in rows}) == [0, 1, 2, 3]
    by = {r.name: r for r in rows if r.gpu == 2}
    assert (by["1g.10gb"].profile_id, by["1g.10gb"].total, by["1g.10gb"].sm) == (19, 7, 16)
    assert (by["7g.80gb"].memory_gib, by["7g.80gb"].sm, by["7g.80gb"].ce, by["7g.80gb"].ofa) == (
        79.25,
        132,
        8,
        1,
    )
    assert by["1g.10gb+me"].ofa == 1 and by["3g.40gb"].jpeg == 3 and not by["3g.40gb"].p2p
    # the ids match the H100-80GB profile table
    table = MIG_PROFILE_TABLES["H100-80GB"]
    assert all(table.profile(r.name).profile_id == r.profile_id for r in rows)


def test_lgip_free_counts_and_a30_and_nvl() -> None:
    used = {r.name: (r.free, r.total) for r in parse_mig_lgip(read("mig-lgip-a100-80gb-partially-used.txt"))}
    assert used == {
        "1g.10gb": (4, 7),
        "1g.10gb+me": (1, 1),
        "2g.20gb": (2, 3),
        "3g.40gb": (1, 2),
        "4g.40gb": (0, 1),
        "7g.80gb": (0, 1),
    }
    a30 = parse_mig_lgip(read("mig-lgip-a30-24gb-all-used.txt"))
    assert [(r.name, r.profile_id, r.free) for r in a30] == [
        ("1g.6gb", 14, 0),
        ("1g.6gb+me", 21, 0),
        ("2g.12gb", 5, 0),
        ("4g.24gb", 0, 0),
    ]
    nvl = parse_mig_lgip(read("mig-lgip-h100-nvl-94gb-all-used.txt"))
    assert [r.memory_gib for r in nvl] == [10.62, 10.62, 21.50, 21.50, 46.12, 46.12, 92.62]
    pcie = parse_mig_lgip(read("mig-lgip-a100-pcie-40gb.txt"))
    assert [r.profile_id for r in pcie] == [19, 20, 15, 14, 9, 5, 0]


def test_lgip_partial_captures() -> None:
    gh = parse_mig_lgip(read("mig-lgip-gh200-144gb-PARTIAL.txt"))
    assert [r.name for r in gh] == ["1g.18gb", "1g.18gb+me", "1g.36gb", "2g.36gb"]
    with pytest.warns(SmiParseWarning, match="mid-table"):
        h200 = parse_mig_lgip(read("mig-lgip-h200-141gb-gpu6-PARTIAL.txt"))
    assert {r.gpu for r in h200} == {6}
    assert [(r.name, r.memory_gib, r.sm) for r in h200][-1] == ("4g.71gb", 69.50, 64)
    assert {r.name for r in h200} <= {p.name for p in MIG_PROFILE_TABLES["H200-141GB"].profiles}


@pytest.mark.parametrize("name", ["mig-lgipp-a100-40gb-migguide.txt", "mig-lgipp-h100-pcie-80gb-drv525.txt"])
def test_lgipp_placements_match_the_tables(name: str) -> None:
    placements = parse_mig_lgipp(read(name))[0]
    assert placements[9] == ((0, 4), 4) and placements[0] == ((0,), 8) and placements[15] == ((0, 2, 4, 6), 2)
    table = table_for_model("A100-40GB" if "a100" in name else "H100-80GB")
    assert table is not None
    for pid, (starts, size) in placements.items():
        prof = table.by_id(pid)
        assert prof is not None and (prof.starts, prof.memory_slices) == (starts, size)


def test_lgipp_a30() -> None:
    placements = parse_mig_lgipp(read("mig-lgipp-a30-24gb.txt"))[0]
    table = MIG_PROFILE_TABLES["A30-24GB"]
    for pid, (starts, size) in placements.items():
        prof = table.by_id(pid)
        assert prof is not None and (prof.starts, prof.memory_slices) == (starts, size)


@pytest.mark.parametrize("inside", ["0,\t", "\t0", "0,\t2 ,4\t", "\t0 ,\t 2,4,\t"])
def test_lgipp_whitespace_inside_the_braces(inside: str) -> None:
    got = parse_mig_lgipp(f"GPU 0 Profile ID 14 Placements: {{{inside}}}:2\n")
    assert got == {0: {14: (tuple(int(x) for x in inside.replace(",", " ").split()), 2)}}


@pytest.mark.parametrize("inside", ["0 2", "\t", "0,x"])
def test_lgipp_bad_braces_are_a_parse_error(inside: str) -> None:
    with pytest.raises(ParseError):
        parse_mig_lgipp(f"GPU 0 Profile ID 14 Placements: {{{inside}}}:2\n")


def test_lgi_instances_and_placements() -> None:
    lay = parse_mig_lgi(read("mig-lgi-a100-40gb-2-1-1-1-1-1-migguide-r450fmt.txt"))
    g0 = lay.gpu(0)
    assert sorted((i.gi_id, i.profile, i.placement) for i in g0.instances) == [
        (5, "2g.10gb", "4:2"),
        (7, "1g.5gb", "0:1"),
        (8, "1g.5gb", "1:1"),
        (9, "1g.5gb", "2:1"),
        (10, "1g.5gb", "3:1"),
        (13, "1g.5gb", "6:1"),
    ]
    assert lay.free_memory_slices(0) == [7]  # 2g at 4:2 covers 4 and 5
    assert lay.table is not None and lay.table.model == "A100-40GB"
    two = parse_mig_lgi(read("mig-lgi-a100-40gb-2x3g.20gb-migguide-r450fmt.txt"))
    assert {(i.gi_id, i.placement) for i in two.instances()} == {(1, "4:4"), (2, "0:4")}
    mix = parse_mig_lgi(read("mig-lgi-a100-40gb-3-2-1-1-migguide-r450fmt.txt"))
    assert {(i.profile, i.placement) for i in mix.instances()} == {
        ("1g.5gb", "0:1"),
        ("1g.5gb", "1:1"),
        ("2g.10gb", "2:2"),
        ("3g.20gb", "4:4"),
    }
    assert [i.compute_range() for i in mix.instances() if i.profile == "3g.20gb"] == [range(4, 7)]
    a30 = parse_mig_lgi(read("mig-lgi-a30-24gb-4x1g.6gb.txt"))
    assert a30.table is not None and a30.memory_slices == 4 and a30.free_memory_slices(0) == []
    nvl = parse_mig_lgi(read("mig-lgi-h100-nvl-94gb-2x3g.47gb.txt"))
    assert nvl.table is not None and nvl.table.model == "H100-94GB"
    assert [(i.gi_id, i.profile_id, i.placement) for i in nvl.instances()] == [(1, 9, "0:4"), (2, 9, "4:4")]


def test_inferred_placement_reproduces_what_the_driver_printed() -> None:
    # the -lgi captures show where the driver put instances; the inference must land on the same slots
    for name in (
        "mig-lgi-a100-40gb-3-2-1-1-migguide-r450fmt.txt",
        "mig-lgi-a100-40gb-2x3g.20gb-migguide-r450fmt.txt",
    ):
        real = parse_mig_lgi(read(name))
        spec = {0: [i.profile for i in real.gpu(0).instances]}
        placed = MigLayout.from_spec("A100-40GB", spec)
        assert sorted((i.profile, i.placement) for i in placed.instances()) == sorted(
            (i.profile, i.placement) for i in real.instances()
        )


def test_lci_with_and_without_placement() -> None:
    (one,) = parse_mig_lci(read("mig-lci-a100-1g.5gb-single.txt"))
    gpu, gi, ci, place = one
    assert (gpu, gi, ci.ci_id, ci.name, ci.profile_id, place) == (0, 13, 0, "1g.5gb", 0, (0, 1))
    three = parse_mig_lci(read("mig-lci-a100-40gb-3x1c.3g.20gb-migguide-r450fmt.txt"))
    assert [(g, gi, c.ci_id, c.name, c.compute_slices, p) for g, gi, c, p in three] == [
        (0, 1, k, "1c.3g.20gb", 1, None) for k in range(3)
    ]


def test_cgi_log() -> None:
    lay = parse_mig_cgi_log(read("mig-cgi-C-h100-pcie-create-log.txt"))
    insts = {i.gi_id: i for i in lay.instances()}
    assert sorted(insts) == [2, 7, 8, 9]
    assert insts[2].profile == "3g.40gb" and insts[2].profile_id == 9
    assert [(c.ci_id, c.profile_id) for c in insts[7].compute_instances] == [(0, 0)]
    assert all(i.placement_inferred for i in lay.instances())
    assert insts[2].placement == "4:4"  # 3g goes to the upper half first, as in the -lgi captures
    # 1g.10gb/3g.40gb exist on A100-80GB and H100-80GB alike: say so rather than guess the model
    assert lay.gpu(0).model is None and any("H100-80GB" in n for n in lay.notes)
    named = parse_mig_cgi_log(read("mig-cgi-C-h100-pcie-create-log.txt"), gpu_model="NVIDIA H100 PCIe")
    assert (
        named.table is not None
        and named.table.model == "H100-80GB"
        and named.gpu(0).model == "NVIDIA H100 PCIe"
    )


def test_smi_list_mig_uuids_and_ci_grouping() -> None:
    devices, lay = parse_smi_list(read("smi-L-dgx-a100-8gpu-mixed-mig-r470-migguide.txt"))
    assert lay is not None
    gpus = [d for d in devices if d.parent is None]
    assert len(gpus) == 8 and gpus[0].uuid == "GPU-5d5ba0d6-d33d-2b2c-524d-9e3d8d2b8a77"
    migs = [d for d in devices if d.parent is not None]
    assert len(migs) == 26 and all(d.uuid.startswith("MIG-") for d in migs)
    assert len({d.uuid for d in migs}) == 26
    assert [i.profile for i in lay.gpu(1).instances] == ["2g.10gb"] * 3
    # six 1c.3g.20gb compute instances = two 3g.20gb GPU instances with three CIs each
    g4 = lay.gpu(4).instances
    assert [(i.profile, len(i.compute_instances)) for i in g4] == [("3g.20gb", 3), ("3g.20gb", 3)]
    assert g4[0].compute_instances[0].uuid == "MIG-79c62632-04cc-574b-af7b-cb2e307120d8"
    # 1c + 2c + 3c of a 7g share one GPU instance
    (g6,) = lay.gpu(6).instances
    assert g6.profile == "7g.40gb" and [c.compute_slices for c in g6.compute_instances] == [1, 2, 3]
    assert sorted(i.profile for i in lay.gpu(7).instances) == ["1g.5gb", "2g.10gb", "4g.20gb"]
    assert all(i.placement_inferred for i in lay.instances())
    h100_devices, h100 = parse_smi_list(read("smi-L-h100-80gb-hbm3-ci-uuids-r570-migguide.txt"))
    assert h100 is not None and h100.table is not None and h100.table.model == "H100-80GB"
    assert sorted((i.profile, len(i.compute_instances)) for i in h100.instances()) == [
        ("1g.10gb", 1),
        ("1g.10gb", 1),
        ("3g.40gb", 3),
    ]
    assert [d.index for d in h100_devices if d.parent == 0] == [0, 1, 2, 3, 4]
    _, small = parse_smi_list(read("smi-L-a100-40gb-2x3g.20gb-migguide.txt"))
    assert small is not None and [c.uuid for i in small.instances() for c in i.compute_instances] == [
        "MIG-c7384736-a75d-5afc-978f-d2f1294409fd",
        "MIG-a28ad590-3fda-56dd-84fc-0a0b96edc58d",
    ]


def test_smi_list_without_mig() -> None:
    text = read("nvlink-status-2x-rtx3090-nv4.txt").splitlines()
    devices, lay = parse_smi_list("\n".join(ln for ln in text if ln.startswith("GPU")))
    assert lay is None and [d.name for d in devices] == ["NVIDIA GeForce RTX 3090"] * 2


@pytest.mark.parametrize(
    ("name", "kind"),
    [
        ("mig-lgip-a30-24gb-all-used.txt", "lgip"),
        ("mig-lgip-h200-141gb-gpu6-PARTIAL.txt", "lgip"),
        ("mig-lgipp-a30-24gb.txt", "lgipp"),
        ("mig-lgi-a30-24gb-4x1g.6gb.txt", "lgi"),
        ("mig-lci-a100-1g.5gb-single.txt", "lci"),
        ("mig-cgi-C-h100-pcie-create-log.txt", "cgi"),
        ("smi-L-a100-40gb-2x3g.20gb-migguide.txt", "list"),
        ("nvlink-status-i0-h100-80gb-hbm3.txt", "nvlink-s"),
        ("nvlink-capabilities-i0-h100-80gb-hbm3.txt", "nvlink-c"),
        ("topo-c-48-dgx-a100.txt", "topo-c"),
    ],
)
def test_sniff(name: str, kind: str) -> None:
    assert sniff(read(name)) == kind


def test_overlapping_placements_are_parse_errors() -> None:
    text = read("mig-lgi-a100-40gb-2x3g.20gb-migguide-r450fmt.txt").replace("4:4", "2:4")
    with pytest.raises(ParseError, match="overlaps"):
        parse_mig_lgi(text)
    with pytest.raises(ParseError, match="9:4"):
        parse_mig_lgi(text.replace("0:4", "9:4"))


def test_mig_row_with_unknown_profile_name_is_quoted() -> None:
    text = read("mig-lgi-h100-nvl-94gb-2x3g.47gb.txt").replace("3g.47gb", "3x.47gb", 1)
    with pytest.raises(ParseError, match="3x.47gb"):
        parse_mig_lgi(text)


def test_profile_tables() -> None:
    h200 = MIG_PROFILE_TABLES["H200-141GB"]
    assert [p.name for p in h200.profiles] == [
        "1g.18gb",
        "1g.18gb+me",
        "1g.35gb",
        "2g.35gb",
        "3g.71gb",
        "4g.71gb",
        "7g.141gb",
    ]
    assert h200.profile("3g.71gb").placements == ((0, 4), (4, 4))
    assert h200.profile("2g.35gb").starts == (0, 2, 4) and h200.profile("1g.35gb").memory_slices == 2
    assert table_for_model("NVIDIA H200") is h200 and table_for_model("NVIDIA H100 80GB HBM3") is not None
    assert table_for_model("A100-SXM4-80GB") is MIG_PROFILE_TABLES["A100-80GB"]
    assert table_for_model("GeForce RTX 3090") is None
    assert parse_profile_name("2c.7g.40gb") == (2, 7, 40, False)
    assert parse_profile_name("1g.18gb+me") == (None, 1, 18, True)
    with pytest.raises(RequestError, match="does not exist"):
        h200.profile("1g.10gb")


def test_from_spec_rejects_what_cannot_fit() -> None:
    with pytest.raises(RequestError, match="compute slices"):
        MigLayout.from_spec("H200-141GB", {0: ["4g.71gb", "4g.71gb"]})
    with pytest.raises(RequestError, match="no free placement"):
        # 7 compute slices in all, but the two 3g take all 8 memory slices
        MigLayout.from_spec("H200-141GB", {0: ["3g.71gb", "3g.71gb", "1g.18gb"]})
    assert sorted(
        i.placement for i in MigLayout.from_spec("H200-141GB", {0: ["4g.71gb", "3g.71gb"]}).instances()
    ) == ["0:4", "4:4"]
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        lay = MigLayout.from_spec("H200-141GB", {0: ["3g.71gb", "2g.35gb", "1g.18gb", "1g.18gb"]})
    assert sorted(i.placement for i in lay.instances()) == ["0:1", "1:1", "2:2", "4:4"]
    assert not any(i.placement_inferred for i in lay.instances())


def test_mig_devices_table_with_shared_gi_memory() -> None:
    two = parse_mig_devices(read("smi-mig-devices-a100-40gb-2x3g.20gb-migguide.txt"))
    assert [(d.gi_id, d.ci_id, d.mig_dev, d.memory_total_mib, d.sm) for d in two] == [
        (1, 0, 0, 20224, 42),
        (2, 0, 1, 20096, 42),
    ]
    shared = parse_mig_devices(read("smi-mig-devices-a100-40gb-3ci-shared-gi-migguide.txt"))
    assert [(d.gi_id, d.ci_id, d.memory_total_mib, d.sm) for d in shared] == [
        (1, 0, 20224, 14),
        (1, 1, None, 14),
        (1, 2, None, 14),
    ]  # one merged memory cell for GI 1
