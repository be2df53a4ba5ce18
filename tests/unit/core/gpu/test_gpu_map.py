"""The GPU map (per task, per GPU: every name of the GPU) on recorded real ``nvidia-smi -L`` output with UUIDs in
``CUDA_VISIBLE_DEVICES``, and its traps on constructed inputs with known answers (issue 15, GPU identity)."""

from __future__ import annotations

import re
from pathlib import Path
from types import SimpleNamespace

import pytest
from shared_paths import require_shared

import slurmlab
from slurmlab.core.gpu.binding import (
    FAR_SOCKET,
    NO_NVLINK,
    PER_TASK_GPUS,
    SPLIT_NUMA,
    NodeRecord,
    TaskReport,
    explain,
)
from slurmlab.core.gpu.devices import Gpu
from slurmlab.core.gpu.node_models import NodeTopology
from slurmlab.core.gpu.smi.topo import parse_topo_matrix
from slurmlab.core.gpu.topology import Topology
from slurmlab.errors import AllocationError
from slurmlab.slurm.allocation import Allocation

GPU_LINE = re.compile(r"^\s*GPU (\d+): (.+) \(UUID: (GPU-[^)]+)\)")
MIG_LINE = re.compile(r"^\s*MIG (\S+)\s+Device\s+(\d+): \(UUID: (MIG-[^)]+)\)")


def _capture(name: str) -> str:
    return Path(require_shared("nvidia-smi", name)).read_text()


def _gpus_of(listing: str) -> dict[int, tuple[str, str]]:
    """GPU number -> (name, UUID), read from the capture by the test's own pattern."""
    return {int(m.group(1)): (m.group(2), m.group(3)) for m in map(GPU_LINE.match, listing.splitlines()) if m}


def _migs_of(listing: str) -> list[tuple[int, str, str]]:
    """(parent GPU number, profile, MIG UUID) of every MIG line, in order."""
    out, parent = [], -1
    for line in listing.splitlines():
        g, m = GPU_LINE.match(line), MIG_LINE.match(line)
        if g:
            parent = int(g.group(1))
        elif m:
            out.append((parent, m.group(1), m.group(3)))
    return out


def _dgx_a100() -> Topology:
    """A real DGX A100 matrix (8 GPUs, NV12 all pairs, NUMA 3/1/7/5) carrying the real -L capture's UUIDs."""
    topo = parse_topo_matrix(_capture("topo-dgx-a100-mlx5-header-numa-3175.txt"))
    listing = _capture("smi-L-dgx-a100-8gpu-mixed-mig-r470-migguide.txt")
    return topo.with_gpu_details({i: (name, uuid) for i, (name, uuid) in _gpus_of(listing).items()})


def test_gpu_uuids_in_cuda_visible_devices_resolve_to_the_nodes_gpus() -> None:
    # Slurm 26.05 env_uuid with --gpus-per-task=1 under ConstrainDevices: each task's CUDA_VISIBLE_DEVICES holds
    # its GPU's UUID and its own nvidia-smi -L lists that GPU alone, numbered 0
    topo = _dgx_a100()
    uuids = _gpus_of(_capture("smi-L-dgx-a100-8gpu-mixed-mig-r470-migguide.txt"))
    entry = NodeTopology(topo, "nvidia-smi", "nvidia-smi topo -m on n1", "n1", (2, 5), (2, 5))
    reports = [
        TaskReport(
            r,
            "n1",
            (2, 5),
            (uuids[g][1],),
            frozenset(topo.gpu(g).cpu_affinity or ()),
            256,
            f"GPU 0: {uuids[g][0]} (UUID: {uuids[g][1]})",
        )
        for r, g in enumerate((2, 5))
    ]
    table = explain(reports, {"n1": entry}, [NodeRecord("n1", (2, 5), None)], job_id="7")
    assert [(g.rank, g.idx, g.seen_as, g.uuid, g.gpu) for g in table.gpu_rows] == [
        (0, 2, 0, uuids[2][1], 2),
        (1, 5, 0, uuids[5][1], 5),
    ]
    assert [g.numa for g in table.gpu_rows] == [
        ",".join(map(str, sorted(topo.gpu(i).numa_affinity or ()))) for i in (2, 5)
    ]
    # the two GPUs are joined by NVLink (NV12 on a DGX A100), so each is the other's peer
    assert table.gpu_rows[0].peers == ((5, topo.nvlinks(2, 5)),) and topo.nvlinks(2, 5) > 0
    assert [r.gpus for r in table.rows] == [(2,), (5,)]
    (trap,) = [t for t in table.traps if t.kind == PER_TASK_GPUS]
    assert (
        "CUDA peer access and IPC" in trap.why
        and "nccl-tests#300" in trap.why
        and "SLURM_LOCALID" in trap.fix
    )
    text = table.text()
    assert uuids[5][1] in text and "cuda:0" in text and "TRAP per-task-GPUs" in text


