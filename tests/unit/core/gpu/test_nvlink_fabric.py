"""Every `nvidia-smi topo -m` capture classified switched / direct NVLink / PCIe only, with the bandwidth per GPU
and per GPU pair that the hardware's published figures give.

Published figures (per direction; both ways is twice), by source:

- [H100] NVIDIA H100 Tensor Core GPU datasheet and "NVIDIA H100 Tensor Core GPU Architecture" whitepaper: SXM5,
  18 fourth-generation NVLinks, 900 GB/s total (450 per direction); HGX H100 8-GPU joins them through NVSwitch.
- [A100] NVIDIA A100 Tensor Core GPU datasheet and "NVIDIA A100 Tensor Core GPU Architecture" whitepaper: 12
  third-generation NVLinks, 600 GB/s total (300 per direction); DGX/HGX A100 8-GPU through six NVSwitches.
- [DGX-2] NVIDIA DGX-2 datasheet / NVSwitch technical overview: 16 V100, each with its 6 NVLinks into the
  NVSwitch fabric, 300 GB/s per GPU (150 per direction) to any other GPU.
- [DGX-1] "NVIDIA DGX-1 With Tesla V100 System Architecture" whitepaper: hybrid cube mesh, 6 links per V100 of
  25 GB/s per direction, one or two links per GPU pair.
- [AC922] IBM Redpaper REDP-5494 "IBM Power System AC922 Introduction and Technical Overview": 4-GPU model, GPU
  pairs joined by 3 NVLink 2.0 bricks (150 GB/s both ways); the other 3 go to the POWER9 CPU.
- [GA102] "NVIDIA Ampere GA102 GPU Architecture" whitepaper: RTX 3090 NVLink bridge, 4 links x 14.0625 GB/s per
  direction = 56.25 GB/s, 112.5 GB/s both ways.
- [GH200] NVIDIA GH200 Grace Hopper Superchip datasheet: 900 GB/s NVLink per GPU; the 4-GH200 HPE Cray EX node
  splits the 18 links 6 per peer (FACTS-mig-nvlink.md: "NV6 (4x GH200 node: 18 links split over 3 peers)").
- [FACTS] FACTS-mig-nvlink.md beside the captures: links per GPU and per-link speed per generation.
"""

from __future__ import annotations

import warnings

import pytest
from shared_paths import list_shared, require_shared

import slurmlab
from slurmlab.core.gpu.nvlink import FabricKind
from slurmlab.core.gpu.smi import parse_topo_matrix
from slurmlab.core.gpu.topology import Topology

SWITCHED, DIRECT, PCIE = FabricKind.SWITCHED, FabricKind.DIRECT, FabricKind.PCIE
H100, A100, V100 = "NVIDIA H100 80GB HBM3", "NVIDIA A100-SXM4-80GB", "Tesla V100-SXM3-32GB"

