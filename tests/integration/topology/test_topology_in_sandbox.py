"""Topology, MIG and binding explanation of real allocations in the sandbox (Slurm's own records as the truth)."""

from __future__ import annotations

import re
from typing import Any

import pytest
from figure_data import renderer_data as _data

from slurmlab import explain_binding
from slurmlab.core.gpu.binding import HONOURED
from slurmlab.core.gpu.devices import parse_cpu_list
from slurmlab.core.slurm import hostlist
from slurmlab.errors import RequestError
from slurmlab.slurm.allocation import Allocation
from slurmlab.slurm.poller import JobPoller
from slurmlab.slurm.probes import node_mig, node_topology
from slurmlab.viz import notebook as _notebook_figures
from slurmlab.viz.mig_view import mig_figure
from slurmlab.viz.topology_view import topology_figure

pytestmark = pytest.mark.sandbox


def _shown(model: Any) -> dict[str, Any]:
    """What a notebook kernel shows for ``model``: IPython's formatter, slurmlab's figures registered with it."""
    from IPython.testing.globalipapp import get_ipython

    ip = get_ipython()
    _notebook_figures.install(ip)
    data: dict[str, Any] = ip.display_formatter.format(model)[0]
    return data


def _scontrol_records(runner: Any, job_id: str) -> dict[str, tuple[frozenset[int], frozenset[int]]]:
    """node -> (GRES IDX, CPU_IDs), read straight from `scontrol show job -d` text."""
    text = runner.run(["scontrol", "show", "job", "-d", job_id]).stdout
    out = {}
    for m in re.finditer(r"Nodes=(\S+) CPU_IDs=(\S+) Mem=\S+ GRES=(\S*)", text):
        idx = frozenset().union(*(parse_cpu_list(x) for x in re.findall(r"IDX:([\d,-]+)", m.group(3))))
        for node in hostlist.expand(m.group(1)):  # nodes given the same are listed together: node[1-2]
            out[node] = (idx, parse_cpu_list(m.group(2)))
    assert out, f"no per-node detail in:\n{text}"
    return out


def test_closest_binding_is_explained_and_drawn(dgx: Any) -> None:
    runner = dgx.runner()
    alloc = Allocation.submit(["-n2", "--gpus=2", "--gpu-bind=closest", "-t", "5"], runner=runner)
    try:
        alloc.wait(timeout=30)
        table = explain_binding(alloc)
        truth = _scontrol_records(runner, alloc.job_id or "")
        # the table agrees with scontrol show job -d and with job.gpu_allocs
        assert {a.node: frozenset(a.gpu_indices) for a in alloc.job.gpu_allocs} == {
            n: t[0] for n, t in truth.items()
        }
        assert {r.node: (frozenset(r.gpu_idx), r.cpu_ids) for r in table.records} == truth
        assert len(table.rows) == 2
        for row in table.rows:
            idx, cpus = truth[row.node]
            assert set(row.gpus) == idx  # dgx-h100: topology index == Slurm IDX
            assert row.slurm_cpus == cpus
            assert row.closest == HONOURED, row.why
        assert table.closest == HONOURED
        assert "honoured" in table.text() and "<table>" in table._repr_html_()

        node = table.nodes()[0]
        idx, cpus = truth[node]
        fig = topology_figure(**table.figure_args(node))
        gpus = _data(fig, "gpus")
        hot = {i for i, h in zip(gpus["index"], gpus["highlighted"], strict=True) if h}
        assert hot == idx
        cells = _data(fig, "cpus")
        coloured = {c for c, t in zip(cells["cpu"], cells["task"], strict=True) if t != "-"}
        assert coloured == cpus

        topo = alloc.topology(node)  # the Allocation method delegates here
        assert topo.source == "sandbox" and "dgx-h100" in topo.detail
        assert set(topo.gpus) == idx
        assert alloc.topology()[node] == topo  # the job's every node, here one
    finally:
        alloc.cancel()


def test_enforce_binding_is_checked_against_the_gpus_cores(dgx: Any) -> None:
    runner = dgx.runner()
    alloc = Allocation.submit(["-n1", "--gpus=1", "--gres-flags=enforce-binding", "-t", "5"], runner=runner)
    try:
        alloc.wait(timeout=30)
        table = explain_binding(alloc)
        assert table.enforce_requested
        (row,) = table.rows
        topo = table.topologies[row.node].topology
        local = topo.gpu(row.gpus[0]).cpu_affinity
        assert row.slurm_cpus is not None and row.slurm_cpus <= local
        assert row.enforce == HONOURED and table.closest == "not requested"
    finally:
        alloc.cancel()


