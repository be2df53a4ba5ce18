"""The sandbox's stand-in nvidia-smi in real steps: `srun nvidia-smi` works, answers for the step's GPUs, and
slurmlab's parsers read it; binding and isolation agree on the same allocation and say where the sandbox differs."""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

import pytest

from slurmlab.core.gpu.sandbox_limits import NO_DEVICE_CGROUP
from slurmlab.core.gpu.smi import parse_smi_list, parse_topo_matrix
from slurmlab.core.gpu.standin_names import STANDIN_MARK

pytestmark = pytest.mark.sandbox


@pytest.fixture(scope="module")
def per_task(slurm_sandbox: Any) -> Iterator[Any]:
    from slurmlab.slurm.allocation import Allocation

    a = Allocation.submit(["-n2", "--gpus-per-task=1", "--gpu-bind=closest", "-t", "10"], name="test-standin")
    try:
        a.wait(timeout=60)
        yield a
    finally:
        a.cancel()


def test_srun_nvidia_smi_answers_for_the_steps_gpus(per_task: Any) -> None:
    res = per_task.srun(["nvidia-smi", "-L"], args=["-n1", "--gpus=2"], on_output=lambda *_: None, timeout=60)
    text = "\n".join(res.stdout)
    assert res.ok, res.stderr
    assert "execve" not in "\n".join(res.stderr)
    assert text.startswith(STANDIN_MARK), text
    devices, _ = parse_smi_list(text)
    assert [d.index for d in devices] == [0, 1]
    node, held = next(iter(per_task.gpus.items()))
    assert all(f"the node's GPU {i} (Slurm IDX {i})" in text for i in held), text
    assert f"on {node}" in text


def test_a_program_the_task_starts_finds_it_too(per_task: Any) -> None:
    res = per_task.srun(
        ["sh", "-c", "nvidia-smi topo -m; echo sandbox=$SLURMLAB_SANDBOX"],
        args=["-n1", "--gpus=1"],
        on_output=lambda *_: None,
        timeout=60,
    )
    assert res.ok, res.stderr
    text = "\n".join(res.stdout)
    assert len(parse_topo_matrix(text).gpus) == 1
    assert "sandbox=/" in text


def test_an_unknown_option_fails_as_nvidia_smi_does(per_task: Any) -> None:
    res = per_task.srun(
        ["nvidia-smi", "--query-gpu=name"], args=["-n1", "--gpus=1"], on_output=lambda *_: None, timeout=60
    )
    assert not res.ok
    assert any("Invalid combination of input arguments" in ln for ln in res.stdout)


def test_binding_and_isolation_see_the_same_gpus_and_say_it_is_a_sandbox(per_task: Any) -> None:
    from slurmlab.experiments.isolation_result import ISOLATED
    from slurmlab.experiments.verify import verify

    table = per_task.explain_binding()
    report = verify(per_task)
    by_rank = {r.rank: r.gpus for r in table.rows}
    from_check = {
        int(rep["label"]): tuple(d["index"] for d in devs)
        for rep, devs in zip(report.meta["reports"], report.meta["devices"], strict=True)
    }
    assert by_rank == from_check and all(len(g) == 1 for g in by_rank.values()), (
        table.text(),
        report.summary(),
    )
    assert report.verdict == ISOLATED and not report.failed, report.summary()
    assert table.closest == "honoured" and report.by_id("I7").status == "PASS"
    assert NO_DEVICE_CGROUP in table.text() and NO_DEVICE_CGROUP in report.summary()