# file -> (model the capture's source names (SOURCES.md), kind, per-GPU GB/s per direction,
#          {pair: GB/s per direction or None}, source of the figures)
FABRICS: dict[str, tuple[str | None, FabricKind, float | None, dict[tuple[int, int], float | None], str]] = {
    # 16 GPUs, NV6 to each of 15 peers = 90 links on a V100 that has 6
    "topo-16gpu-nvswitch-nv6-10mlx5-dgx2-class-PARTIAL.txt": (
        None,
        SWITCHED,
        150.0,
        {(0, 1): 150.0, (3, 15): 150.0},
        "DGX-2",
    ),
    "topo-2x-a100-della-sys-2mlx5-numa.txt": (None, PCIE, None, {(0, 1): None}, "-"),
    "topo-2x-gtx1080ti-pcie-phb.txt": (None, PCIE, None, {(0, 1): None}, "-"),
    "topo-2x-rtx3090-nvlink-bridge-nv4.txt": (
        "NVIDIA GeForce RTX 3090",
        DIRECT,
        56.25,
        {(0, 1): 56.25},
        "GA102",
    ),
    "topo-4x-a10-pcie-sys-2nics.txt": (None, PCIE, None, {(0, 3): None}, "-"),
    # NV12 to each of 3 peers = 36 links on an A100 that has 12 (a true HGX A100 4-GPU board shows NV4 per pair:
    # see test_direct_hgx_a100_4gpu_board): these 4 GPUs sit on an NVSwitch baseboard
    "topo-4x-a100-sxm4-80gb-nv12-ansi-underline-header.txt": (A100, SWITCHED, 300.0, {(0, 3): 300.0}, "A100"),
    "topo-4x-a100-sxm4-80gb-nv12-rocenic-ansi-drv580.txt": (A100, SWITCHED, 300.0, {(1, 2): 300.0}, "A100"),
    "topo-4x-gh200-cray-ex-nv6-gpu-numa-id.txt": (
        None,
        DIRECT,
        450.0,
        {(0, 1): 150.0, (2, 3): 150.0},
        "GH200",
    ),
    "topo-4x-v100-power9-ac922-traverse-nv3-numa8.txt": (
        None,
        DIRECT,
        75.0,
        {(0, 1): 75.0, (0, 2): None},
        "AC922",
    ),
    "topo-8x-a100-nv12-17nics-bond.txt": (None, SWITCHED, 300.0, {(0, 7): 300.0}, "A100"),
    "topo-8x-h100-princeton-pli-nv18-6nics-empty-cpu-affinity.txt": (
        H100,
        SWITCHED,
        450.0,
        {(0, 7): 450.0},
        "H100",
    ),
    "topo-8x-h100-sxm-nv18-no-nics-spaces.txt": (H100, SWITCHED, 450.0, {(3, 4): 450.0}, "H100"),
    "topo-8x-pcie-sys-only-2numa-gpunumaid.txt": (None, PCIE, None, {(0, 7): None}, "-"),
    "topo-dgx-a100-mlx5-header-numa-3175.txt": (None, SWITCHED, 300.0, {(0, 7): 300.0}, "A100"),
    "topo-dgx1-v100-8gpu-4mlx5-tabs.txt": (
        None,
        DIRECT,
        150.0,
        {(0, 3): 50.0, (0, 1): 25.0, (0, 5): None},
        "DGX-1",
    ),
    # `topo -mp` shows PCIe paths only, even on this NVLink box: PCIe only is what the capture can say
    "topo-mp-dgx1-pcie-only-matrix.txt": (None, PCIE, None, {(0, 1): None}, "-"),
}

TOPO_FILES = [
    p.name
    for p in list_shared("nvidia-smi", pattern="topo-*.txt")
    if not p.name.startswith(("topo-c-", "topo-p2p-"))
]


def topo(name: str, model: str | None = None) -> Topology:
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")  # the PARTIAL capture warns; test_topo_matrix_fixtures checks that
        return parse_topo_matrix(require_shared("nvidia-smi", name).read_text(), gpu_model=model)


def test_every_topo_capture_has_a_row() -> None:
    if not TOPO_FILES:
        pytest.skip("shared nvidia-smi fixtures not found")
    assert sorted(TOPO_FILES) == sorted(FABRICS), "a topo -m capture without an expected fabric: add it above"


@pytest.mark.parametrize("name", sorted(FABRICS))
def test_fabric_kind_and_bandwidth_match_the_published_figures(name: str) -> None:
    model, kind, per_gpu, pairs, _source = FABRICS[name]
    t = topo(name, model)
    fabric = t.fabric()
    assert fabric.kind is kind, fabric.reason
    # the kind never hangs on being told the model: every capture classifies the same without it
    assert topo(name).fabric().kind is kind
    for g in fabric.nvlink_gpus() or [t.gpus[0].index]:
        assert fabric.gpu_gbps(g) == per_gpu
        if per_gpu is not None:
            assert fabric.gpu_gbps(g, bidirectional=True) == 2 * per_gpu
    for (a, b), gbps in pairs.items():
        assert fabric.pair_gbps(a, b) == gbps and t.bandwidth_gbps(a, b) == gbps
        if gbps is not None:
            assert fabric.pair_gbps(a, b, bidirectional=True) == 2 * gbps
    text = t.summary()
    assert f"NVLink fabric: {kind.value}" in text
    if per_gpu is not None:
        assert f"{per_gpu:g} GB/s per direction" in text


@pytest.mark.parametrize("name", [n for n, row in FABRICS.items() if row[1] is SWITCHED])
def test_switched_summaries_never_sum_over_pairs(name: str) -> None:
    t = topo(name, FABRICS[name][0])
    fabric = t.fabric()
    links = fabric.links_per_gpu
    assert links is not None and all(fabric.gpu_links(g) == links for g in fabric.nvlink_gpus())
    text = t.summary()
    # the reason shows the arithmetic that gives the switch away, and the GPU's own link count
    peers = max(len([p for p in fabric.pair_links if g in p]) for g in fabric.nvlink_gpus())
    assert f"each of its {peers} peers, {peers * links} links in all" in text
    assert f"per GPU: {links} links x 25 GB/s" in text and "any two GPUs get a GPU's full" in text
    assert "summed over pairs" not in text and "bonded links in total" not in text


