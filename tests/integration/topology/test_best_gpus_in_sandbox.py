"""`slurmlab topo --node NAME --best N` on a real Slurm: a job holds some GPUs, the best set is chosen among the
free ones, and the salloc line it prints gets those GPUs from Slurm (issue 15, bullet 5)."""

from __future__ import annotations

import re
import shlex
from typing import Any

import pytest

from slurmlab.cli import main
from slurmlab.core.gpu.devices import parse_cpu_list
from slurmlab.slurm.allocation import Allocation
from slurmlab.slurm.hardware_files import sandbox_hardware
from slurmlab.widgets.explorer import TopologyExplorer

pytestmark = pytest.mark.sandbox


def _idx_on(runner: Any, job_id: str, node: str) -> set[int]:
    """The GPUs (Slurm IDX) a job holds on ``node``, straight from `scontrol show job -d`."""
    text = runner.run(["scontrol", "show", "job", "-d", job_id]).stdout
    found: set[int] = set()
    for m in re.finditer(r"Nodes=(\S+) CPU_IDs=\S+ Mem=\S+ GRES=(\S*)", text):
        if m.group(1) == node:
            for idx in re.findall(r"IDX:([\d,-]+)", m.group(2)):
                found |= parse_cpu_list(idx)
    return found


def test_best_among_the_free_gpus_of_a_node_and_the_line_that_gets_them(
    dgx: Any, capsys: pytest.CaptureFixture[str]
) -> None:
    runner = dgx.runner()
    holder = Allocation.submit(["-w", "node1", "-N", "1", "--gpus=h100:3", "-t", "5"], runner=runner)
    try:
        holder.wait(timeout=30)
        held = _idx_on(runner, holder.job_id or "", "node1")
        assert len(held) == 3
        topo = sandbox_hardware(runner).node_topology("node1").topology  # type: ignore[union-attr]
        free = {g.index for g in topo.gpus} - held
        sockets = {label: set(gpus) & free for label, gpus in topo.numa_groups().items()}

        assert main(["topo", "--node", "node1", "--best", "4"]) == 0
        out = capsys.readouterr().out
        taken_said = re.search(r"node1: GPUs (\S+) taken", out)
        assert taken_said is not None and parse_cpu_list(taken_said.group(1)) == held
        chosen = re.search(r"best 4 of node1's free GPUs: GPUs ([\d, ]+):", out)
        assert chosen is not None
        best = {int(x) for x in chosen.group(1).split(", ")}
        assert len(best) == 4 and best <= free
        full = [label for label, gpus in sockets.items() if len(gpus) >= 4]
        if full:  # a socket with 4 free: the choice is that socket's
            assert any(best <= sockets[label] for label in full)
        # on an idle dgx-h100 node the best 4 are NUMA 0's, 0-3: what the job holds of them is what was lost
        if held & {0, 1, 2, 3}:
            assert "The best 4 would be 0-3 (NUMA 0, NV18 each)" in out
        else:
            assert "nothing lost" in out
        line = re.search(r"ask Slurm: (.*)", out)
        assert line is not None
        argv = shlex.split(line.group(1))
        assert argv[:2] == ["salloc", "--no-shell"] and "--nodelist=node1" in argv and "--nodes=1" in argv

        # the printed line, as it is, gets a set as good as the chosen one from Slurm
        second = Allocation.submit([*argv[2:], "-t", "5"], runner=runner)
        try:
            second.wait(timeout=30)
            got = _idx_on(runner, second.job_id or "", "node1")
            assert len(got) == 4 and got <= free
            if full:
                label = next(lb for lb, gpus in topo.numa_groups().items() if got <= set(gpus))
                assert label in full  # one socket's GPUs, as --gres-flags=enforce-binding promises
            if len(full) == 1:
                assert got == best  # only one socket has 4 free: Slurm had to give exactly these
        finally:
            second.cancel()

        # the explorer opened now says the same
        ex = TopologyExplorer.from_cluster(runner)
        sel = ex.select("node:node1", 4)
        assert sel.best is not None and set(sel.best.gpus) == best
        assert "were taken when the explorer opened" in ex.info.value
    finally:
        holder.cancel()


def test_best_on_a_node_that_has_not_enough_free(dgx: Any, capsys: pytest.CaptureFixture[str]) -> None:
    runner = dgx.runner()
    holder = Allocation.submit(["-w", "node2", "-N", "1", "--gpus=h100:7", "-t", "5"], runner=runner)
    try:
        holder.wait(timeout=30)
        assert main(["topo", "--node", "node2", "--best", "2"]) == 2
        err = capsys.readouterr().err
        assert "cannot choose 2 GPUs: only 1 of the 8 are free" in err and "ask for 1 or fewer" in err
    finally:
        holder.cancel()


def test_on_a_mig_node_slurm_idx_becomes_the_gpu_and_split_gpus_are_left_out(
    h200_mig: Any, capsys: pytest.CaptureFixture[str]
) -> None:
    from slurmlab.slurm.poller import JobPoller
    from slurmlab.slurm.runner import set_runner

    runner = h200_mig.runner()
    poller = JobPoller(runner, interval=0.5)  # this sandbox's job ids collide with the session sandbox's
    old = set_runner(runner)
    holder = Allocation.submit(["-N", "1", "--gpus=h200:1", "-t", "5"], runner=runner, poller=poller)
    try:
        holder.wait(timeout=30)
        node = holder.nodes[0]
        (gpu,) = holder.topology(node).gpus  # the whole H200 it holds, as a topology index (not Slurm's IDX)
        split = {g.index for g in sandbox_hardware(runner).node_mig(node).layout.gpus}  # type: ignore[union-attr]
        assert main(["topo", "--node", node, "--best", "2"]) == 0
        captured = capsys.readouterr()
        assert f"{node}: GPU {gpu} taken" in captured.out
        said = re.search(r"GPUs (\S+) are split into MIG instances: left out", captured.out)
        assert said is not None and parse_cpu_list(said.group(1)) == split
        chosen = re.search(rf"best 2 of {node}'s free GPUs: GPUs ([\d, ]+):", captured.out)
        assert chosen is not None
        best = {int(x) for x in chosen.group(1).split(", ")}
        assert not best & (split | {gpu})
        assert "warning" not in captured.err  # MIG slices are GPUs to Slurm: no false "is it node1's?"
    finally:
        holder.cancel()
        poller.stop()
        set_runner(old)
