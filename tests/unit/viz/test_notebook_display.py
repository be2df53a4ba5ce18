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


@pytest.fixture(scope="module")
def shell() -> Any:
    """An IPython shell with slurmlab's figures registered with its display formatter, as a notebook kernel has."""
    from IPython.testing.globalipapp import get_ipython

    ip = get_ipython()
    assert notebook.install(ip)
    return ip


def _shown(model: Any, shell: Any) -> dict[str, Any]:
    """What the notebook shows for ``model``: the shell's display formatter's data."""
    data: dict[str, Any] = shell.display_formatter.format(model)[0]
    return data


@pytest.fixture(autouse=True)
def _bokehjs_each_time() -> Iterator[None]:
    notebook.resend_bokehjs()
    yield
    notebook.resend_bokehjs()


def _sandbox_topology(node: str, gpus: tuple[int, ...]) -> NodeTopology:
    base = slurmlab.topology(profile="dgx-h100")
    return NodeTopology(base.topology, "sandbox", "hardware profile dgx-h100", node, gpus, gpus)


def test_a_topology_shows_its_figure_with_its_gpus_and_keeps_its_text(shell: Any) -> None:
    t = _sandbox_topology("node1", (2, 3))
    bundle = _shown(t, shell)
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


def test_bokehjs_comes_inline_with_the_first_figure_only(shell: Any) -> None:
    t = slurmlab.topology(profile="seed")
    first = _shown(t, shell)["text/html"]
    second = _shown(t, shell)["text/html"]
    assert "bokeh.min.js" in first and "bokeh.min.js" not in second
    assert len(second) < len(first) / 10
    assert "slurmlab-bokehjs-missing" in second  # what a page that lost BokehJS shows instead of a blank
    notebook.resend_bokehjs()
    assert "bokeh.min.js" in _shown(t, shell)["text/html"]


def test_a_mig_layout_shows_its_slices_by_their_one_name(shell: Any) -> None:
    m = slurmlab.mig(profile="h200-mig")
    bundle = _shown(m, shell)
    assert "slurmlab-figure-mig" in bundle["text/html"]
    blocks = [c for doc in _docs(bundle["text/html"]) for c in _columns(doc) if "slice" in c and "part" in c]
    assert len(blocks) == 1
    names = set(blocks[0]["slice"])
    # the same names as the text summary
    assert "GPU 1 · 3g.71gb @ 4:4" in names and "GPU 1 · 3g.71gb @ 4:4" in bundle["text/plain"]
    assert names == {i.label for i in m.layout.instances()}


def test_without_bokeh_the_text_shows_with_the_extra_to_install(
    monkeypatch: pytest.MonkeyPatch, shell: Any
) -> None:
    for name in [m for m in sys.modules if m == "bokeh" or m.startswith("bokeh.")]:
        monkeypatch.delitem(sys.modules, name)
    monkeypatch.setitem(sys.modules, "bokeh", None)  # makes `import bokeh...` fail
    t = slurmlab.topology(profile="dgx-h100")
    bundle = _shown(t, shell)
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

    bundle = mime_bundle(object(), "topology", "text", "caption", draw=broken)
    assert bundle["text/plain"] == "text\n(no figure: drawing it failed (ValueError: no GPUs to draw))"
    with pytest.raises(ValueError, match="unknown kind"):
        mime_bundle(object(), "nonsense", "text", "caption", draw=broken)


def test_include_and_exclude_are_respected() -> None:
    t = slurmlab.topology(profile="seed")
    assert set(t._repr_mimebundle_(include={"text/plain"})) == {"text/plain"}
    assert set(t._repr_mimebundle_(exclude={"text/html"})) == {"text/plain"}


def test_a_job_shows_one_figure_per_node(shell: Any) -> None:
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
    page = _shown(job, shell)["text/html"]
    assert "slurmlab-figure-job-topology" in page
    hot = [[i for i, h in zip(c["index"], c["highlighted"], strict=True) if h] for c in _gpu_columns(page)]
    assert hot == [[0, 1], [6]]
    assert [t.split(":")[0] for t in _titles(page)] == ["node1", "node2"]


