"""`nvidia-smi topo -m` captures from 16 real systems: each parses, and the facts in it come out right."""

from __future__ import annotations

import warnings

import pytest
from shared_paths import list_shared, require_shared

from slurmlab.core.gpu.devices import parse_cpu_list
from slurmlab.core.gpu.links import LinkKind
from slurmlab.core.gpu.smi import (
    SmiParseWarning,
    parse_topo_cpu,
    parse_topo_matrix,
    parse_topo_p2p,
    sniff,
)
from slurmlab.core.gpu.topology import Topology
from slurmlab.errors import ParseError

TOPO_FILES = [
    p
    for p in list_shared("nvidia-smi", pattern="topo-*.txt")
    if not p.name.startswith(("topo-c-", "topo-p2p-"))
]


def topo(name: str, **kw: object) -> Topology:
    text = require_shared("nvidia-smi", name).read_text()
    return parse_topo_matrix(text, **kw)  # type: ignore[arg-type]


def cpus(text: str) -> frozenset[int]:
    return parse_cpu_list(text)


@pytest.mark.parametrize("path", TOPO_FILES, ids=[p.name for p in TOPO_FILES])
def test_every_topo_capture_parses_symmetrically(path: object) -> None:
    text = path.read_text()  # type: ignore[attr-defined]
    assert sniff(text) == "topo"
    partial = "PARTIAL" in path.name  # type: ignore[attr-defined]
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        t = parse_topo_matrix(text)
    assert t.complete is not partial
    assert bool([w for w in caught if issubclass(w.category, SmiParseWarning)]) is partial
    # every header column became a device, and every pair between rows that exist has one link
    header = text.splitlines()[0].replace("\x1b[4m", "").replace("\x1b[0m", "")
    assert len(t.gpus) == header.count("GPU") - header.count("GPU NUMA ID")
    if not partial:
        n = len(t.device_names)
        assert len(t.links) == n * (n - 1) // 2
    assert "GPU matrix:" in t.summary()


def test_dgx1_hybrid_cube_mesh() -> None:
    t = topo("topo-dgx1-v100-8gpu-4mlx5-tabs.txt")
    # the two quads 0-3 and 4-7, each GPU with 6 NVLinks: NV1+NV1+NV2+NV2 (V100 has 6 links)
    assert t.link(0, 1).short == "NV1" and t.link(0, 2).short == "NV1"
    assert t.link(0, 3).short == "NV2" and t.link(0, 4).short == "NV2"
    assert t.link(1, 5).short == "NV2" and t.link(2, 6).short == "NV1" and t.link(3, 7).short == "NV1"
    assert t.link(0, 5).kind is LinkKind.SYS and t.link(3, 4).kind is LinkKind.SYS
    assert {t.nvlinks_per_gpu(i) for i in range(8)} == {6}
    assert len(t.nvlink_edges()) == 16
    assert t.nvlink_generation is not None and t.nvlink_generation.name == "NVLink 2"
    assert t.bandwidth_gbps(0, 3) == 50.0  # 2 links x 25 GB/s per direction
    # no NUMA Affinity column in this old capture; CPU affinity per socket
    assert t.gpu(0).numa_affinity is None
    assert t.gpu(0).cpu_affinity == cpus("0-19,40-59") and t.gpu(7).cpu_affinity == cpus("20-39,60-79")
    # NIC columns in the printed order mlx5_0, mlx5_2, mlx5_1, mlx5_3
    assert [n.name for n in t.nics] == ["mlx5_0", "mlx5_2", "mlx5_1", "mlx5_3"]
    assert t.link("GPU4", "mlx5_2").kind is LinkKind.PIX and t.link("GPU0", "mlx5_1").kind is LinkKind.PHB
    assert [n.name for n, _ in t.closest_nics(2)][:1] == ["mlx5_1"]


def test_dgx_a100_numa_affinities_and_mlx5_columns() -> None:
    t = topo("topo-dgx-a100-mlx5-header-numa-3175.txt")
    numa = {g.index: set(g.numa_affinity or ()) for g in t.gpus}
    assert numa == {0: {3}, 1: {3}, 2: {1}, 3: {1}, 4: {7}, 5: {7}, 6: {5}, 7: {5}}
    assert t.gpu(0).cpu_affinity == cpus("48-63,176-191")
    assert t.gpu(6).cpu_affinity == cpus("80-95,208-223")
    assert all(lk.short == "NV12" for lk in t.gpu_links()) and len(t.gpu_links()) == 28
    assert [n.name for n in t.nics] == [f"mlx5_{i}" for i in range(12)]
    assert t.link("GPU0", "mlx5_0").kind is LinkKind.PXB and t.link("mlx5_4", "mlx5_5").kind is LinkKind.PIX
    assert t.numa_nodes() == frozenset({1, 3, 5, 7})
    assert t.nvlink_generation is not None and t.nvlink_generation.name == "NVLink 3"


