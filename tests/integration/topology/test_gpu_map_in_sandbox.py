"""The GPU map of real allocations in the sandbox, on every hardware profile: each row's Slurm IDX is one Slurm
recorded, its UUID the one the node's (stand-in) ``nvidia-smi -L`` prints for that device, its PCI bus id and NUMA
node the profile's; and the per-task trap shows where each task holds its own GPU (issue 15, GPU identity)."""

from __future__ import annotations

import re
from typing import Any

import pytest

from slurmlab.core.gpu.binding import PER_TASK_GPUS
from slurmlab.slurm.allocation import Allocation
from slurmlab.slurm.hardware_files import sandbox_hardware
from slurmlab.slurm.poller import JobPoller
from tests.integration.sandbox_jobs import clear_queue

pytestmark = pytest.mark.sandbox

# profile -> (the request, whether its tasks each hold their own GPUs on one node)
CASES = {
    "dgx-h100": (["-n2", "--gpus-per-task=1", "-t", "5"], True),
    "h200-mig": (["-n1", "--gres=gpu:3g.71gb:1", "-t", "5"], False),
    "seed": (["-n2", "--gpus=2", "-t", "5"], False),
}
UUID = re.compile(r"\(UUID: ((?:GPU|MIG)-[0-9a-f-]+)\)")


@pytest.mark.parametrize("profile", sorted(CASES))
def test_the_gpu_map_names_every_gpu_as_slurm_and_nvidia_smi_do(sandbox_factory: Any, profile: str) -> None:
    sb = sandbox_factory(profile)
    runner = sb.runner()
    clear_queue(runner)
    request, per_task = CASES[profile]
    alloc = Allocation.submit(request, runner=runner, poller=JobPoller(runner))
    try:
        alloc.wait(timeout=60)
        table = alloc.gpu_map()
        held = {n: set(i) for n, i in alloc.refresh().gpus.items()}
        hw = sandbox_hardware(runner)
        assert hw is not None and table.gpu_rows, table.text()
        listed: Any = hw.profile["gpus"]
        gpus = {g["index"]: g for g in listed}
        for node in {g.node for g in table.gpu_rows}:
            # what the node's nvidia-smi -L prints in a step holding all the job's GPUs there
            listing = alloc.srun(
                ["nvidia-smi", "-L"],
                args=["--ntasks=1", f"--nodelist={node}", f"--gpus={len(held[node])}"],
                on_output=lambda *_: None,
                timeout=60,
            )
            printed = set(UUID.findall("\n".join(listing.stdout)))
            rows = [g for g in table.gpu_rows if g.node == node]
            for g in rows:
                assert g.idx in held[node], (g, held)
                assert g.uuid in printed, (g.uuid, listing.stdout)
                assert g.uuid is not None and g.uuid.startswith("MIG-" if g.mig else "GPU-")
                assert g.gpu is not None
                assert g.pci_bus_id == gpus[g.gpu]["pci_bus_id"]
                assert g.numa == str(gpus[g.gpu]["numa"])
                assert g.seen_as is not None and g.token is not None
        for rank in {g.rank for g in table.gpu_rows}:
            assert [g.seen_as for g in table.gpu_rows if g.rank == rank] == list(
                range(sum(g.rank == rank for g in table.gpu_rows))
            )
        assert (PER_TASK_GPUS in [t.kind for t in table.traps]) is per_task, table.text()
        if profile == "h200-mig":
            (row,) = table.gpu_rows
            assert row.mig is not None and "3g.71gb" in row.mig and row.peers == ()
        assert "GPU map of job" in table.text() and "slurmlab-gpu-map" in table._repr_html_()
    finally:
        alloc.cancel()
        clear_queue(runner)
