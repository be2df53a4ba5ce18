"""A task whose CPUs span two NUMA nodes while its GPUs sit on one is the split-NUMA trap (issue 28 point 5).

Lesson 07's GPU map showed no trap for the job's CPUs 0-23,56-79 on a dgx-h100 node (two sockets of 56 cores)
with all four of its GPUs (IDX 0-3) on NUMA 0 beside CPUs 0-55.
"""

from __future__ import annotations

import slurmlab
from slurmlab.core.gpu.binding import FAR_SOCKET, SPLIT_NUMA, NodeRecord, TaskReport, explain

DGX = slurmlab.topology(profile="dgx-h100")
SPAN = frozenset(range(24)) | frozenset(range(56, 80))


def _task(rank: int, gpu: int, mask: frozenset[int], host_cpus: int) -> TaskReport:
    return TaskReport(rank, "n1", (gpu,), (str(gpu),), mask, host_cpus)


def test_a_tasks_own_cpus_over_two_sockets_beside_gpus_on_one_is_a_trap() -> None:
    table = explain([_task(0, 0, SPAN, 224)], {"n1": DGX}, [NodeRecord("n1", (0,), SPAN)])
    (trap,) = table.traps
    assert trap.kind == SPLIT_NUMA and trap.ranks == (0,)
    assert "task 0 on n1 runs on CPUs 0-23,56-79" in trap.why and "NUMA 0 beside CPUs 0-55" in trap.why
    assert "CPUs 56-79 are on NUMA 1" in trap.why and "--gres-flags=enforce-binding" in trap.fix
    # CPUs all beside the GPU: nothing; CPUs all on the far socket: the far-socket trap, not this one
    near = explain([_task(0, 0, frozenset(range(24)), 224)], {"n1": DGX}, [])
    assert near.traps == ()
    far = explain([_task(0, 0, frozenset(range(56, 80)), 224)], {"n1": DGX}, [])
    assert [t.kind for t in far.traps] == [FAR_SOCKET]


def test_the_sandbox_jobs_cpus_over_two_sockets_beside_four_gpus_on_one_is_one_trap() -> None:
    # lesson 07 on the sandbox: 4 ranks on the node, one GPU each (IDX 0-3), the job's CPU_IDs 0-23,56-79; the
    # tasks' real masks name the host's 2 CPUs, so the job's CPUs stand for them
    tasks = [_task(r, r, frozenset({0, 1}), 2) for r in range(4)]
    table = explain(tasks, {"n1": DGX}, [NodeRecord("n1", (0, 1, 2, 3), SPAN)], sandbox=True)
    split = [t for t in table.traps if t.kind == SPLIT_NUMA]
    assert len(split) == 1 and split[0].ranks == (0, 1, 2, 3), table.traps
    assert "the job's CPUs on n1, where tasks 0-3 run (Slurm's CPU_IDs), are 0-23,56-79" in split[0].why
    assert "(Slurm IDX 0-3) all sit on NUMA 0" in split[0].why and "CPUs 56-79 are on NUMA 1" in split[0].why


def test_job_cpus_over_two_sockets_with_gpus_on_both_is_no_trap() -> None:
    # lesson 06 on the sandbox: two tasks, GPUs 0 and 4 on both sockets, CPU_IDs 0 and 56: each socket has a GPU
    tasks = [_task(0, 0, frozenset({0}), 2), _task(1, 4, frozenset({1}), 2)]
    table = explain(tasks, {"n1": DGX}, [NodeRecord("n1", (0, 4), frozenset({0, 56}))], sandbox=True)
    assert [t for t in table.traps if t.kind == SPLIT_NUMA] == []
