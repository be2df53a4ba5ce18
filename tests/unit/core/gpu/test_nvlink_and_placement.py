"""`nvidia-smi nvlink -s/-c` captures, NVLink generations, and choosing the best-connected GPUs."""

from __future__ import annotations

import pytest
from shared_paths import smi_capture as read

from slurmlab.core.gpu.nvlink import NVLINK_GENERATIONS, nvlink_generation_for_model
from slurmlab.core.gpu.placement import best_gpus
from slurmlab.core.gpu.smi import parse_nvlink_capabilities, parse_nvlink_status, parse_topo_matrix
from slurmlab.core.gpu.topology import Topology
from slurmlab.errors import ParseError, RequestError


@pytest.mark.parametrize(
    ("name", "gpus", "links", "per_link", "gen"),
    [
        ("nvlink-status-i0-h100-80gb-hbm3.txt", 1, 18, 26.562, "nvlink4"),
        ("nvlink-status-4x-a100-sxm4-80gb.txt", 4, 12, 25.0, "nvlink3"),
        ("nvlink-status-2x-rtx3090-nv4.txt", 2, 4, 14.062, "nvlink3-bridge"),
    ],
)
def test_nvlink_status_matches_the_generation_table(
    name: str, gpus: int, links: int, per_link: float, gen: str
) -> None:
    status = parse_nvlink_status(read(name))
    assert len(status) == gpus
    for s in status:
        assert s.active_links == links and {v for _, v in s.links} == {per_link}
        assert s.uuid.startswith("GPU-")
        assert nvlink_generation_for_model(s.model) is NVLINK_GENERATIONS[gen]
        assert NVLINK_GENERATIONS[gen].links_per_gpu == links
        assert NVLINK_GENERATIONS[gen].reported_gbps == per_link


def test_nvlink_status_details() -> None:
    (h100,) = parse_nvlink_status(read("nvlink-status-i0-h100-80gb-hbm3.txt"))
    assert h100.model == "NVIDIA H100 80GB HBM3" and h100.uuid == "GPU-5a10e6e5-95f7-2785-ed63-6f6147f304f7"
    assert round(h100.total_gbps, 3) == round(18 * 26.562, 3)
    a100 = parse_nvlink_status(read("nvlink-status-4x-a100-sxm4-80gb.txt"))
    assert [s.gpu for s in a100] == [0, 1, 2, 3] and a100[3].uuid.endswith("87f43f38025f")
    inactive = parse_nvlink_status("GPU 0: X (UUID: GPU-1)\n  Link 0: 25 GB/s\n  Link 1: <inactive>\n")
    assert inactive[0].active_links == 1 and inactive[0].links[1] == (1, None)
    with pytest.raises(ParseError, match="Link 0: fast"):
        parse_nvlink_status("GPU 0: X (UUID: GPU-1)\n  Link 0: fast\n")


def test_nvlink_capabilities() -> None:
    (caps,) = parse_nvlink_capabilities(read("nvlink-capabilities-i0-h100-80gb-hbm3.txt"))
    assert len(caps.capabilities) == 18 * 6
    assert {c for _, c, _ in caps.capabilities} >= {"P2P is supported", "P2P atomics supported"}
    assert {link for link, _, _ in caps.capabilities} == set(range(18))
    assert all(v for _, _, v in caps.capabilities)


def test_spec_bandwidth_per_generation() -> None:
    t = parse_topo_matrix(read("topo-8x-h100-sxm-nv18-no-nics-spaces.txt"), gpu_model="NVIDIA H100 80GB HBM3")
    assert t.bandwidth_gbps(0, 7) == 450.0 and t.bandwidth_gbps(0, 7, bidirectional=True) == 900.0
    a100 = parse_topo_matrix(read("topo-8x-a100-nv12-17nics-bond.txt"))
    assert a100.bandwidth_gbps(1, 2, bidirectional=True) == 600.0
    assert parse_topo_matrix(read("topo-2x-gtx1080ti-pcie-phb.txt")).bandwidth_gbps(0, 1) is None


def test_best_gpus_on_dgx1_picks_a_fully_nvlinked_quad_on_one_socket() -> None:
    t = parse_topo_matrix(read("topo-dgx1-v100-8gpu-4mlx5-tabs.txt"))
    four = best_gpus(t, 4)
    assert four.gpus in ((0, 1, 2, 3), (4, 5, 6, 7)) and four.all_nvlink and len(four.numa_groups) == 1
    assert four.nvlink_total == 9 and four.weakest_pair == "NV1"
    two = best_gpus(t, 2)
    assert t.nvlinks(*two.gpus) == 2  # an NV2 pair beats an NV1 pair
    five = best_gpus(t, 5)
    assert not five.all_nvlink and "no NUMA group holds 5" in five.explain()


def test_best_gpus_on_dgx_a100_prefers_one_numa_node() -> None:
    t = parse_topo_matrix(read("topo-dgx-a100-mlx5-header-numa-3175.txt"))
    pair = best_gpus(t, 2)
    assert pair.gpus == (0, 1) and pair.numa_groups == ("NUMA 3",) and "all on NUMA 3" in pair.explain()
    among = best_gpus(t, 2, available=[1, 2, 3, 5])
    assert among.gpus == (2, 3)  # both on NUMA 1, NV12 like every pair
    with pytest.raises(RequestError, match="cannot choose 9"):
        best_gpus(t, 9)
    with pytest.raises(RequestError, match="not in this topology"):
        best_gpus(t, 1, available=[11])


def test_best_gpus_power9_takes_the_nvlinked_pair() -> None:
    t = parse_topo_matrix(read("topo-4x-v100-power9-ac922-traverse-nv3-numa8.txt"))
    assert best_gpus(t, 2, available=[1, 2, 3]).gpus == (2, 3)


def test_best_gpus_greedy_on_a_large_topology() -> None:
    data = {
        "gpus": [{"index": i, "numa": i // 16, "cores": f"{i * 2}-{i * 2 + 1}"} for i in range(32)],
        "nvlink": {f"{i}-{i + 1}": 4 for i in range(0, 32, 2)},
        "gpu_model": "H100",
    }
    t = Topology.from_profile(data)
    choice = best_gpus(t, 12)
    assert not choice.exhaustive and len(choice.gpus) == 12 and "greedily" in choice.explain()
    assert len(choice.numa_groups) == 1


def test_gpu_details_from_a_listing() -> None:
    from slurmlab.core.gpu.smi import parse_smi_list

    t = parse_topo_matrix(read("topo-2x-rtx3090-nvlink-bridge-nv4.txt"))
    status = parse_nvlink_status(read("nvlink-status-2x-rtx3090-nv4.txt"))
    listing = "\n".join(f"GPU {s.gpu}: {s.model} (UUID: {s.uuid})" for s in status)
    devices, _ = parse_smi_list(listing)
    named = t.with_gpu_details({d.index: (d.name, d.uuid) for d in devices})
    assert named.gpu(1).uuid == "GPU-fef3f583-99bd-ac7f-c761-eddb679067e0"
    assert named.nvlink_generation is NVLINK_GENERATIONS["nvlink3-bridge"]
    assert named.bandwidth_gbps(0, 1) == 4 * 14.0625
    with pytest.raises(ParseError, match="not in the topology"):
        t.with_gpu_details({5: ("x", None)})
