"""The explorer on a cluster node some of whose GPUs are taken: the best N among the free ones, what the taken
ones cost, and the salloc line (the node's record as the recorded `scontrol show node -d` of 22.05 prints it)."""

from __future__ import annotations

import shlex

import pytest
from fake_slurm import golden_path
from figure_data import highlighted_gpus

pytest.importorskip("ipywidgets")
pytest.importorskip("bokeh")

from slurmlab.core.slurm.parse_text import parse_scontrol_nodes
from slurmlab.widgets.explorer import ExplorerModel, NodeChoice, TopologyExplorer, _choices_from_nodes


def _recorded_nodes() -> dict[str, object]:
    text = golden_path("22.05", "s08_scontrol_show_node_d.txt").read_text()
    return {n.name: n for n in parse_scontrol_nodes(text)}


def _dgx_node(name: str) -> NodeChoice:
    # a node of the recorded cluster (a dgx-h100 sandbox), its topology from the profile it was built from
    (choice,) = [c for c in _choices_from_nodes([_recorded_nodes()[name]])]
    return NodeChoice(
        choice.key,
        choice.label,
        node=name,
        profile="dgx-h100",
        gpus=choice.gpus,
        gpu_type=choice.gpu_type,
        record=choice.record,
    )


def test_the_best_free_gpus_and_what_the_taken_ones_cost() -> None:
    node = _dgx_node("node2")  # GresUsed=gpu:h100:2(IDX:0,4)
    assert "2 in use" in node.label
    ex = TopologyExplorer(nodes=[node])
    sel = ex.select(n=3)
    assert sel.best is not None and not {0, 4} & set(sel.best.gpus)
    assert len(sel.best.numa_groups) == 1  # 3 free on each socket: one socket's three
    assert "GPUs 0,4 were taken when the explorer opened" in ex.info.value
    assert "The best 3 would be 0-2 (NUMA 0, NV18 each); 0 is taken, so" in ex.info.value
    argv = shlex.split(sel.salloc_line or "")
    assert argv == [
        "salloc",
        "--no-shell",
        "--nodes=1",
        "--gpus=h100:3",
        "--gres-flags=enforce-binding",
        "--nodelist=node2",
    ]
    assert "indices" in ex.info.value and "enforce-binding: Slurm gives only GPUs" in ex.info.value
    assert highlighted_gpus(ex.figures[0]) == set(sel.best.gpus)


def test_asking_for_more_than_are_free_is_a_message_not_a_traceback() -> None:
    model = ExplorerModel([_dgx_node("node1")])  # 0,2-4,6-7 whole, 1 shared out as shards: only 5 free
    sel = model.select("node:node1", 2)
    assert sel.best is None and sel.salloc is None
    assert "cannot choose 2 GPUs: only 1 of the 8 are free (taken: 0-4,6-7; free: 5)" in sel.message
    assert "ask for 1 or fewer" in sel.message
    assert "shared out (shards/MPS in use)" in sel.taken
    assert model.select("node:node1", 1).best is not None
