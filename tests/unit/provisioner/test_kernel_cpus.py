"""The CPUs a provisioned kernel's step asks for (issue 30): the job's CPUs on the node the step runs on, as Slurm
reports them, not the job's CPUs shared evenly over its nodes. Replayed from a real Slurm 22.05: a job of three
tasks over two nodes, 2 CPUs on the first and 1 on the second (``scripts/record_kernel_cpus.py``)."""

from __future__ import annotations

from collections.abc import Iterator
from dataclasses import replace

import pytest

from slurmlab.provisioner.provisioner import kernel_cpus
from slurmlab.slurm.allocation import Allocation
from slurmlab.slurm.kernel_steps import kernel_step_argv
from slurmlab.slurm.poller import JobPoller
from slurmlab.testing import FakeRunner, recorded

UNEVEN = "22.05/kernel_cpus"
DETAIL = f"{UNEVEN}/k02_scontrol_show_job_d.txt"
STEPS = f"{UNEVEN}/k04_kernel_step_2_cpus.txt", f"{UNEVEN}/k05_kernel_step_3_cpus.txt"


@pytest.fixture
def uneven() -> Iterator[Allocation]:
    """The recorded job as the provisioner holds it once it runs: its detail read from Slurm."""
    fake = FakeRunner()
    fake.replay(f"{UNEVEN}/k00_sinfo_version.txt", DETAIL)
    argv = recorded(DETAIL).argv
    assert argv is not None
    poller = JobPoller(fake, interval=3600)  # never started: refresh() reads the detail itself
    try:
        yield Allocation(argv[-1], runner=fake, poller=poller, release_at_exit=False).refresh()
    finally:
        poller.stop()
        fake.close()


def test_the_kernel_asks_for_the_first_nodes_cpus_not_an_even_share(uneven: Allocation) -> None:
    job = uneven.job
    assert job is not None and uneven.state == "RUNNING"
    # what Slurm made of -N2 -n3: three CPUs, two on the first node; an even share would be 3 // 2 = 1
    assert job.num_cpus == 3 and len(uneven.nodes) == 2
    assert kernel_cpus(uneven) == 2


def test_the_step_so_built_is_the_one_slurm_ran_on_the_first_node_and_one_cpu_more_is_refused(
    uneven: Allocation,
) -> None:
    """The recorded kernel step with 2 CPUs is the one the provisioner now builds (a shell in place of the kernel):
    Slurm ran it on the allocation's first node. The same step with 3 CPUs, refused by Slurm, shows that 2 are all
    the first node holds: the kernel asks for no fewer and no more."""
    taken, refused = recorded(STEPS[0]), recorded(STEPS[1])
    assert taken.argv is not None and refused.argv is not None
    command = list(taken.argv[-3:])
    cpus = kernel_cpus(uneven)
    assert kernel_step_argv(uneven.job_id or "", cpus, command, chdir="/") == list(taken.argv)
    assert taken.returncode == 0 and taken.stdout == f"node={uneven.nodes[0]}\n"
    assert cpus is not None
    assert kernel_step_argv(uneven.job_id or "", cpus + 1, command, chdir="/") == list(refused.argv)
    assert refused.returncode != 0 and "More processors requested than permitted" in refused.stderr


def test_a_cpu_list_slurm_would_not_print_falls_back_to_the_even_share(uneven: Allocation) -> None:
    """An unreadable CPU_IDs (a hand-corrupted copy of the recorded one) is no figure: the job's CPUs over its
    nodes, as where Slurm gives none, and no traceback."""
    job = uneven.job
    assert job is not None
    first = job.alloc_on(uneven.nodes[0])
    assert first is not None
    corrupt = replace(first, cpu_ids="0-1x")
    uneven.job = replace(job, gpu_allocs=tuple(corrupt if a is first else a for a in job.gpu_allocs))
    assert kernel_cpus(uneven) == 1
    uneven.job = replace(job, gpu_allocs=())  # no per-node block at all
    assert kernel_cpus(uneven) == 1
