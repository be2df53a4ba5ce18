"""Plain-words explanations of GPU requests, for teaching."""

from __future__ import annotations

import shlex

import pytest

from slurmlab.core.request.explain import describe_gpu_type, explain
from slurmlab.core.request.request import parse_request


def say(line: str) -> str:
    return explain(parse_request(shlex.split(line)))


@pytest.mark.parametrize(
    ("line", "expected"),
    [
        (
            "-N 2 --gpus-per-node=2 --gpu-bind=closest --gres-flags=enforce-binding",
            "2 nodes, 2 GPUs per node (4 in total); each task bound to the GPUs nearest its CPUs; "
            "CPUs restricted to the cores next to those GPUs (gres.conf Cores=)",
        ),
        ("--gres=shard:4", "4 shards of one GPU: time-sliced with other jobs, no memory isolation"),
        ("--gres=shard:h100:1", "1 shard of one h100 GPU: time-sliced with other jobs, no memory isolation"),
        (
            "-p mig --gres=gpu:1g.18gb:1",
            "one MIG slice 1g.18gb (1/7 of the SMs and 1/8 of the memory); in partition mig",
        ),
        ("--gpus=3g.71gb:2", "2 MIG slices 3g.71gb (each 3/7 of the SMs and 1/2 of the memory)"),
        ("--gpus=7g.80gb:1", "one MIG slice 7g.80gb (all of the SMs and all of the memory)"),
        (
            "--gpus=1g.10gb:1",
            "one MIG slice 1g.10gb (1/7 of the SMs; its memory share depends on the GPU model)",
        ),
        ("--gpus=2", "2 GPUs"),
        ("-N 2 --gpus=h100:4", "2 nodes, 4 h100 GPUs in total"),
        (
            "-n 4 --gpus-per-task=1 --gpu-bind=single:1",
            "4 tasks, 1 GPU per task (4 in total); each task bound to a single GPU near it, 1 task per GPU",
        ),
        (
            "-n 2 --gpus-per-task=2 --gpu-bind=per_task:2",
            "2 tasks, 2 GPUs per task (4 in total); each task gets its own 2 GPUs",
        ),
        (
            "--gpus=2 --gpu-bind=none",
            "2 GPUs; no GPU binding: every task sees all of the job's GPUs on its node",
        ),
        (
            "--gpus=2 --gpu-bind=verbose,map_gpu:1,0",
            "2 GPUs; task i bound to GPU number i of the list 1,0 (Slurm prints the binding)",
        ),
        (
            "--gres=mps:50",
            "MPS share 50 of one GPU (with the usual 100 per GPU, 50% of its threads): other users' processes "
            "are time-sliced",
        ),
        ("-N 3 --gres=gpu:h100:2,fpga:1", "3 nodes, 2 h100 GPUs per node (6 in total), 1 fpga per node"),
        (
            "-p mig --gpus=3g.71gb:1 --cpus-per-gpu=4 --mem-per-gpu=8G -t 1:30:00",
            "one MIG slice 3g.71gb (3/7 of the SMs and 1/2 of the memory); 4 CPUs per GPU, 8 GiB memory per GPU; "
            "in partition mig, for 1 hour 30 minutes",
        ),
        (
            "-N 1-4 --mem=0 --exclusive",
            "1-4 nodes, no GPUs; all of each node's memory; whole nodes, shared with no other job",
        ),
        (
            "-t INFINITE -c 1 --mem-per-cpu=1500M",
            "no GPUs; 1 CPU per task, 1.5 GiB memory per CPU; with no time limit",
        ),
        (
            "--gpus=1 --gpu-freq=high --mpi=pmi2 -C nvlink -w node1 -x node2",
            "1 GPU; GPU clocks set to high; MPI steps get PMI2; on nodes with nvlink, on node1, not on node2",
        ),
        (
            "--gres=shard:2 --gres-flags=one-task-per-sharing",
            "2 shards of one GPU: time-sliced with other jobs, no memory isolation; no two tasks share one shared GPU",
        ),
        (
            "-N 2 --ntasks-per-node=4 --gpus-per-node=4 --gres-flags=disable-binding",
            "2 nodes, 4 tasks per node, 4 GPUs per node (8 in total); CPUs may come from anywhere on the node, "
            "far from the GPUs",
        ),
    ],
)
def test_explanations(line: str, expected: str) -> None:
    assert say(line) == expected


def test_every_fixture_workload_has_an_explanation_naming_its_gpus() -> None:
    lines = {
        "--gpus=2": "2 GPUs",
        "-N 2 --ntasks-per-node=2 --gpus-per-node=h100:1": "1 h100 GPU per node (2 in total)",
        "--gres=shard:4": "4 shards",
        "-p mig --gres=gpu:1g.18gb:2": "2 MIG slices 1g.18gb",
        "-n 1 --gpus-per-task=1": "1 GPU per task",
    }
    for line, part in lines.items():
        assert part in say(line)


@pytest.mark.parametrize(
    ("gpu_type", "expected"),
    [
        ("1g.18gb", "1/7 of the SMs and 1/8 of the memory"),
        ("1g.35gb", "1/7 of the SMs and 1/4 of the memory"),
        ("2g.20gb", "2/7 of the SMs and 1/4 of the memory"),
        ("4g.40gb", "4/7 of the SMs and 1/2 of the memory"),
        ("h100", None),
        ("", None),
    ],
)
def test_mig_type_shares(gpu_type: str, expected: str | None) -> None:
    assert describe_gpu_type(gpu_type) == expected
