"""Topology, MIG and binding objects draw themselves in a notebook: what their display bundle holds."""

from __future__ import annotations

import json
import re
import sys
from collections.abc import Iterator
from typing import Any

import pytest

pytest.importorskip("bokeh", reason="the viz extra (bokeh) is not installed")

import slurmlab
from slurmlab.core.gpu.binding import NodeRecord, TaskReport, explain
from slurmlab.core.gpu.figure_display import mime_bundle
from slurmlab.core.gpu.job_hardware import JobMig, JobTopology
from slurmlab.core.gpu.node_models import NodeTopology
from slurmlab.slurm.hardware_files import mig_from_profile, topology_from_profile
from slurmlab.viz import notebook


def _docs(html: str) -> list[dict[str, Any]]:
    """The Bokeh documents embedded in a figure's HTML, decoded."""
    found = re.findall(r"const docs_json = (.*?);\n", html)
    assert found, "no Bokeh document in the HTML"
    out = []
    for raw in found:
        doc = json.loads(raw)
        out.append(json.loads(doc) if isinstance(doc, str) else doc)
    return out


def _columns(node: Any) -> Iterator[dict[str, Any]]:
    """Every ColumnDataSource's data (column -> values; only columns serialised as plain lists)."""
    if isinstance(node, dict):
        if node.get("name") == "ColumnDataSource":
            entries = node.get("attributes", {}).get("data", {}).get("entries", [])
            yield {k: v for k, v in entries if isinstance(v, list)}
        for v in node.values():
            yield from _columns(v)
    elif isinstance(node, list):
        for v in node:
            yield from _columns(v)


def _gpu_columns(html: str) -> list[dict[str, Any]]:
    """The data of each topology figure's GPU circles (name, index, highlighted), in figure order: the rows of kind
    ``gpus`` of its ``nodes`` layer."""
    out = []
    for doc in _docs(html):
        for c in _columns(doc):
            if "gpus" in c.get("kind", ()):
                keep = [i for i, k in enumerate(c["kind"]) if k == "gpus"]
                out.append({key: [values[i] for i in keep] for key, values in c.items()})
    return out


def _titles(html: str) -> list[str]:
    return re.findall(
        r'"name":"Title","id":"[^"]+","attributes":\{"text":"([^"]*)"',
        json.dumps(_docs(html), separators=(",", ":")),
    )


@pytest.fixture(autouse=True)
def _bokehjs_each_time() -> Iterator[None]:
    notebook.resend_bokehjs()
    yield
    notebook.resend_bokehjs()


def _sandbox_topology(node: str, gpus: tuple[int, ...]) -> NodeTopology:
    base = topology_from_profile("dgx-h100")
    return NodeTopology(base.topology, "sandbox", "hardware profile dgx-h100", node, gpus, gpus)


def test_a_topology_shows_its_figure_with_its_gpus_and_keeps_its_text() -> None:
    t = _sandbox_topology("node1", (2, 3))
    bundle = t._repr_mimebundle_()
    assert bundle["text/plain"] == t.summary()
    page = bundle["text/html"]
    assert "slurmlab-figure slurmlab-figure-topology" in page and "slurmlab-figure-caption" in page
    assert "this allocation&#x27;s GPUs: 2, 3" in page  # the caption over the figure
    (gpus,) = _gpu_columns(page)
    assert gpus["name"] == [f"GPU{i}" for i in range(8)]
    assert [i for i, h in zip(gpus["index"], gpus["highlighted"], strict=True) if h] == [2, 3]
    assert _titles(page)[0].startswith("node1: 8 GPUs")
    # the text is there too, folded under the figure
    assert "slurmlab-figure-text" in page and "this allocation&#x27;s GPUs here: 2, 3" in page