def test_a_cgroup_per_task_numbers_each_tasks_gpu_0_and_its_own_listing_names_it() -> None:
    # --gpus-per-task=1 with a device cgroup per task: both tasks read CUDA_VISIBLE_DEVICES=0, and what 0 is shows
    # only in each task's own nvidia-smi -L
    topo = _dgx_a100()
    uuids = _gpus_of(_capture("smi-L-dgx-a100-8gpu-mixed-mig-r470-migguide.txt"))
    entry = NodeTopology(topo, "nvidia-smi", "nvidia-smi topo -m on n1", "n1", (3, 6), (3, 6))
    reports = [
        TaskReport(r, "n1", (3, 6), ("0",), None, None, f"GPU 0: {uuids[g][0]} (UUID: {uuids[g][1]})")
        for r, g in enumerate((3, 6))
    ]
    table = explain(reports, {"n1": entry}, [NodeRecord("n1", (3, 6), None)])
    assert [(g.idx, g.seen_as, g.token, g.uuid) for g in table.gpu_rows] == [
        (3, 0, "0", uuids[3][1]),
        (6, 0, "0", uuids[6][1]),
    ]
    assert [t.kind for t in table.traps] == [PER_TASK_GPUS]


def test_mig_uuids_in_cuda_visible_devices_resolve_to_their_parent_gpu() -> None:
    # Slurm 25.11 puts MIG-<uuid> in CUDA_VISIBLE_DEVICES; each task's -L shows the slices it may use
    listing = _capture("smi-L-dgx-a100-8gpu-mixed-mig-r470-migguide.txt")
    topo = _dgx_a100()
    migs = _migs_of(listing)
    assert len(migs) > 8
    reports = [
        TaskReport(r, "n1", (r,), (uuid,), None, None, listing) for r, (_p, _prof, uuid) in enumerate(migs)
    ]
    table = explain(reports, {"n1": topo}, [], job_id="8")
    for row, (parent, profile, uuid) in zip(table.gpu_rows, migs, strict=True):
        assert (row.uuid, row.gpu, row.idx) == (uuid, parent, row.rank)
        assert row.mig is not None and profile in row.mig and row.peers == ()
        assert row.numa == ",".join(map(str, sorted(topo.gpu(parent).numa_affinity or ())))
    assert "none (MIG slice)" in table.text()


def test_an_h100_mig_uuid_names_its_slice_on_a_one_gpu_node() -> None:
    listing = _capture("smi-L-h100-80gb-hbm3-ci-uuids-r570-migguide.txt")
    ((name, gpu_uuid),) = _gpus_of(listing).values()
    topo = Topology((Gpu(0, "GPU0", frozenset(range(32)), frozenset({0})),)).with_gpu_details(
        {0: (name, gpu_uuid)}
    )
    one_g = [m for m in _migs_of(listing) if m[1].startswith("1g.")]
    task = TaskReport(0, "n1", (3,), (one_g[0][2],), frozenset({1}), 64, listing)
    (row,) = explain([task], {"n1": topo}, [NodeRecord("n1", (3,), None)]).gpu_rows
    assert (row.idx, row.seen_as, row.uuid, row.gpu, row.numa) == (3, 0, one_g[0][2], 0, "0")
    assert row.mig is not None and one_g[0][1] in row.mig and gpu_uuid in row.mig


def test_a_uuid_no_source_names_says_so_and_how_to_find_it() -> None:
    topo = _dgx_a100()
    task = TaskReport(0, "n1", (0, 1, 2), ("GPU-00000000-dead-beef-0000-000000000000",), frozenset({0}), 256)
    table = explain([task], {"n1": topo}, [])
    (row,) = table.gpu_rows
    assert row.idx is None and row.numa == "?"
    note = next(n for n in table.notes if "GPU-00000000-dead" in n)
    assert "matches no GPU of the node" in note and "nvidia-smi -L" in note


def test_pci_bus_ids_come_from_the_tasks_query() -> None:
    topo = _dgx_a100()
    uuids = _gpus_of(_capture("smi-L-dgx-a100-8gpu-mixed-mig-r470-migguide.txt"))
    pci = tuple((uuids[i][1], f"00000000:{0x07 + 0x10 * i:02X}:00.0") for i in range(8))
    task = TaskReport(0, "n1", (0, 1), (uuids[0][1], uuids[1][1]), frozenset({0}), 256, None, pci)
    rows = explain([task], {"n1": topo}, []).gpu_rows
    assert [(g.idx, g.pci_bus_id) for g in rows] == [(0, pci[0][1]), (1, pci[1][1])]


# ---- traps on the DGX H100 profile (GPUs 0-3: NUMA 0, CPUs 0-55; GPUs 4-7: NUMA 1, CPUs 56-111) --------------

DGX = slurmlab.topology(profile="dgx-h100")


def _task(rank: int, step: tuple[int, ...], visible: str | None, mask: set[int]) -> TaskReport:
    return TaskReport(rank, "n1", step, tuple(visible.split(",")) if visible else None, frozenset(mask), 224)


