"""Requests larger than any node or than the partition are refused before submit, with the numbers and the fix
(issue 13, point 8: ``-n 1000`` on a 224-CPU partition was submitted and pended for ever with PartitionConfig).

The cluster is the recorded dgx-h100 one (tests/data/slurm: node1-2, 112 CPUs, 2000 GiB, 8 x h100 each, one
partition gpu), read from each version's recordings as slurmlab reads a cluster; one mixed cluster checks the
counting in whole tasks per node.
"""

from __future__ import annotations

import shlex

import pytest
from fake_slurm import golden_inventory

from slurmlab.core.request.capacity_checks import task_shape, tasks_fitting
from slurmlab.core.request.inventory import ClusterInventory, NodeInventory
from slurmlab.core.request.request import RequestProblems, parse_request
from slurmlab.core.request.validate import validate
from slurmlab.errors import RequestError

VERSIONS = ("22.05", "24.11", "26.05")


def refused(line: str, inv: ClusterInventory) -> list[tuple[str, str]]:
    with pytest.raises(RequestError) as info:
        validate(parse_request(shlex.split(line)), inv)
    assert isinstance(info.value, RequestProblems)
    return [(p.message, p.hint) for p in info.value.problems]


def accepted(line: str, inv: ClusterInventory) -> None:
    validate(parse_request(shlex.split(line)), inv)


@pytest.mark.parametrize("version", VERSIONS)
@pytest.mark.parametrize(
    ("line", "message", "hint"),
    [
        # tasks: the issue's own mistake
        (
            "-n 1000 --gpus=1 -t 5",
            "--ntasks=1000 asks for 1000 tasks of 1 CPU = 1000 CPUs; partition 'gpu' has "
            "224 CPUs in 2 nodes (112 each)",
            "ask for at most -n 224, or add -O (--overcommit)",
        ),
        # -n x -c, counted in whole tasks per node: 112 // 12 = 9 on each node
        ("-n 20 -c 12", "20 tasks of 12 CPUs = 240 CPUs; partition 'gpu' has 224 CPUs", "at most -n 18"),
        (
            "-N 1 -n 200",
            "-N 1 gives at most 112 CPUs of partition 'gpu'",
            "at most -n 112, or more nodes (-N; the partition has 2)",
        ),
        # CPUs per task
        (
            "-c 113",
            "--cpus-per-task=113 = 113 CPUs per node: no node of partition 'gpu' has more than 112",
            "at most 112 CPUs",
        ),
        (
            "-n 2 --gpus-per-task=2 --cpus-per-gpu=64",
            "--cpus-per-gpu=64 x --gpus-per-task=2 = 128 CPUs per task: "
            "a task's CPUs sit on one node, and no node of partition 'gpu' has more than 112",
            "--cpus-per-gpu=56",
        ),
        (
            "--gpus=16 --cpus-per-gpu=20",
            "--gpus=16 with --cpus-per-gpu=20: the nodes of partition 'gpu' have the CPUs for only 10 GPUs",
            "at most --gpus=10",
        ),
        (
            "--gpus-per-node=8 --cpus-per-gpu=20",
            "--cpus-per-gpu=20 x --gpus-per-node=8 = 160 CPUs per node",
            "at most 112 CPUs per node",
        ),
        (
            "--ntasks-per-node=113",
            "--ntasks-per-node=113 = 113 CPUs per node: no node of partition 'gpu' has more than 112",
            "at most --ntasks-per-node=112, or add -O",
        ),
        # memory
        (
            "--mem=3T",
            "--mem=3T: no node of partition 'gpu' has that much memory (the most is 2048000 MiB)",
            "--mem=2048000M",
        ),
        (
            "-c 100 --mem-per-cpu=30G",
            "--mem-per-cpu=30G x 100 CPUs = 3000 GiB per task: no node of partition "
            "'gpu' has that much memory (the most is 2048000 MiB)",
            "at most --mem-per-cpu=20480M",
        ),
        (
            "-n 4 --mem-per-cpu=1500G",
            "--ntasks=4 x --mem-per-cpu=1500G = 6000 GiB: partition 'gpu' has 4000 GiB "
            "of memory in 2 nodes (2048000 MiB each), room for 2 such tasks",
            "at most -n 2",
        ),
        (
            "-n 2 --gpus-per-task=1 --mem-per-gpu=2500G",
            "--mem-per-gpu=2500G = 2500 GiB per task: no node",
            "at most --mem-per-gpu=2048000M",
        ),
        (
            "--gpus=16 --mem-per-gpu=300G",
            "--gpus=16 with --mem-per-gpu=300G: the nodes of partition 'gpu' have "
            "the memory for only 12 GPUs",
            "at most --gpus=12",
        ),
        (
            "--ntasks-per-node=4 --mem-per-cpu=600G",
            "--ntasks-per-node=4 x --mem-per-cpu=600G = 2400 GiB per node",
            "at most --ntasks-per-node=3",
        ),
        # GPUs per task and per node
        (
            "-n 1 --gpus-per-task=9",
            "--gpus-per-task=9: a task's GPUs sit on one node, and no node of partition "
            "'gpu' has more than 8 GPUs",
            "at most --gpus-per-task=8, and more tasks (-n)",
        ),
        (
            "-n 5 --gpus-per-task=3",
            "--ntasks=5 x --gpus-per-task=3: a task's GPUs sit on one node, and the nodes "
            "of partition 'gpu' hold only 4 such tasks",
            "at most -n 4",
        ),
        (
            "--gpus-per-node=9",
            "--gpus-per-node=9: no node of partition 'gpu' has 9 GPUs (the most is 8",
            "at most 8 per node",
        ),
        (
            "-n 17 --gpus-per-task=1",
            "--gpus-per-task=1 x --ntasks=17: partition 'gpu' has only 16 GPUs in total",
            "at most 16",
        ),
        # nodes
        ("-N 3", "--nodes=3: partition 'gpu' has only 2 node(s)", "at most --nodes=2"),
    ],
)
def test_requests_too_big_for_the_partition_are_refused_with_the_numbers(
    version: str, line: str, message: str, hint: str
) -> None:
    inv, _ = golden_inventory(version)
    found = refused(line, inv)
    assert any(message in m and hint in h for m, h in found), found
    assert len(found) == 1, found  # one mistake, one problem: never the same one twice
    assert all("PartitionConfig" not in m for m, _ in found)


