"""MIG free counts against every MIG capture, derived from the profile geometry independently of the code.

The test's geometry comes from the captures themselves, not from slurmlab's tables: each profile's placements
(start slots and memory slices) from the ``-lgipp`` captures, each name's profile id and instance limit from the
``-lgip`` captures (their Free/Total columns on an empty GPU), and compute slices from the name (``3g`` = 3). The
7x8 GPUs share one placement scheme by profile id (NVIDIA's MIG guide, FACTS-mig-nvlink.md); the A30 has its own.
Free counts are then counted by brute force (every set of free starts), as ``nvidia-smi mig -lgip`` prints them:
how many more instances of that profile alone could still be created.
"""

from __future__ import annotations

import itertools
import re
from collections.abc import Iterable
from dataclasses import dataclass

import pytest
from shared_paths import list_shared
from shared_paths import smi_capture as read

from slurmlab.core.gpu.mig import (
    MIG_PROFILE_TABLES,
    GpuInstance,
    GpuMig,
    MigLayout,
    layouts_with_room,
    room_left,
    table_for_model,
)
from slurmlab.core.gpu.smi import (
    parse_mig_cgi_log,
    parse_mig_lgi,
    parse_mig_lgip,
    parse_mig_lgipp,
    parse_smi_list,
    sniff,
)


@dataclass(frozen=True)
class Geo:
    """One profile as the captures describe it."""

    name: str
    pid: int
    compute: int
    total: int  # instance limit: Total of -lgip
    starts: tuple[int, ...]
    size: int


def _compute(name: str) -> int:
    m = re.match(r"^(\d+)g\.", name)
    assert m, name
    return int(m.group(1))


def geometry(lgip: str, lgipp: str) -> dict[str, Geo]:
    """Name -> geometry, joining an -lgip capture (ids, limits) to an -lgipp capture (placements) by profile id."""
    places = parse_mig_lgipp(read(lgipp))[0]
    out = {}
    for row in parse_mig_lgip(read(lgip)):
        if row.profile_id in places:
            starts, size = places[row.profile_id]
            out[row.name] = Geo(row.name, row.profile_id, _compute(row.name), row.total, starts, size)
    return out


# (-lgip capture with every instance free, -lgipp capture of the same placement scheme)
SEVEN_BY_EIGHT = "mig-lgipp-a100-40gb-migguide.txt"
GEOMETRY_SOURCES = {
    "A100-40GB": ("mig-lgip-a100-pcie-40gb.txt", SEVEN_BY_EIGHT),
    "H100-80GB": ("mig-lgip-4x-h100-sxm5-80gb-multi-gpu.txt", "mig-lgipp-h100-pcie-80gb-drv525.txt"),
    "A100-80GB": ("mig-lgip-a100-80gb-partially-used.txt", SEVEN_BY_EIGHT),
    "H100-94GB": ("mig-lgip-h100-nvl-94gb-all-used.txt", SEVEN_BY_EIGHT),
    "A30-24GB": ("mig-lgip-a30-24gb-all-used.txt", "mig-lgipp-a30-24gb.txt"),
}
MEMORY_SLICES = {"A30-24GB": 4}
COMPUTE_SLICES = {"A30-24GB": 4}


def free_counts(
    placed: Iterable[tuple[str, int]], geo: dict[str, Geo], model: str, *, no_4g_after_3g: bool = True
) -> dict[str, int]:
    """Per profile, the most instances that could still be created beside ``placed`` ((name, start) pairs)."""
    placed = list(placed)
    n_mem, n_comp = MEMORY_SLICES.get(model, 8), COMPUTE_SLICES.get(model, 7)
    used: set[int] = set()
    for name, start in placed:
        span = set(range(start, start + geo[name].size))
        assert not span & used and max(span) < n_mem, (name, start)
        used |= span
    comp_left = n_comp - sum(geo[n].compute for n, _ in placed)
    out = {}
    for g in geo.values():
        if no_4g_after_3g and g.compute == 4 and n_comp == 7 and any(geo[n].compute == 3 for n, _ in placed):
            out[g.name] = 0  # see test_a_4g_is_not_created_after_a_3g
            continue
        limit = g.total - sum(1 for n, _ in placed if n == g.name)
        free = [s for s in g.starts if not set(range(s, s + g.size)) & used]
        best = 0
        for k in range(1, len(free) + 1):
            for combo in itertools.combinations(free, k):
                spans = [set(range(s, s + g.size)) for s in combo]
                if sum(len(x) for x in spans) == len(set().union(*spans)) and k * g.compute <= comp_left:
                    best = max(best, k)
        out[g.name] = min(best, max(limit, 0))
    return out


def code_counts(layout: MigLayout, gpu: int) -> dict[str, int]:
    rooms = layout.room(gpu)
    assert rooms is not None, layout.summary()
    return {r.profile: r.free for r in rooms if r.free is not None}