def test_topo_c_of_the_same_dgx_a100_agrees_with_the_matrix() -> None:
    t = topo("topo-dgx-a100-mlx5-header-numa-3175.txt")
    for name in ("topo-c-48-dgx-a100.txt", "topo-c-222-dgx-a100.txt"):
        cpu, gpus = parse_topo_cpu(require_shared("nvidia-smi", name).read_text())
        assert gpus == tuple(g.index for g in t.gpus if cpu in (g.cpu_affinity or ()))
    assert parse_topo_cpu(require_shared("nvidia-smi", "topo-c-222-dgx-a100.txt").read_text()) == (
        222,
        (6, 7),
    )


def test_princeton_pli_h100_empty_cpu_affinity_cells_and_nic_legend() -> None:
    t = topo("topo-8x-h100-princeton-pli-nv18-6nics-empty-cpu-affinity.txt")
    assert [t.gpu(i).cpu_affinity for i in range(4)] == [None] * 4  # cells left empty in the capture
    assert [t.gpu(i).numa_affinity for i in range(8)] == [frozenset({0})] * 4 + [frozenset({1})] * 4
    assert t.gpu(4).cpu_affinity == frozenset({1})  # as printed
    assert all(g.gpu_numa_id is None for g in t.gpus)
    assert [(n.name, n.device) for n in t.nics] == [(f"NIC{i}", f"mlx5_{i}") for i in range(6)]
    assert {n.device for n, lk in t.closest_nics(0) if lk.kind is LinkKind.PIX} == {"mlx5_0", "mlx5_1"}
    assert t.link("GPU3", "NIC2").kind is LinkKind.PIX and t.link("GPU6", "NIC5").kind is LinkKind.PIX
    assert t.link("NIC3", "NIC4").kind is LinkKind.PIX
    assert {lk.short for lk in t.gpu_links()} == {"NV18"}


def test_gh200_gpu_numa_id_and_multi_range_numa() -> None:
    t = topo("topo-4x-gh200-cray-ex-nv6-gpu-numa-id.txt")
    assert [g.gpu_numa_id for g in t.gpus] == [4, 12, 20, 28]
    assert t.gpu(0).numa_affinity == cpus("0,5-11") and t.gpu(3).numa_affinity == cpus("3,29-35")
    assert t.gpu(2).cpu_affinity == cpus("144-215")
    assert {t.nvlinks_per_gpu(i) for i in range(4)} == {18}
    assert t.nvlink_generation is not None and t.nvlink_generation.name == "NVLink 4"


def test_power9_nv3_pairs_and_non_contiguous_numa() -> None:
    t = topo("topo-4x-v100-power9-ac922-traverse-nv3-numa8.txt")
    assert t.link(0, 1).short == "NV3" and t.link(2, 3).short == "NV3" and t.link(0, 2).kind is LinkKind.SYS
    assert t.numa_nodes() == frozenset({0, 8})
    assert t.link("mlx5_0", "mlx5_1").kind is LinkKind.PIX and t.link("GPU2", "mlx5_2").kind is LinkKind.NODE


def test_della_pcie_sys_with_nic_rows_without_affinity() -> None:
    t = topo("topo-2x-a100-della-sys-2mlx5-numa.txt")
    assert t.link(0, 1).kind is LinkKind.SYS and not t.nvlink_edges()
    assert t.gpu(0).numa_affinity == {0} and t.gpu(1).cpu_affinity == cpus("64-127")
    assert t.link("GPU0", "mlx5_0").kind is LinkKind.NODE and t.link("GPU0", "mlx5_1").kind is LinkKind.SYS


def test_old_driver_soc_reads_as_sys() -> None:
    # captures from drivers before NODE/SYS print SOC for the cross-socket path
    text = require_shared("nvidia-smi", "topo-2x-a100-della-sys-2mlx5-numa.txt").read_text()
    t = parse_topo_matrix(text.replace("SYS", "SOC"))
    assert t.link(0, 1).kind is LinkKind.SYS and t.link(0, 1).label == "SOC"
    assert any("SOC" in n for n in t.notes)