@pytest.mark.parametrize("version", VERSIONS)
@pytest.mark.parametrize(
    "line",
    [
        "-n 224",
        "-n 1000 -O",
        "-n 1000 --overcommit",
        "-n 18 -c 12",
        "-N 2 -n 16 --gpus-per-task=1",
        "-n 2 --gpus-per-task=2 --cpus-per-gpu=56",
        "--gpus=10 --cpus-per-gpu=20",
        "-c 112 --mem-per-cpu=17G",
        "-n 2 --mem-per-cpu=1500G",
        "--gpus=12 --mem-per-gpu=300G",
        "--ntasks-per-node=112",
        "-n 4 --gpus-per-task=3",
        "--gpus=2 --cpus-per-gpu=64",  # two GPUs may sit on two nodes: 64 CPUs on each
    ],
)
def test_requests_that_fit_pass(version: str, line: str) -> None:
    accepted(line, golden_inventory(version)[0])


def test_tasks_are_counted_whole_per_node_on_mixed_nodes() -> None:
    big = NodeInventory("big", cpus=64, memory_mb=256000, gpus={"h100": 4})
    small = NodeInventory("small", cpus=16, memory_mb=64000, gpus={"h100": 1})
    inv = ClusterInventory.build(nodes=[big, small], partitions={"p": ["big", "small"]}, default="p")
    shape = task_shape(parse_request(shlex.split("-n 1 -c 10 --mem-per-cpu=5G")))
    assert (shape.cpus, shape.mem_mib) == (10, 51200)
    assert tasks_fitting(big, shape) == 5 and tasks_fitting(small, shape) == 1  # memory, then CPUs bind
    assert tasks_fitting(big, shape, memory=False) == 6
    ((message, hint),) = refused("-n 7 -c 10 --mem-per-cpu=5G", inv)
    assert "room for 6 such tasks" in message and "2 nodes (256000 MiB, 64000 MiB)" in message
    assert "at most -n 6" in hint
    ((message, hint),) = refused("-n 100", inv)
    assert "partition 'p' has 80 CPUs in 2 nodes (64, 16)" in message and "at most -n 80" in hint
    accepted("-n 6 -c 10 --mem-per-cpu=5G", inv)


def test_a_node_of_unknown_size_gives_no_sure_answer() -> None:
    unknown = NodeInventory("n1", cpus=0, memory_mb=0)
    inv = ClusterInventory.build(nodes=[unknown], partitions={"p": ["n1"]}, default="p")
    accepted("-n 1000", inv)