def test_a_jobs_mig_layouts_show_per_node(shell: Any) -> None:
    m = slurmlab.mig(profile="h200-mig")
    per_node = {
        n: type(m)(m.layout, "sandbox", "h200-mig", n, ((1, "4:4"),) if n == "node2" else ())
        for n in ("node1", "node2")
    }
    job = JobMig("9", per_node)
    assert "this allocation's slices: GPU 1 · 3g.71gb @ 4:4" in str(job)
    page = _shown(job, shell)["text/html"]
    assert "slurmlab-figure-job-mig" in page
    lit = [
        sorted(s for s, h in zip(c["slice"], c["highlighted"], strict=True) if h)
        for doc in _docs(page)
        for c in _columns(doc)
        if "slice" in c and "part" in c
    ]
    assert lit == [[], ["GPU 1 · 3g.71gb @ 4:4"] * 2]  # its compute and its memory block


def test_a_binding_table_shows_the_table_then_each_nodes_figure(shell: Any) -> None:
    dgx = slurmlab.topology(profile="dgx-h100")
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
    bundle = _shown(table, shell)
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


def test_the_front_door_registers_the_figures_with_the_shells_formatter_in_ipython_only() -> None:
    import subprocess

    report = (
        "ip = sys.modules['IPython'].get_ipython() if 'IPython' in sys.modules else None; "
        "f = ip.display_formatter.mimebundle_formatter if ip else None; "
        "print(sorted(k for k in (f.deferred_printers if f else {}) if k[0].startswith('slurmlab'))); "
        "print(sorted(m for m in sys.modules if m.split('.')[0] in ('bokeh', 'ipywidgets') or m in "
        "('slurmlab.core.gpu.node_models', 'slurmlab.core.gpu.job_hardware', 'slurmlab.viz.notebook')))"
    )

    def run(code: str) -> list[str]:
        out = subprocess.run(
            [sys.executable, "-c", f"import sys; {code}; {report}"], capture_output=True, text=True
        )
        assert out.returncode == 0, out.stderr
        return out.stdout.splitlines()

    # in a notebook kernel the shell runs before any cell: `import slurmlab` registers each model's figure with
    # its mime-bundle formatter, by name: neither bokeh nor the models are imported for it
    registered, loaded = run(
        "from IPython.core.interactiveshell import InteractiveShell; InteractiveShell.instance(); import slurmlab"
    )
    assert registered == str(sorted(notebook.FIGURE_TYPES))
    assert loaded == "['slurmlab.viz.notebook']"
    # a plain Python (an allocation's node running a worker) registers and loads none of it
    assert run("import slurmlab") == ["[]", "[]"]
    assert slurmlab.JobTopology is JobTopology and slurmlab.JobMig is JobMig


def test_the_shell_draws_a_model_only_through_its_registration(shell: Any) -> None:
    t = slurmlab.topology(profile="seed")
    assert "docs_json" in _shown(t, shell)["text/html"]
    # the figure comes from the registration in the shell's formatter, not from the model by itself
    formatter = shell.display_formatter.mimebundle_formatter
    registered = formatter.pop("slurmlab.core.gpu.node_models.NodeTopology")
    try:
        page = _shown(t, shell)["text/html"]
        assert "docs_json" not in page and "slurmlab-no-figure-why" in page
    finally:
        formatter.for_type_by_name("slurmlab.core.gpu.node_models", "NodeTopology", registered)
    assert "docs_json" in _shown(t, shell)["text/html"]


def test_without_the_drawers_the_text_says_how_to_load_them() -> None:
    # outside IPython's formatter (plain Python, an HTML exporter calling the model): text, and why no figure
    bundle = slurmlab.topology(profile="seed")._repr_mimebundle_()
    assert bundle["text/plain"].endswith(
        "(no figure: figures are drawn in IPython/Jupyter, where `import slurmlab` registers them with the "
        "shell's display formatter)"
    )
    assert "slurmlab-no-figure-why" in bundle["text/html"]