def test_dgx2_partial_capture_guesses_nvlink2_from_the_switched_links() -> None:
    t = topo("topo-16gpu-nvswitch-nv6-10mlx5-dgx2-class-PARTIAL.txt")
    assert t.nvlink_generation is not None and t.nvlink_generation.name == "NVLink 2"
    assert "the capture does not name the GPU model: figures assume NVLink 2 (V100)" in t.summary()


def test_pcie_only_says_how_gpus_talk_and_spots_topo_mp() -> None:
    t = topo("topo-8x-pcie-sys-only-2numa-gpunumaid.txt")
    assert (
        "NVLink fabric: PCIe only — no GPU pair shows NV# in the matrix; GPUs reach each other over PCIe (SYS)"
        in t.summary()
    )
    mp = topo("topo-mp-dgx1-pcie-only-matrix.txt").summary()
    assert "looks like `nvidia-smi topo -mp`, which shows PCIe paths only" in mp
    assert "capture `nvidia-smi topo -m`" in mp
    # a -m capture of a PCIe box has the NV# legend line: no such note
    assert "topo -mp" not in topo("topo-2x-gtx1080ti-pcie-phb.txt").summary()


def _matrix(n: int, cell: str) -> str:
    names = [f"GPU{i}" for i in range(n)]
    rows = ["\t" + "\t".join(names)]
    rows += [
        name + "\t" + "\t".join(" X " if i == j else cell for j in range(n)) for i, name in enumerate(names)
    ]
    return "\n".join(rows) + "\n"


def test_direct_hgx_a100_4gpu_board() -> None:
    # HGX A100 4-GPU (Redstone) / DGX Station A100: 4 links to each of 3 peers = the A100's 12 [A100]
    t = parse_topo_matrix(_matrix(4, "NV4"), gpu_model=A100)
    fabric = t.fabric()
    assert fabric.kind is DIRECT and fabric.pair_gbps(0, 1) == 100.0 and fabric.gpu_gbps(0) == 300.0
    assert "GPU pairs are cabled to each other: NV4; no GPU shows more links than its 12" in t.summary()


def test_a_pair_showing_every_sxm_link_is_a_switch_but_a_bridge_is_not() -> None:
    # a job that sees 2 GPUs of an HGX H100 (device cgroup): NV18 on one pair; only a switch gives that
    two = parse_topo_matrix(_matrix(2, "NV18"), gpu_model=H100)
    assert two.fabric().kind is SWITCHED and two.bandwidth_gbps(0, 1) == 450.0
    assert "a pair of H100 showing all 18 links (NV18) can only be an NVSwitch fabric" in two.summary()
    # without the model the count alone cannot tell: 18 links fit on one GPU
    assert parse_topo_matrix(_matrix(2, "NV18")).fabric().kind is DIRECT
    # two A100 PCIe cards joined by three NVLink bridges show NV12 too, and that is direct
    bridged = parse_topo_matrix(_matrix(2, "NV12"), gpu_model="NVIDIA A100-PCIE-40GB").fabric()
    assert bridged.kind is DIRECT and "(an NVLink bridge)" in bridged.reason
    # a DGX-2 V100 pair: NV6 is all of a V100's links
    assert parse_topo_matrix(_matrix(2, "NV6"), gpu_model=V100).fabric().kind is SWITCHED


def test_a_named_dgx_baseboard_is_switched() -> None:
    # an 8-GPU DGX named by the user: switched even where a cgroup hid the NV# arithmetic behind NV1s
    t = parse_topo_matrix(_matrix(8, "NV1"), gpu_model="DGX H100")
    assert t.fabric().kind is SWITCHED and "DGX H100 joins its 8 GPUs through NVSwitch" in t.summary()
    assert parse_topo_matrix(_matrix(8, "NV1"), gpu_model="DGX-1").fabric().kind is DIRECT


def test_sandbox_profile_is_switched() -> None:
    t = slurmlab.topology(profile="dgx-h100").topology
    assert t.fabric().kind is SWITCHED and t.bandwidth_gbps(0, 5) == 450.0