def test_small_boxes_and_nic_naming_variants() -> None:
    phb = topo("topo-2x-gtx1080ti-pcie-phb.txt")
    assert phb.link(0, 1).kind is LinkKind.PHB and phb.gpu(0).numa_affinity is None  # N/A
    bridge = topo("topo-2x-rtx3090-nvlink-bridge-nv4.txt")
    assert bridge.link(0, 1).short == "NV4" and bridge.gpu(1).cpu_affinity == {4, 6, 9, 15, 17}
    assert bridge.nvlink_generation is None  # NV4 alone does not tell the generation
    named = topo("topo-2x-rtx3090-nvlink-bridge-nv4.txt", gpu_model="NVIDIA GeForce RTX 3090")
    assert named.nvlink_generation is not None and named.nvlink_generation.reported_gbps == 14.062
    a10 = topo("topo-4x-a10-pcie-sys-2nics.txt")
    assert [(n.name, n.device) for n in a10.nics] == [("NIC0", "mlx5_0"), ("NIC1", "mlx5_1")]
    assert a10.link("NIC0", "NIC1").kind is LinkKind.PIX and a10.gpu(3).cpu_affinity == cpus("0-127")
    roce = topo("topo-4x-a100-sxm4-80gb-nv12-rocenic-ansi-drv580.txt")
    assert roce.nics[0].device == "rocep49s0" and {g.numa_label for g in roce.gpus} == {"NUMA 1"}
    ansi = topo("topo-4x-a100-sxm4-80gb-nv12-ansi-underline-header.txt")
    assert ansi.gpu(0).cpu_affinity == cpus("0-31,64-95") and ansi.gpu(1).numa_affinity == {1}
    bond = topo("topo-8x-a100-nv12-17nics-bond.txt")
    assert bond.nics[16].device == "mlx5_bond_0" and len(bond.nics) == 17
    assert [n.device for n, lk in bond.closest_nics(0) if lk.kind is LinkKind.PXB] == [
        "mlx5_2",
        "mlx5_3",
        "mlx5_4",
        "mlx5_5",
    ]
    spaces = topo("topo-8x-h100-sxm-nv18-no-nics-spaces.txt")
    assert spaces.numa_groups() == {"NUMA 0": (0, 1, 2, 3), "NUMA 1": (4, 5, 6, 7)}
    assert len(spaces.gpu(5).cpu_affinity or ()) == 96
    pcie = topo("topo-8x-pcie-sys-only-2numa-gpunumaid.txt")
    assert not pcie.nvlink_edges() and pcie.gpu(4).cpu_affinity == cpus("16-31,48-63")
    mp = topo("topo-mp-dgx1-pcie-only-matrix.txt")
    assert mp.link(0, 1).kind is LinkKind.PIX and mp.link(0, 2).kind is LinkKind.PHB and not mp.nvlink_edges()


def test_partial_16gpu_capture_parses_what_is_there_with_a_warning() -> None:
    text = require_shared("nvidia-smi", "topo-16gpu-nvswitch-nv6-10mlx5-dgx2-class-PARTIAL.txt").read_text()
    with pytest.warns(SmiParseWarning, match="incomplete"):
        t = parse_topo_matrix(text)
    assert not t.complete and len(t.gpus) == 16 and len(t.nics) == 10
    assert t.link(0, 15).short == "NV6" and t.link(3, 9).short == "NV6"
    assert t.link(4, 5) is None  # neither row was captured
    assert t.gpu(2).cpu_affinity == cpus("0-23,48-71") and t.gpu(9).cpu_affinity is None
    assert t.link("GPU2", "mlx5_1").kind is LinkKind.PIX


def test_a_row_cut_mid_way_is_kept_and_flagged() -> None:
    text = require_shared("nvidia-smi", "topo-8x-h100-sxm-nv18-no-nics-spaces.txt").read_text()
    lines = text.splitlines()
    cut = "\n".join(lines[:3] + [lines[3][:30]])  # GPU2's row stops after a few cells
    with pytest.warns(SmiParseWarning):
        t = parse_topo_matrix(cut)
    assert not t.complete and t.link(2, 1).short == "NV18" and t.gpu(2).cpu_affinity is None


@pytest.mark.parametrize(
    ("mangle", "quoted"),
    [
        (lambda s: s.replace("NV18", "NV18x", 1), "NV18x"),
        (lambda s: s.replace("NV18", "FOO", 1), "FOO"),
        (lambda s: s.replace("0-47,96-143", "0-47,zz", 1), "0-47,zz"),
        (lambda s: s.replace("GPU NUMA ID", "GPU NUMA IDX", 1), "X"),
        (lambda s: s.replace("Legend:", "Legend:\nsomething odd here", 1), "something odd here"),
    ],
)
def test_unknown_tokens_are_parse_errors_quoting_them(mangle: object, quoted: str) -> None:
    text = require_shared("nvidia-smi", "topo-8x-h100-sxm-nv18-no-nics-spaces.txt").read_text()
    with pytest.raises(ParseError) as info:
        parse_topo_matrix(mangle(text))  # type: ignore[operator]
    assert quoted in str(info.value)


def test_asymmetric_matrix_is_rejected() -> None:
    text = require_shared("nvidia-smi", "topo-2x-gtx1080ti-pcie-phb.txt").read_text()
    bad = text.replace("GPU1    PHB", "GPU1    SYS", 1)
    with pytest.raises(ParseError, match="not symmetric"):
        parse_topo_matrix(bad)


def test_p2p_matrix_is_told_apart() -> None:
    text = require_shared("nvidia-smi", "topo-p2p-rw-2x-rtx3090.txt").read_text()
    assert sniff(text) == "topo-p2p"
    assert parse_topo_p2p(text) == {(0, 1): "OK", (1, 0): "OK"}
    with pytest.raises(ParseError, match="topo -p2p"):
        parse_topo_matrix(text)


def test_empty_and_garbage_inputs() -> None:
    for bad in ("", "   \n\n", "hello world", "GPU0\n"):
        with pytest.raises(ParseError):
            parse_topo_matrix(bad)
