"""The CPUs a provisioned kernel's step asks for (issue 30): the job's CPUs on the node the step runs on, as Slurm
reports them, not the job's CPUs shared evenly over its nodes. Replayed from a real Slurm 22.05
(``scripts/record_kernel_cpus.py``): two jobs of three tasks over two nodes, 2 CPUs on the first and 1 on the
second, one with a GPU per node and one with no GRES at all (whose node blocks name no GRES, so it has no
``gpu_allocs``: its CPUs per node are in ``node_resources``)."""

from __future__ import annotations

import json
from collections.abc import Iterator
from dataclasses import dataclass, replace

import pytest

from slurmlab.core.slurm.models import Job, NodeResources
from slurmlab.core.slurm.parse_json import parse_jobs_json
from slurmlab.core.slurm.parse_text import parse_scontrol_nodes
from slurmlab.provisioner.provisioner import kernel_cpus
from slurmlab.slurm.allocation import Allocation
from slurmlab.slurm.kernel_steps import kernel_step_argv
from slurmlab.slurm.poller import JobPoller
from slurmlab.testing import FakeRunner, recorded

UNEVEN = "22.05/kernel_cpus"


@dataclass(frozen=True)
class Scene:
    """One recorded job: its detail (text), its JSON (22.05: ``squeue --json``), its kernel step with the first
    node's 2 CPUs (run) and with 3 (refused)."""

    detail: str
    as_json: str
    taken: str
    refused: str


SCENES = {
    "gpu": Scene(
        f"{UNEVEN}/k02_scontrol_show_job_d.txt",
        f"{UNEVEN}/k03_squeue_json.json",
        f"{UNEVEN}/k04_kernel_step_2_cpus.txt",
        f"{UNEVEN}/k05_kernel_step_3_cpus.txt",
    ),
    "cpu_only": Scene(
        f"{UNEVEN}/k12_scontrol_show_job_d_cpu_only.txt",
        f"{UNEVEN}/k13_squeue_json_cpu_only.json",
        f"{UNEVEN}/k14_kernel_step_2_cpus_cpu_only.txt",
        f"{UNEVEN}/k15_kernel_step_3_cpus_cpu_only.txt",
    ),
}
NODES = f"{UNEVEN}/k20_scontrol_show_node_d.txt"


def _allocation(scene: Scene) -> Iterator[Allocation]:
    """The recorded job as the provisioner holds it once it runs: its detail read from Slurm."""
    fake = FakeRunner()
    fake.replay(f"{UNEVEN}/k00_sinfo_version.txt", scene.detail)
    argv = recorded(scene.detail).argv
    assert argv is not None
    poller = JobPoller(fake, interval=3600)  # never started: refresh() reads the detail itself
    try:
        yield Allocation(argv[-1], runner=fake, poller=poller, release_at_exit=False).refresh()
    finally:
        poller.stop()
        fake.close()


@pytest.fixture
def uneven() -> Iterator[Allocation]:
    yield from _allocation(SCENES["gpu"])


@pytest.fixture
def cpu_only() -> Iterator[Allocation]:
    yield from _allocation(SCENES["cpu_only"])


@pytest.fixture(params=list(SCENES))
def scene(request: pytest.FixtureRequest) -> Iterator[tuple[Scene, Allocation]]:
    chosen = SCENES[request.param]
    for alloc in _allocation(chosen):
        yield chosen, alloc


def _json_job(scene: Scene, alloc: Allocation, *, with_nodes: bool = True) -> Job:
    """The same job read from the recorded JSON (22.05's squeue lists every job: the one of this scene is
    taken), with the recorded node records (their cores per socket) or without."""
    nodes = parse_scontrol_nodes(recorded(NODES).stdout) if with_nodes else None
    jobs = parse_jobs_json(json.loads(recorded(scene.as_json).stdout), nodes=nodes)
    return next(j for j in jobs if str(j.job_id) == alloc.job_id)


def test_the_kernel_asks_for_the_first_nodes_cpus_not_an_even_share(uneven: Allocation) -> None:
    job = uneven.job
    assert job is not None and uneven.state == "RUNNING"
    # what Slurm made of -N2 -n3: three CPUs, two on the first node; an even share would be 3 // 2 = 1
    assert job.num_cpus == 3 and len(uneven.nodes) == 2
    assert kernel_cpus(uneven) == 2