def test_mig_slice_of_the_allocation_is_highlighted(h200_mig: Any) -> None:
    runner = h200_mig.runner()
    # a poller of this sandbox: the process-wide one follows the session's dgx-h100 sandbox, whose job ids
    # collide with these
    poller = JobPoller(runner, interval=0.5)
    alloc = Allocation.submit(["-n1", "--gres=gpu:3g.71gb:1", "-t", "5"], runner=runner, poller=poller)
    try:
        alloc.wait(timeout=30)
        result = node_mig(alloc)
        assert result.source == "sandbox"
        assert len(result.highlight) == 1
        gpu, placement = result.highlight[0]
        (inst,) = [i for i in result.layout.gpu(gpu).instances if i.placement == placement]
        assert inst.profile == "3g.71gb"  # the type Slurm granted
        blocks = _data(mig_figure(**result.figure_args()), "instances")
        lit = {
            (g, p)
            for g, p, h in zip(blocks["gpu"], blocks["placement"], blocks["highlighted"], strict=True)
            if h
        }
        assert lit == {(gpu, placement)}
        # the topology view marks the slice's parent GPU, and says which slice it is
        t = alloc.topology(alloc.nodes[0])
        assert t.gpus == (gpu,) and any("3g.71gb" in n for n in t.notes)
        # the slice has one name in the MIG text, the topology's note and the figure's hover
        (name,) = [i.label for i in result.slices()]
        assert name == f"GPU {gpu} · 3g.71gb @ {placement}"
        assert name in result.summary() and any(name in n for n in t.notes)
        assert name in set(blocks["slice"])
        # whole GPUs of this profile are not IDX-numbered by index: a whole H200 maps to GPUs 4-7
        whole = Allocation.submit(["-n1", "--gpus=h200:1", "-t", "5"], runner=runner, poller=poller)
        try:
            whole.wait(timeout=30)
            t = node_topology(whole)
            assert t.source == "sandbox" and len(t.gpus) == 1 and t.gpus[0] in (4, 5, 6, 7)
        finally:
            whole.cancel()
    finally:
        alloc.cancel()
        poller.stop()


def test_outside_a_sandbox_the_live_sources_are_tried_in_order(dgx: Any, tmp_path: Any) -> None:
    import shutil

    from slurmlab import SourceUnavailable
    from slurmlab.slurm.runner import Runner

    # the same cluster through a copy of slurm.conf in a folder without the sandbox's hardware file: not seen as
    # a sandbox
    conf = tmp_path / "slurm.conf"
    shutil.copy(dgx.conf_path, conf)
    runner = Runner(slurm_conf=str(conf))
    alloc = Allocation.submit(["-n1", "--gpus=1", "-t", "5"], runner=runner)
    try:
        alloc.wait(timeout=30)
        if shutil.which("nvidia-smi"):
            assert node_topology(alloc).source == "nvidia-smi"  # a real GPU host answers for itself
            return
        # the sandbox's nodes keep their stand-in nvidia-smi (its TaskProlog puts it on each task's PATH): it
        # answers after the sandbox source, which this copy of slurm.conf hides, and says what it is
        topo = node_topology(alloc)
        assert topo.source == "nvidia-smi" and topo.tried == (
            "sandbox: the cluster is not a slurmlab sandbox",
        )
        assert any("stand-in nvidia-smi" in n for n in topo.notes), topo.notes
        assert not any("unclosed file" in n for n in topo.notes), topo.notes
        # with no nvidia-smi answer, NVML is tried and fails with what is missing
        with pytest.raises(SourceUnavailable, match="NVML") as info:
            node_topology(alloc, source="nvml")
        assert "no topology source answered" in str(info.value)
        # forcing the sandbox source where there is none says so
        with pytest.raises(SourceUnavailable, match="not a slurmlab sandbox"):
            alloc.topology(source="sandbox")
    finally:
        alloc.cancel()


def test_explorer_lists_the_sandbox_nodes_and_builds_a_node_salloc_line(dgx: Any) -> None:
    pytest.importorskip("ipywidgets")
    from slurmlab.widgets.explorer import TopologyExplorer

    ex = TopologyExplorer.from_cluster(dgx.runner())
    assert [c.node for c in ex.model.choices] == ["node1", "node2"]
    sel = ex.select("node:node2", 4)
    assert sel.topology.source == "sandbox" and sel.best is not None and sel.best.all_nvlink
    # one node (-w alone would let Slurm spread the GPUs over nodes), one socket's GPUs (enforce-binding)
    assert sel.salloc == [
        "salloc",
        "--no-shell",
        "--nodes=1",
        "--gpus=h100:4",
        "--gres-flags=enforce-binding",
        "--nodelist=node2",
    ]