def test_bokehjs_comes_inline_with_the_first_figure_only() -> None:
    t = topology_from_profile("seed")
    first = t._repr_mimebundle_()["text/html"]
    second = t._repr_mimebundle_()["text/html"]
    assert "bokeh.min.js" in first and "bokeh.min.js" not in second
    assert len(second) < len(first) / 10
    assert "slurmlab-bokehjs-missing" in second  # what a page that lost BokehJS shows instead of a blank
    notebook.resend_bokehjs()
    assert "bokeh.min.js" in t._repr_mimebundle_()["text/html"]


def test_a_mig_layout_shows_its_slices_by_their_one_name() -> None:
    m = mig_from_profile("h200-mig")
    bundle = m._repr_mimebundle_()
    assert "slurmlab-figure-mig" in bundle["text/html"]
    blocks = [c for doc in _docs(bundle["text/html"]) for c in _columns(doc) if "slice" in c and "part" in c]
    assert len(blocks) == 1
    names = set(blocks[0]["slice"])
    # the same names as the text summary
    assert "GPU 1 · 3g.71gb @ 4:4" in names and "GPU 1 · 3g.71gb @ 4:4" in bundle["text/plain"]
    assert names == {i.label for i in m.layout.instances()}


def test_without_bokeh_the_text_shows_with_the_extra_to_install(monkeypatch: pytest.MonkeyPatch) -> None:
    for name in [m for m in sys.modules if m == "bokeh" or m.startswith("bokeh.")]:
        monkeypatch.delitem(sys.modules, name)
    monkeypatch.setitem(sys.modules, "bokeh", None)  # makes `import bokeh...` fail
    t = topology_from_profile("dgx-h100")
    bundle = t._repr_mimebundle_()
    assert bundle["text/plain"].startswith(t.summary())
    assert bundle["text/plain"].endswith(
        "(no figure: the topology view needs bokeh — pip install 'slurmlab[viz]')"
    )
    page = bundle["text/html"]
    assert "slurmlab-no-figure" in page and "docs_json" not in page
    assert (
        "<div class='slurmlab-no-figure-why'>no figure: the topology view needs bokeh — pip install "
        "&#x27;slurmlab[viz]&#x27;</div>" in page
    )


def test_a_drawer_that_fails_says_so_in_one_line_never_a_traceback() -> None:
    def broken(_model: object) -> str:
        raise ValueError("no GPUs to draw\nsecond line")

    from slurmlab.core.gpu import figure_display

    saved = figure_display.drawer("topology")
    figure_display.register_drawer("topology", broken)
    try:
        bundle = mime_bundle(object(), "topology", "text", "caption")
    finally:
        assert saved is not None
        figure_display.register_drawer("topology", saved)
    assert bundle["text/plain"] == "text\n(no figure: drawing it failed (ValueError: no GPUs to draw))"
    with pytest.raises(ValueError, match="unknown kind"):
        figure_display.register_drawer("nonsense", broken)


def test_include_and_exclude_are_respected() -> None:
    t = topology_from_profile("seed")
    assert set(t._repr_mimebundle_(include={"text/plain"})) == {"text/plain"}
    assert set(t._repr_mimebundle_(exclude={"text/html"})) == {"text/plain"}


def test_a_job_shows_one_figure_per_node() -> None:
    job = JobTopology(
        "7",
        {"node1": _sandbox_topology("node1", (0, 1)), "node2": _sandbox_topology("node2", (6,))},
        {"node3": "no topology source answered"},
    )
    assert list(job) == ["node1", "node2"] and job["node2"].gpus == (6,) and len(job) == 2
    with pytest.raises(KeyError, match="no topology of 'node3' in job 7: no topology source answered"):
        job["node3"]
    assert job.figure_args()["highlight_gpus"] == (0, 1) and job.figure_args("node2")["highlight_gpus"] == (
        6,
    )
    text = str(job)
    assert "node1" in text and "node2" in text and "node3: no topology (no topology source answered)" in text
    page = job._repr_mimebundle_()["text/html"]
    assert "slurmlab-figure-job-topology" in page
    hot = [[i for i, h in zip(c["index"], c["highlighted"], strict=True) if h] for c in _gpu_columns(page)]
    assert hot == [[0, 1], [6]]
    assert [t.split(":")[0] for t in _titles(page)] == ["node1", "node2"]


