"""`slurmlab topo … --best N [--node NAME] [--taken GPUS]`: the best free GPUs, what the taken ones cost, and the
salloc line; Slurm answered from the recorded `scontrol show node -d` / `--json` of every version."""

from __future__ import annotations

import re
import shlex

import pytest
from fake_slurm import GOLDEN_VERSIONS, golden_path
from shared_paths import require_shared

from slurmlab.cli import main
from slurmlab.testing import FakeRunner


@pytest.fixture
def fake(fake_runner: FakeRunner) -> FakeRunner:
    return fake_runner  # slurmlab.testing's fixture: a FakeRunner installed as the process runner


def _script_node(fake: FakeRunner, version: str, node: str) -> list[str]:
    fake.on(["sinfo", "--version"], stdout=golden_path(version, "00_sinfo_version.txt").read_text())
    if version == "22.05":
        argv = ["scontrol", "show", "node", "-d", node]
        fake.on(argv, stdout=golden_path(version, "s08_scontrol_show_node_d.txt").read_text())
    else:
        argv = ["scontrol", "--json", "show", "node", node]
        fake.on(argv, stdout=golden_path(version, "s07_scontrol_json_show_node.json").read_text())
    return argv


@pytest.mark.parametrize("version", GOLDEN_VERSIONS)
def test_best_on_a_node_asks_slurm_which_gpus_are_taken(
    version: str, fake: FakeRunner, capsys: pytest.CaptureFixture[str]
) -> None:
    argv = _script_node(fake, version, "node2")
    text = golden_path(version, "s08_scontrol_show_node_d.txt").read_text()
    used = re.search(r"NodeName=node2 .*?GresUsed=gpu:h100:\d+\(IDX:([\d,-]+)\)", text, flags=re.S)
    assert used is not None and used.group(1) == "0,4"  # the recording's premise: one GPU per socket held
    assert main(["topo", "--profile", "dgx-h100", "--best", "4", "--node", "node2"]) == 0
    assert argv in fake.history  # one node asked for, by name: never every node of a big cluster
    out = capsys.readouterr().out
    assert "node2: GPUs 0,4 taken (8 GPUs; from scontrol show node -d)" in out
    best = re.search(r"best 4 of node2's free GPUs: GPUs ([\d, ]+):", out)
    assert best is not None and not {0, 4} & {int(x) for x in best.group(1).split(", ")}
    assert "The best 4 would be 0-3 (NUMA 0, NV18 each); 0 is taken, so" in out
    assert "spread over 2 NUMA groups where the best sits on one" in out
    line = re.search(r"ask Slurm: (.*)", out)
    assert line is not None
    # no --gres-flags=enforce-binding: no socket has 4 free, the job would wait until one has
    assert shlex.split(line.group(1)) == [
        "salloc",
        "--no-shell",
        "--nodes=1",
        "--gpus=h100:4",
        "--nodelist=node2",
    ]
    assert "Slurm cannot be asked for GPU indices" in out


def test_a_node_with_fewer_free_gpus_is_refused_before_the_summary(
    fake: FakeRunner, capsys: pytest.CaptureFixture[str]
) -> None:
    _script_node(fake, "22.05", "node1")  # GresUsed=gpu:h100:6(IDX:0,2-4,6-7),shard:h100:1(IDX:1)
    assert main(["topo", "--profile", "dgx-h100", "--best", "2", "--node", "node1"]) == 2
    captured = capsys.readouterr()
    assert "cannot choose 2 GPUs: only 1 of the 8 are free (taken: 0-4,6-7; free: 5)" in captured.err
    assert "ask for 1 or fewer" in captured.err and "Traceback" not in captured.err
    assert "GPU matrix" not in captured.out  # told first, not under a page of summary


def test_an_unknown_node_is_named(fake: FakeRunner, capsys: pytest.CaptureFixture[str]) -> None:
    fake.on(["sinfo", "--version"], stdout=golden_path("22.05", "00_sinfo_version.txt").read_text())
    # what 22.05 answers (seen on the sandbox): the words on stdout, exit 1
    fake.on(["scontrol", "show", "node", "-d", "gpu99"], stdout="Node gpu99 not found\n", returncode=1)
    assert main(["topo", "--profile", "dgx-h100", "--best", "2", "--node", "gpu99"]) == 2
    err = capsys.readouterr().err
    assert "Slurm has no node 'gpu99'" in err and "sinfo -N" in err


def test_taken_by_hand_on_a_capture(capsys: pytest.CaptureFixture[str]) -> None:
    path = require_shared("nvidia-smi", "topo-dgx1-v100-8gpu-4mlx5-tabs.txt")
    assert main(["topo", str(path), "--best", "4", "--taken", "0,4"]) == 0
    out = capsys.readouterr().out
    assert "best 4 of the free GPUs: GPUs" in out and "No free set of 4 shares NVLink:" in out
    assert "ask Slurm: salloc --no-shell --nodes=1 --gpus=4" in out


@pytest.mark.parametrize(
    ("args", "said", "hint"),
    [
        (
            ["--node", "node1"],
            "--node says which GPUs are taken, for --best N; it does nothing alone",
            "add --best N (e.g. --best 2 --node node1)",
        ),
        (["--taken", "0,1"], "--taken says which GPUs are taken, for --best N", "--best 2 --taken 0,1"),
        (["--best", "0"], "--best 0: choose at least 1 GPU", "e.g. --best 2"),
        (["--best", "2", "--taken", "0,x"], "GPU list", ""),
    ],
)
def test_flag_mistakes_are_told_plainly(
    args: list[str], said: str, hint: str, capsys: pytest.CaptureFixture[str]
) -> None:
    assert main(["topo", "--profile", "dgx-h100", *args]) == 2
    err = capsys.readouterr().err
    assert said in err and hint in err and "Traceback" not in err


def test_node_alone_outside_a_sandbox_says_to_give_a_capture(
    fake: FakeRunner, capsys: pytest.CaptureFixture[str]
) -> None:
    assert main(["topo", "--best", "2", "--node", "gpu7"]) == 2
    err = capsys.readouterr().err
    assert "the topology of gpu7 is not known here" in err
    assert "srun -w gpu7 --gpus=1 nvidia-smi topo -m > topo.txt" in err