def test_a_gpu_on_the_far_socket_is_a_trap_with_its_fix() -> None:
    table = explain([_task(0, (4,), "4", {0, 1})], {"n1": DGX}, [NodeRecord("n1", (4,), frozenset({0, 1}))])
    (trap,) = table.traps
    assert trap.kind == FAR_SOCKET and trap.ranks == (0,)
    assert "runs on CPUs 0-1" in trap.why and "NUMA 1" in trap.why and "socket link" in trap.why
    assert "--gpu-bind=closest" in trap.fix
    assert "slurmlab-trap" in table._repr_html_() and "#FDECEA" in table._repr_html_()
    near = explain([_task(0, (4,), "4", {60})], {"n1": DGX}, [NodeRecord("n1", (4,), frozenset({60}))])
    assert near.traps == () and "no known trap found" in near.text()


def test_one_tasks_gpus_on_two_numa_nodes_is_a_trap() -> None:
    table = explain([_task(0, (0, 4), "0,4", set(range(112)))], {"n1": DGX}, [])
    kinds = [t.kind for t in table.traps]
    assert kinds == [SPLIT_NUMA]
    assert "2 NUMA nodes" in table.traps[0].why and "--gpus-per-socket" in table.traps[0].fix
    # the whole table: Slurm IDX, the index the task sees, NUMA, peers over NVSwitch (NV18)
    assert [(g.idx, g.seen_as, g.numa, g.peers) for g in table.gpu_rows] == [
        (0, 0, "0", ((4, 18),)),
        (4, 1, "1", ((0, 18),)),
    ]


def test_per_task_gpus_hide_the_peers_and_all_gpus_per_task_do_not() -> None:
    split = explain(
        [_task(0, (0, 1), "0", {0}), _task(1, (0, 1), "1", {1})],
        {"n1": DGX},
        [NodeRecord("n1", (0, 1), frozenset({0, 1}))],
    )
    assert [t.kind for t in split.traps] == [PER_TASK_GPUS] and split.traps[0].ranks == (0, 1)
    assert "ompi#11949" in split.traps[0].why and "--gpus-per-node" in split.traps[0].fix
    shared = explain(
        [_task(0, (0, 1), "0,1", {0}), _task(1, (0, 1), "0,1", {1})],
        {"n1": DGX},
        [NodeRecord("n1", (0, 1), frozenset({0, 1}))],
    )
    assert shared.traps == ()
    # both tasks given the same one GPU of the job's two (a step that got one GPU): nothing hidden between them
    one = explain(
        [_task(0, (0,), "0", {0}), _task(1, (0,), "0", {1})],
        {"n1": DGX},
        [NodeRecord("n1", (0, 1), frozenset({0, 1}))],
    )
    assert one.traps == ()


def test_gpus_without_nvlink_when_nvlink_gpus_were_free_is_a_trap() -> None:
    # DGX-1 V100 hybrid cube mesh (real capture): some pairs have no NVLink at all
    v100 = parse_topo_matrix(_capture("topo-dgx1-v100-8gpu-4mlx5-tabs.txt"))
    a, b = next(
        (x.index, y.index)
        for x in v100.gpus
        for y in v100.gpus
        if x.index < y.index and v100.nvlinks(x.index, y.index) == 0
    )
    joined = next(
        (x.index, y.index)
        for x in v100.gpus
        for y in v100.gpus
        if x.index < y.index and v100.nvlinks(x.index, y.index) > 0 and {x.index, y.index} & {a, b} == set()
    )
    cpus = set(v100.gpu(a).cpu_affinity or ()) | set(v100.gpu(b).cpu_affinity or ())
    reports = [_task(0, (a, b), f"{a},{b}", cpus)]
    free = {"n1": frozenset({a, b, *joined})}
    table = explain(reports, {"n1": v100}, [NodeRecord("n1", (a, b), None)], free_gpus=free)
    (trap,) = [t for t in table.traps if t.kind == NO_NVLINK]
    assert f"no NVLink between {a}-{b}" in trap.why and "were free" in trap.why and "best_gpus(2)" in trap.fix
    # nothing better was free: no trap
    alone = explain(
        reports, {"n1": v100}, [NodeRecord("n1", (a, b), None)], free_gpus={"n1": frozenset({a, b})}
    )
    assert NO_NVLINK not in [t.kind for t in alone.traps]
    # a PCIe-only node (the seed profile) has nothing better to offer
    seed = slurmlab.topology(profile="seed")
    flat = explain(
        [_task(0, (0, 1), "0,1", {0})], {"n1": seed}, [], free_gpus={"n1": frozenset({0, 1, 2, 3})}
    )
    assert NO_NVLINK not in [t.kind for t in flat.traps]


def test_the_gpu_map_of_an_allocation_that_is_not_running_says_to_wait() -> None:
    pending = SimpleNamespace(running=False, state="PENDING", job_id="41")
    with pytest.raises(AllocationError) as caught:
        Allocation.gpu_map(pending)  # type: ignore[arg-type]
    assert "allocation 41 is PENDING, not RUNNING" in str(caught.value) and "alloc.wait()" in str(
        caught.value
    )