def test_two_node_binding_agrees_with_scontrol_per_node(dgx: Any) -> None:
    runner = dgx.runner()
    alloc = Allocation.submit(
        ["-N2", "-n4", "--gpus=4", "--gpu-bind=closest", "--gres-flags=enforce-binding", "-t", "5"],
        runner=runner,
    )
    try:
        alloc.wait(timeout=30)
        table = explain_binding(alloc)
        truth = _scontrol_records(runner, alloc.job_id or "")
        assert set(table.nodes()) == set(truth) == {"node1", "node2"}
        assert len(table.rows) == 4
        for node, (idx, cpus) in truth.items():
            assert set(table.highlight_gpus(node)) == idx
            assert all(r.slurm_cpus == cpus for r in table.rows if r.node == node)
        assert table.closest == HONOURED and table.enforce == HONOURED, table.text()
    finally:
        alloc.cancel()


def test_per_task_gpus_show_one_gpu_per_task(dgx: Any) -> None:
    # The probe step repeats the job's own GPU request, so each task sees what it was granted:
    # --gpus-per-task=1 binds one GPU per task. (With --gpu-bind=closest instead, Slurm hands each
    # task every GPU near its CPUs, which the table then shows.)
    runner = dgx.runner()
    alloc = Allocation.submit(
        ["-n2", "--gpus-per-task=1", "-t", "5"], runner=runner, poller=JobPoller(runner)
    )
    try:
        alloc.wait(timeout=30)
        table = explain_binding(alloc)
        per_task = [r.gpus for r in table.rows]
        assert len(per_task) == 2 and all(len(g) == 1 for g in per_task), per_task
        assert per_task[0] != per_task[1]
        held = {i for idx, _cpus in _scontrol_records(runner, alloc.job_id or "").values() for i in idx}
        assert {g[0] for g in per_task} <= held
    finally:
        alloc.cancel()


def _figure_gpus(page: str) -> list[set[int]]:
    """Per topology figure in a notebook display's HTML, in order: the GPUs it highlights."""
    import json

    def sources(node: Any) -> Any:
        if isinstance(node, dict):
            if node.get("name") == "ColumnDataSource":
                yield dict(e for e in node["attributes"]["data"]["entries"] if isinstance(e[1], list))
            for v in node.values():
                yield from sources(v)
        elif isinstance(node, list):
            for v in node:
                yield from sources(v)

    out = []
    for raw in re.findall(r"const docs_json = (.*?);\n", page):
        doc = json.loads(raw)
        for data in sources(json.loads(doc) if isinstance(doc, str) else doc):
            if "highlighted" in data and "numa" in data:
                out.append({i for i, h in zip(data["index"], data["highlighted"], strict=True) if h})
    return out


def test_a_two_node_job_shows_the_topology_of_every_node(dgx: Any) -> None:
    pytest.importorskip("bokeh")
    runner = dgx.runner()
    alloc = Allocation.submit(["-N2", "-n2", "--gpus-per-node=2", "-t", "5"], runner=runner)
    try:
        alloc.wait(timeout=30)
        truth = _scontrol_records(runner, alloc.job_id or "")
        job = alloc.topology()
        assert list(job) == alloc.nodes and set(job) == set(truth) == {"node1", "node2"}
        for node, (idx, _cpus) in truth.items():
            assert job[node].node == node and set(job[node].gpus) == idx
        assert alloc.topology("node2") == job["node2"]  # one node, as before
        text = str(job)
        assert text.count("this allocation's GPUs here:") == 2
        page = _shown(job)["text/html"]
        assert "slurmlab-figure-job-topology" in page
        assert _figure_gpus(page) == [truth[n][0] for n in alloc.nodes]
        # a job on a cluster without MIG: the one-line reason and the way to a MIG sandbox
        with pytest.raises(RequestError, match="has no MIG instances") as info:
            alloc.mig()
        assert "slurmlab sandbox up --profile h200-mig" in str(info.value)
    finally:
        alloc.cancel()


def test_a_two_node_mig_job_shows_its_slice_on_every_node(sandbox_factory: Any) -> None:
    pytest.importorskip("bokeh")
    sb = sandbox_factory("h200-mig", 2)
    runner = sb.runner()
    poller = JobPoller(runner, interval=0.5)
    alloc = Allocation.submit(["-N2", "-n2", "--gres=gpu:3g.71gb:1", "-t", "5"], runner=runner, poller=poller)
    try:
        alloc.wait(timeout=30)
        job = alloc.mig()
        assert set(job) == {"node1", "node2"}
        for node in job:
            (inst,) = job[node].slices()
            assert inst.profile == "3g.71gb" and inst.label.startswith(f"GPU {inst.gpu} · 3g.71gb @ ")
            assert f"this allocation's slices: {inst.label}" in job[node].summary()
        page = _shown(job)["text/html"]
        assert (
            "slurmlab-figure-job-mig" in page and page.count("const docs_json") == 1
        )  # one column of figures
        assert alloc.mig("node2") == job["node2"]
    finally:
        alloc.cancel()
        poller.stop()