def test_a_job_with_no_gres_asks_for_its_first_nodes_cpus_too(cpu_only: Allocation) -> None:
    """The same spread without GPUs: its node blocks say ``GRES=`` (nothing), so it has no GresAlloc (an empty
    one would read as a GPU allocation), yet every block's CPU_IDs and memory are kept, and the kernel asks for
    the first node's two CPUs, not 3 // 2 = 1."""
    job = cpu_only.job
    assert job is not None and cpu_only.state == "RUNNING"
    assert job.num_cpus == 3 and list(cpu_only.nodes) == ["node1", "node2"]
    assert job.gpu_allocs == ()
    assert job.node_resources == (
        NodeResources("node1", cpu_ids="0,56", mem_mb=2000),
        NodeResources("node2", cpu_ids="0", mem_mb=1000),
    )
    assert job.resources_on("node1") == job.node_resources[0] and job.resources_on("node3") is None
    assert kernel_cpus(cpu_only) == 2


def test_the_step_so_built_is_the_one_slurm_ran_on_the_first_node_and_one_cpu_more_is_refused(
    scene: tuple[Scene, Allocation],
) -> None:
    """The recorded kernel step with 2 CPUs is the one the provisioner now builds (a shell in place of the kernel):
    Slurm ran it on the allocation's first node. The same step with 3 CPUs, refused by Slurm, shows that 2 are all
    the first node holds: the kernel asks for no fewer and no more. With GPUs and without."""
    recording, alloc = scene
    taken, refused = recorded(recording.taken), recorded(recording.refused)
    assert taken.argv is not None and refused.argv is not None
    command = list(taken.argv[-3:])
    cpus = kernel_cpus(alloc)
    assert kernel_step_argv(alloc.job_id or "", cpus, command, chdir="/") == list(taken.argv)
    assert taken.returncode == 0 and taken.stdout == f"node={alloc.nodes[0]}\n"
    assert cpus is not None
    assert kernel_step_argv(alloc.job_id or "", cpus + 1, command, chdir="/") == list(refused.argv)
    assert refused.returncode != 0 and "More processors requested than permitted" in refused.stderr


def test_the_json_form_keeps_the_same_cpus_per_node_as_the_text(scene: tuple[Scene, Allocation]) -> None:
    """22.05's JSON of the same job (openapi v0.0.38 ``job_resources``: the allocated cores per socket), read with
    the recorded node records, gives every node the CPU_IDs and memory the text's blocks give, GRES or not, and
    the kernel the same two CPUs."""
    recording, alloc = scene
    text_job = alloc.job
    assert text_job is not None
    json_job = _json_job(recording, alloc)
    assert json_job.node_resources == text_job.node_resources
    assert [r.node for r in json_job.node_resources] == list(alloc.nodes)
    assert [a.items for a in json_job.gpu_allocs] == [a.items for a in text_job.gpu_allocs]
    alloc.job = json_job
    assert kernel_cpus(alloc) == 2


def test_json_cores_past_socket_0_with_no_node_records_are_no_figure(cpu_only: Allocation) -> None:
    """Without the node records, v0.0.38's core 0 of socket 1 (CPU 56 on a node of 56 cores per socket) cannot
    be numbered: the first node's CPU_IDs stay unknown (its memory is known), and the kernel takes the even
    share, as where Slurm gives no figure."""
    json_job = _json_job(SCENES["cpu_only"], cpu_only, with_nodes=False)
    first = json_job.resources_on("node1")
    assert first == NodeResources("node1", cpu_ids=None, mem_mb=2000)
    cpu_only.job = json_job
    assert kernel_cpus(cpu_only) == 1


def test_a_cpu_list_slurm_would_not_print_falls_back_to_the_even_share(uneven: Allocation) -> None:
    """An unreadable CPU_IDs (a hand-corrupted copy of the recorded one) is no figure: the job's CPUs over its
    nodes, as where Slurm gives none, and no traceback."""
    job = uneven.job
    assert job is not None
    first, first_gres = job.resources_on(uneven.nodes[0]), job.alloc_on(uneven.nodes[0])
    assert first is not None and first_gres is not None
    corrupt = replace(job, node_resources=tuple(replace(r, cpu_ids="0-1x") for r in job.node_resources))
    uneven.job = corrupt
    assert kernel_cpus(uneven) == 1
    # a job built with its CPU_IDs beside its GRES only (no node_resources) still gives the node's figure
    uneven.job = replace(job, node_resources=())
    assert kernel_cpus(uneven) == 2
    uneven.job = replace(job, node_resources=(), gpu_allocs=())  # no per-node block at all
    assert kernel_cpus(uneven) == 1