def test_a_jobs_mig_layouts_show_per_node() -> None:
    m = mig_from_profile("h200-mig")
    per_node = {
        n: type(m)(m.layout, "sandbox", "h200-mig", n, ((1, "4:4"),) if n == "node2" else ())
        for n in ("node1", "node2")
    }
    job = JobMig("9", per_node)
    assert "this allocation's slices: GPU 1 · 3g.71gb @ 4:4" in str(job)
    page = job._repr_mimebundle_()["text/html"]
    assert "slurmlab-figure-job-mig" in page
    lit = [
        sorted(s for s, h in zip(c["slice"], c["highlighted"], strict=True) if h)
        for doc in _docs(page)
        for c in _columns(doc)
        if "slice" in c and "part" in c
    ]
    assert lit == [[], ["GPU 1 · 3g.71gb @ 4:4"] * 2]  # its compute and its memory block


def test_a_binding_table_shows_the_table_then_each_nodes_figure() -> None:
    dgx = topology_from_profile("dgx-h100")
    reports = [
        TaskReport(0, "n1", (0, 4), ("0",), frozenset({0, 1}), 224),
        TaskReport(1, "n2", (4,), ("4",), frozenset({60, 61}), 224),
    ]
    table = explain(
        reports,
        {"n1": dgx, "n2": dgx},
        [NodeRecord("n1", (0, 4), frozenset({0, 1})), NodeRecord("n2", (4,), frozenset({60, 61}))],
        tres_bind="gres/gpu:closest",
        job_id="12",
    )
    bundle = table._repr_mimebundle_()
    assert bundle["text/plain"] == table.text()
    page = bundle["text/html"]
    assert page.index("slurmlab-binding") < page.index("docs_json")  # the table first, then the figures
    hot = [[i for i, h in zip(c["index"], c["highlighted"], strict=True) if h] for c in _gpu_columns(page)]
    assert hot == [[0], [4]]
    tasks = [c for doc in _docs(page) for c in _columns(doc) if "task" in c and "cpu" in c]
    assert [sorted(c for c, t in zip(col["cpu"], col["task"], strict=True) if t != "-") for col in tasks] == [
        [0, 1],
        [60, 61],
    ]


def test_the_front_door_registers_the_drawers_in_ipython_only() -> None:
    import subprocess

    check = (
        "from slurmlab.core.gpu.figure_display import KINDS, drawer; "
        "print(all(drawer(k) for k in KINDS), any(m.startswith('bokeh') for m in sys.modules), "
        "'slurmlab.viz.notebook' in sys.modules)"
    )
    # in a notebook kernel IPython is loaded before any cell: the drawers are there, bokeh not yet
    out = subprocess.run(
        [sys.executable, "-c", f"import sys, IPython, slurmlab; {check}"],
        capture_output=True,
        text=True,
        check=True,
    ).stdout
    assert out.split() == ["True", "False", "True"]
    # a plain Python (an allocation's node running a worker) loads none of it
    out = subprocess.run(
        [sys.executable, "-c", f"import sys, slurmlab; {check}"], capture_output=True, text=True, check=True
    ).stdout
    assert out.split() == ["False", "False", "False"]
    assert slurmlab.JobTopology is JobTopology and slurmlab.JobMig is JobMig


def test_without_the_drawers_the_text_says_how_to_load_them(monkeypatch: pytest.MonkeyPatch) -> None:
    from slurmlab.core.gpu import figure_display

    monkeypatch.setattr(figure_display, "_DRAWERS", {})
    bundle = topology_from_profile("seed")._repr_mimebundle_()
    assert bundle["text/plain"].endswith(
        "(no figure: slurmlab's notebook figures are not loaded (import slurmlab.viz.notebook))"
    )
    assert "slurmlab-no-figure-why" in bundle["text/html"]
