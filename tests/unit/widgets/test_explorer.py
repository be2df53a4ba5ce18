"""The topology explorer widget built for hardware profiles and for nodes without a known topology."""

from __future__ import annotations

import itertools
import shlex

import pytest
from figure_data import highlighted_gpus

pytest.importorskip("ipywidgets")
pytest.importorskip("bokeh")

from slurmlab.widgets.explorer import STEERING_NOTE, ExplorerModel, NodeChoice, TopologyExplorer


def test_n4_on_dgx_h100_is_one_numa_node_all_nvlink_with_a_salloc_line() -> None:
    ex = TopologyExplorer(profiles=["dgx-h100"])
    assert ex.count.max == 8
    sel = ex.select(n=4)
    assert sel.best is not None and len(sel.best.gpus) == 4
    topo = sel.topology.topology
    assert len({topo.gpu(g).numa_label for g in sel.best.gpus}) == 1
    assert all(topo.nvlinks(a, b) > 0 for a, b in itertools.combinations(sel.best.gpus, 2))
    assert sel.best.all_nvlink
    argv = shlex.split(sel.salloc_line or "")
    assert argv[:2] == ["salloc", "--no-shell"] and "--gpus=h100:4" in argv
    # -N 1: -w alone lets Slurm spread --gpus=N over nodes; one socket's GPUs: enforce-binding (sandbox-checked)
    assert "salloc --no-shell --nodes=1 --gpus=h100:4 --gres-flags=enforce-binding" in ex.info.value
    assert "Links=" in ex.info.value
    assert highlighted_gpus(ex.figures[0]) == set(sel.best.gpus)
    # back to 0: nothing chosen, nothing highlighted
    sel = ex.select(n=0)
    assert sel.best is None and sel.salloc is None and highlighted_gpus(ex.figures[0]) == set()


def test_mig_profile_offers_only_whole_gpus_and_shows_the_mig_view() -> None:
    ex = TopologyExplorer(profiles=["dgx-h100", "h200-mig"], n=2)
    sel = ex.select("profile:h200-mig")
    assert ex.count.max == 4  # GPUs 0-3 are split into MIG instances
    assert sel.best is not None and set(sel.best.gpus) <= {4, 5, 6, 7}
    assert "--gpus=h200:2" in (sel.salloc_line or "")
    assert len(ex.figures) == 2 and ex.figures[1].select_one({"name": "instances"}) is not None


def test_a_node_without_gpus_shows_a_message_not_a_traceback() -> None:
    cpu = NodeChoice("node:cpu1", "cpu1 (no GPUs)", node="cpu1", gpus=0)
    ex = TopologyExplorer(nodes=[cpu], profiles=["dgx-h100"])
    sel = ex.select("node:cpu1", 3)
    assert ex.count.max == 0 and ex.count.value == 0
    assert sel.topology is None and sel.best is None and sel.salloc is None
    assert "no GPUs" in ex.info.value and ex.figures == []
    # and back to a profile works
    assert ex.select("profile:dgx-h100", 2).best is not None


def test_a_cluster_node_of_unknown_topology_still_gets_its_salloc_line() -> None:
    model = ExplorerModel([NodeChoice("node:gpu7", "gpu7", node="gpu7", gpus=4, gpu_type="a100")])
    sel = model.select("node:gpu7", 2)
    assert sel.topology is None and "allocation" in sel.message
    assert sel.salloc == ["salloc", "--no-shell", "--nodes=1", "--gpus=a100:2", "--nodelist=gpu7"]
    assert "indices" in STEERING_NOTE


def test_nothing_to_explore_is_a_clear_error() -> None:
    with pytest.raises(Exception, match="nothing to explore"):
        ExplorerModel([])
