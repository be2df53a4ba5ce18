"""Static checks: contradictions Slurm would reject or misread, found from the request alone."""

from __future__ import annotations

import shlex

import pytest

from slurmlab.core.request.request import GpuRequest, RequestProblems, parse_request
from slurmlab.core.request.validate import check_static, validate
from slurmlab.errors import RequestError


def p(line: str) -> GpuRequest:
    return parse_request(shlex.split(line))


@pytest.mark.parametrize(
    "line",
    [
        "--gpus=2",
        "-N 2 --ntasks-per-node=2 --gpus-per-node=h100:1 --gpu-bind=closest --gres-flags=enforce-binding",
        "--gres=shard:4",
        "-p mig --gres=gpu:1g.18gb:2",
        "-p mig --gpus=3g.71gb:1 --cpus-per-gpu=4 --mem-per-gpu=8G",
        "-n 1 --gpus-per-task=1",
        "--gpus=4 --gpus-per-task=1 -n 4",
        "-N 2 --gpus=8 --gpus-per-node=4",
        "--gres=shard:2 --gpu-bind=per_task:1",
        "--gres=mps:50 --gpu-bind=none",
        "--gres=gpu:h100:1,shard:h100:0",
        "--gres=gpu:1g.18gb:1,shard:h100:2",
        "--gpus-per-socket=1 --sockets-per-node=2",
        # Slurm counts the tasks from -N or --ntasks-per-node (22.05 `sbatch --test-only` accepts each)
        "-N 2 --ntasks-per-node=2 --gpus-per-task=1",
        "-N 2 --gpus-per-task=1",
        "--ntasks-per-node=2 --gpus-per-task=1",
    ],
)
def test_requests_slurm_accepts_pass(line: str) -> None:
    problems, _ = check_static(p(line))
    assert problems == []


@pytest.mark.parametrize(
    ("line", "in_message", "in_hint"),
    [
        (
            "--gpus=1 --gres=shard:4",
            "--gpus=1 and --gres=shard:4 ask for the same GPU both whole (gpu) and shared",
            "never both",
        ),
        (
            "--gres=gpu:h100:1,shard:h100:2",
            "--gres=gpu:h100:1 and --gres=shard:h100:2",
            "keep only --gres=shard:h100:2",
        ),
        ("--gpus-per-node=1 --gres=mps:50", "shared (mps)", "never both"),
        ("--gres=shard:2,mps:50", "asks for both shards and MPS", "not both"),
        (
            "--gres=shard:2 --gpu-bind=closest",
            "--gpu-bind=closest with --gres=shard:2",
            "--gpu-bind=per_task:1",
        ),
        ("--gres=mps:25 --gpu-bind=map_gpu:0", "limited to per_task or none", "--gpu-bind=none"),
        ("--gres=shard:2 --gpu-freq=high", "--gpu-freq=high with --gres=shard:2", "drop --gpu-freq"),
        ("--gpus-per-task=2", "--gpus-per-task=2 without a task count", "--ntasks=1 --gpus-per-task=2"),
        (
            "--gpus=2 --gpus-per-task=1 -n 4",
            "--gpus=2 conflicts with --gpus-per-task=1 x --ntasks=4 = 4",
            "--gpus=4",
        ),
        (
            "-N 2 --gpus=2 --gpus-per-node=4",
            "--gpus=2 conflicts with 4 GPU(s) per node on 2 node(s) = 8",
            "not both",
        ),
        (
            "--gpus-per-node=2 --gres=gpu:4",
            "--gpus-per-node=2 and --gres=gpu:4 give two different per-node",
            "mean the same",
        ),
        (
            "--gpus=h100:1 --gpus-per-node=a100:1",
            "name different GPU types (a100, h100)",
            "--gres=gpu:TYPE_A:N",
        ),
        (
            "--gpus=h100:2 --gres=gpu:a100:1",
            "--gpus=h100:2 and --gres=gpu:a100:1 name different GPU types",
            "either the --gpus* option or --gres=gpu:TYPE:N",
        ),
        (
            "--gres=gpu:h100:1,gpu:h100:2",
            "--gres names gpu:h100 twice (gpu:h100:1 and gpu:h100:2)",
            "each GPU type once",
        ),
        ("--gpus-per-socket=1", "--gpus-per-socket=1 without --sockets-per-node", "--sockets-per-node=N"),
        (
            "--gres-flags=enforce-binding,disable-binding --gpus=1",
            "sets both enforce-binding and disable-binding",
            "keep one",
        ),
        (
            "--cpus-per-gpu=4 -c 2 --gpus=1",
            "--cpus-per-gpu=4 and --cpus-per-task=2 are mutually exclusive",
            "keep one",
        ),
        (
            "--mem=8G --mem-per-gpu=4G --gpus=1",
            "--mem=8G and --mem-per-gpu=4G are mutually exclusive",
            "per node (--mem)",
        ),
    ],
)
def test_contradictions(line: str, in_message: str, in_hint: str) -> None:
    with pytest.raises(RequestError) as info:
        validate(p(line))
    problems = info.value.problems if isinstance(info.value, RequestProblems) else ()
    assert any(in_message in pr.message and in_hint in pr.hint for pr in problems), [
        (pr.message, pr.hint) for pr in problems
    ]


def test_all_problems_reported_together() -> None:
    with pytest.raises(RequestProblems) as info:
        validate(p("--gpus=1 --gres=shard:4 --gpu-bind=closest --gpu-freq=high --mem=1G --mem-per-cpu=1G"))
    messages = [pr.message for pr in info.value.problems]
    assert len(messages) == 4
    text = str(info.value)
    assert text.startswith("4 problems with the request:")
    for pr in info.value.problems:
        assert pr.message in text and pr.hint in text


@pytest.mark.parametrize(
    ("line", "in_warning"),
    [
        ("--gpu-bind=closest", "--gpu-bind=closest has no effect"),
        ("--gres-flags=enforce-binding", "no effect"),
        ("--mem-per-gpu=4G", "--mem-per-gpu=4G has no effect"),
        ("--cpus-per-gpu=4", "--cpus-per-gpu=4 has no effect"),
        ("--gres=shard:2 --exclusive", "--exclusive with shard/mps"),
        ("-N 4 -n 2", "lowers the node count"),
        ("-N 4 --gpus=2", "leaves some nodes without a GPU"),
        ("--gpus-per-node=2 --gres=gpu:2", "say the same thing twice"),
        ("--gpus=1 --gres-flags=one-task-per-sharing", "only matters for shared GRES"),
    ],
)
def test_oddities_are_warnings_not_errors(line: str, in_warning: str) -> None:
    checked = validate(p(line))
    assert any(in_warning in w for w in checked.warnings), checked.warnings
    assert checked == p(line)


def test_parse_warnings_are_kept_by_validate() -> None:
    checked = validate(p("--frob=1 --gpu-bind=closest"))
    assert "--frob=1" in checked.warnings[0]
    assert "has no effect" in checked.warnings[1]