def model_of(layout: MigLayout) -> str:
    assert layout.table is not None
    return layout.table.model


LAYOUT_CAPTURES = [
    p.name
    for p in list_shared("nvidia-smi", pattern="*.txt")
    if p.name.startswith(("mig-lgi-", "mig-cgi-", "smi-L-"))
]


def test_every_mig_layout_capture_is_covered() -> None:
    if not LAYOUT_CAPTURES:
        pytest.skip("shared nvidia-smi fixtures are absent")
    assert {sniff(read(n)) for n in LAYOUT_CAPTURES} == {"lgi", "cgi", "list"}


@pytest.mark.parametrize("name", LAYOUT_CAPTURES)
def test_free_counts_of_every_layout_capture_follow_the_geometry(name: str) -> None:
    text = read(name)
    kind = sniff(text)
    layout = (
        parse_mig_lgi(text)
        if kind == "lgi"
        else parse_mig_cgi_log(text)
        if kind == "cgi"
        else parse_smi_list(text)[1]
    )
    assert layout is not None
    model = model_of(layout)
    geo = geometry(*GEOMETRY_SOURCES[model])
    for g in layout.gpus:
        placed = [(i.profile, i.start) for i in g.instances]
        assert all(s is not None for _n, s in placed), name
        expected = free_counts([(n, s) for n, s in placed if s is not None], geo, model)
        got = code_counts(layout, g.index)
        assert {n: got[n] for n in expected} == expected, (name, g.index)


def test_the_issue_example_three_1g_and_one_3g_leave_room_for_one_1g() -> None:
    # three 1g.10gb and one 3g.40gb on an 80 GB part: 7 of 8 memory slices and 6 of 7 compute slices are used
    layout = parse_mig_cgi_log(read("mig-cgi-C-h100-pcie-create-log.txt"), gpu_model="NVIDIA H100 PCIe")
    assert layout.free_memory_slices(0) == [0] and layout.free_compute_slices(0) == 1
    counts = code_counts(layout, 0)
    assert counts["1g.10gb"] == 1 and counts["1g.10gb+me"] == 1
    assert sum(counts.values()) == 2  # nothing larger than a 1g fits
    summary = layout.summary()
    assert "free: 1 of 7 compute slices, 1 of 8 memory slices (slice 0)" in summary
    assert "room for one more 1g.10gb or 1g.10gb+me" in summary
    assert "free memory slices: 0" not in summary  # the old line read as "nothing free"


@pytest.mark.parametrize(
    ("lgip", "model"),
    [
        ("mig-lgip-a100-pcie-40gb.txt", "A100-40GB"),
        ("mig-lgip-4x-h100-sxm5-80gb-multi-gpu.txt", "H100-80GB"),
        ("mig-lgip-gh200-144gb-PARTIAL.txt", "GH200-144GB"),
        ("mig-lgip-h200-141gb-gpu6-PARTIAL.txt", "H200-141GB"),
    ],
)
def test_lgip_of_empty_gpus_is_what_an_empty_layout_leaves(lgip: str, model: str) -> None:
    import warnings

    with warnings.catch_warnings():
        warnings.simplefilter("ignore")  # the H200 capture starts mid-table
        rows = parse_mig_lgip(read(lgip))
    table = MIG_PROFILE_TABLES[model]
    for gpu in {r.gpu for r in rows}:
        rooms = room_left(GpuMig(index=gpu), table)
        assert rooms is not None
        derived = {r.profile: r.free for r in rooms}
        printed = {r.name: r.free for r in rows if r.gpu == gpu}
        assert {n: derived[n] for n in printed} == printed


@pytest.mark.parametrize(
    ("lgi", "lgip"),
    [
        # the same sources captured the layout and the profile listing of the same GPU state
        ("mig-lgi-a30-24gb-4x1g.6gb.txt", "mig-lgip-a30-24gb-all-used.txt"),  # Summer-Lo README
        (
            "mig-lgi-h100-nvl-94gb-2x3g.47gb.txt",
            "mig-lgip-h100-nvl-94gb-all-used.txt",
        ),  # harvester mig_test.go
    ],
)
def test_lgip_of_used_gpus_matches_the_layout_captured_beside_it(lgi: str, lgip: str) -> None:
    layout = parse_mig_lgi(read(lgi))
    printed = {r.name: r.free for r in parse_mig_lgip(read(lgip))}
    assert printed and not any(printed.values())
    got = code_counts(layout, 0)
    assert {n: got[n] for n in printed} == printed
    model = model_of(layout)
    expected = free_counts(
        [(i.profile, i.start) for i in layout.gpu(0).instances if i.start is not None],
        geometry(*GEOMETRY_SOURCES[model]),
        model,
    )
    assert {n: expected[n] for n in printed} == printed


def _layouts(geo: dict[str, Geo], n_mem: int = 8, n_comp: int = 7) -> list[list[tuple[str, int]]]:
    """Every set of instances that fits one GPU (memory spans disjoint, compute within limits)."""
    spots = sorted({(g.name, s) for g in geo.values() for s in g.starts})
    found: list[list[tuple[str, int]]] = []

    def grow(i: int, chosen: list[tuple[str, int]], used: set[int], comp: int) -> None:
        found.append(list(chosen))
        for j in range(i, len(spots)):
            name, start = spots[j]
            span = set(range(start, start + geo[name].size))
            count = sum(1 for n, _ in chosen if n == name)
            if span & used or comp + geo[name].compute > n_comp or count >= geo[name].total:
                continue
            grow(j + 1, [*chosen, (name, start)], used | span, comp + geo[name].compute)

    grow(0, [], set(), 0)
    return found


def test_partly_used_a100_80gb_lgip_is_explained_by_a_layout_with_the_same_free_counts() -> None:
    # the capture has no layout beside it: find every layout whose geometry gives its Free column
    printed = {r.name: r.free for r in parse_mig_lgip(read("mig-lgip-a100-80gb-partially-used.txt"))}
    geo = geometry(*GEOMETRY_SOURCES["A100-80GB"])
    assert set(geo) == set(printed)
    explaining = [lay for lay in _layouts(geo) if free_counts(lay, geo, "A100-80GB") == printed]
    assert explaining == [[("3g.40gb", 4)]]  # one 3g.40gb in the upper half, memory 0-3 free
    # the code finds the same single layout from the counts
    found = layouts_with_room(MIG_PROFILE_TABLES["A100-80GB"], printed)
    assert [[(i.profile, i.start) for i in g.instances] for g in found] == explaining
    table = MIG_PROFILE_TABLES["A100-80GB"]
    inst = GpuInstance(gpu=0, profile="3g.40gb", compute_slices=3, start=4, size=4)
    layout = MigLayout(gpus=(GpuMig(index=0, instances=(inst,)),), table=table)
    got = code_counts(layout, 0)
    assert {n: got[n] for n in printed} == printed
    assert "room for up to 4x 1g.10gb" in layout.summary()


def test_a_4g_is_not_created_after_a_3g() -> None:
    # without that rule no layout gives the A100-80GB capture's counts: 4g.40gb is 0/1 though slices 0-3 are free
    printed = {r.name: r.free for r in parse_mig_lgip(read("mig-lgip-a100-80gb-partially-used.txt"))}
    geo = geometry(*GEOMETRY_SOURCES["A100-80GB"])
    assert not [
        lay for lay in _layouts(geo) if free_counts(lay, geo, "A100-80GB", no_4g_after_3g=False) == printed
    ]
    # created the other way round, both fit: the spec places the 4g first, as `-cgi 4g,3g` does
    both = MigLayout.from_spec("A100-80GB", {0: ["3g.40gb", "4g.40gb"]})
    assert sorted(i.placement for i in both.instances()) == ["0:4", "4:4"]
    rooms = {r.profile: r for r in both.room(0) or ()}
    assert rooms["4g.40gb"].free == 0 and rooms["1g.10gb"].free == 0


def test_room_lists_the_free_starts_per_profile() -> None:
    layout = parse_mig_lgi(
        read("mig-lgi-a100-40gb-3-2-1-1-migguide-r450fmt.txt")
    )  # 1g 0:1, 1:1, 2g 2:2, 3g 4:4
    rooms = {r.profile: r for r in layout.room(0) or ()}
    assert all(r.free == 0 and r.free_starts == () for r in rooms.values())  # 7 compute slices used
    lay = MigLayout.from_spec("H200-141GB", {0: ["3g.71gb"]})
    rooms = {r.profile: r for r in lay.room(0) or ()}
    assert rooms["1g.18gb"].free_starts == (0, 1, 2, 3) and rooms["1g.18gb"].free == 4
    assert rooms["2g.35gb"].free_starts == (0, 2) and rooms["3g.71gb"].free_starts == (0,)
    assert rooms["4g.71gb"].free == 0 and rooms["7g.141gb"].free == 0
    assert table_for_model("H200") is lay.table


def test_a_profile_at_its_instance_limit_has_no_room() -> None:
    # one +me instance per GPU: with it created, 1g.10gb+me is 0 free though 1g.10gb still has six places
    lay = MigLayout.from_spec("H100-80GB", {0: ["1g.10gb+me"]})
    rooms = {r.profile: r for r in lay.room(0) or ()}
    assert rooms["1g.10gb+me"].free == 0 and rooms["1g.10gb+me"].free_starts == ()
    assert rooms["1g.10gb"].free == 6
