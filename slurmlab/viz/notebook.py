"""The figures the hardware models draw when a notebook shows them: no Bokeh import, no ``figure_args()``.

``import slurmlab`` in IPython (every notebook kernel) and ``%load_ext slurmlab`` call :func:`install`, which
registers one function per kind of model with the shell's own display formatter (IPython's mime-bundle
formatter, ``for_type_by_name``: by module and class name, so neither the models nor bokeh are imported to
register them). When the shell displays a model it calls that function, which asks the model for its bundle
with the figure's drawing function (:func:`slurmlab.core.gpu.figure_display.mime_bundle`; core cannot import
viz); bokeh itself loads when the first figure is drawn. So in a notebook::

    slurmlab.topology(profile="dgx-h100")             # the topology figure
    slurmlab.mig("mig-lgi.txt")                       # the MIG slice grid of a saved capture
    alloc.topology(); alloc.mig()                     # every node of the job, this job's GPUs / slices marked
    alloc.explain_binding()                           # the table, then per node the tasks' GPUs and CPUs

The HTML carries BokehJS inline (clusters often have no internet) with the first figure of the kernel, and only
the figure's own data after that: a page that has shown one figure has BokehJS. :func:`figure_html` is that HTML
for any Bokeh figure or layout.
"""

from __future__ import annotations

import html
import threading
from collections.abc import Mapping
from typing import Any

from slurmlab.core.gpu.figure_display import FigureHtml
from slurmlab.viz._bokeh import bokeh

__all__ = ["FIGURE_TYPES", "bokehjs_once", "figure_html", "install", "resend_bokehjs"]

_FEATURE = "the notebook figures"
_state = {"bokehjs_sent": False}
_lock = threading.Lock()  # the live usage chart asks from the panel's updater thread


def resend_bokehjs() -> None:
    """Put BokehJS into the next figure or live view again (after the page was reloaded and the output that
    carried it cleared)."""
    _state["bokehjs_sent"] = False


def _bokehjs(fig: Any) -> str:
    """The script tags of BokehJS (only the parts ``fig`` needs), inline."""
    bundle = bokeh("embed.bundle", _FEATURE)
    resources = bokeh("resources", _FEATURE)
    scripts: str = bundle.bundle_for_objs_and_resources([fig], resources.INLINE).scripts()
    return scripts


def bokehjs_once(fig: Any) -> str:
    """The inline script tags of BokehJS that ``fig`` needs, the first time this kernel asks (or the first after
    :func:`resend_bokehjs`); "" after that. Live views of figures (jupyter_bokeh's ``BokehModel``) need it too:
    they draw with the page's BokehJS and load none of their own."""
    with _lock:
        if _state["bokehjs_sent"]:
            return ""
        _state["bokehjs_sent"] = True
    return _bokehjs(fig)


def figure_html(fig: Any) -> str:
    """HTML that draws ``fig`` in a notebook output: its div and its data, BokehJS first where not sent yet."""
    nb = bokeh("embed.notebook", _FEATURE)
    script, div, _doc = nb.notebook_content(fig)
    loader = bokehjs_once(fig)
    missing = (
        "<div class='slurmlab-bokehjs-missing' style='display:none'>the figure needs BokehJS, which this "
        "page lost (reloaded?): run <code>slurmlab.viz.notebook.resend_bokehjs()</code> and this cell "
        "again</div>"
    )
    # when the data's own retries give up, say so instead of an empty space
    watch = (
        "<script>(function(){var el=document.currentScript&&document.currentScript.previousElementSibling;"
        "setTimeout(function(){if(window.Bokeh===undefined&&el){el.style.display='block';}},3000);})();"
        "</script>"
    )
    return f"{loader}{div}<script type='text/javascript'>{script}</script>{missing}{watch}"


def _column(figures: list[Any]) -> Any:
    if len(figures) == 1:
        return figures[0]
    return bokeh("layouts", _FEATURE).column(*figures)


def _titled(fig: Any, node: str | None) -> Any:
    if node:
        fig.title.text = f"{node}: {fig.title.text}"
    return fig


def _topology(model: Any) -> str:
    from slurmlab.viz.topology_view import topology_figure

    return figure_html(_titled(topology_figure(**model.figure_args()), model.node))


def _mig(model: Any) -> str:
    from slurmlab.viz.mig_view import mig_figure

    return figure_html(_titled(mig_figure(**model.figure_args()), model.node))


def _per_node(per_node: Mapping[str, Any], draw: Any) -> str:
    return figure_html(_column([_titled(draw(**m.figure_args()), node) for node, m in per_node.items()]))


def _job_topology(model: Any) -> str:
    from slurmlab.viz.topology_view import topology_figure

    return _per_node(model.per_node, topology_figure)


def _job_mig(model: Any) -> str:
    from slurmlab.viz.mig_view import mig_figure

    return _per_node(model.per_node, mig_figure)


def _binding(table: Any) -> str:
    """Per node with a topology: its figure with the tasks' GPUs highlighted and their CPUs coloured."""
    from slurmlab.viz.topology_view import topology_figure

    nodes = [n for n in table.nodes() if n in table.topologies]
    if not nodes:
        return "<div class='slurmlab-no-figure-why'>no figure: no node of this job has a known topology</div>"
    figs = [_titled(topology_figure(**table.figure_args(n)), n) for n in nodes]
    left = [n for n in table.nodes() if n not in table.topologies]
    note = (
        f"<div class='slurmlab-figure-note'>no topology of {html.escape(', '.join(left))}</div>"
        if left
        else ""
    )
    return figure_html(_column(figs)) + note


def _bundle_with(draw: FigureHtml) -> Any:
    """What the shell's formatter calls for a model: the model's own bundle, with ``draw`` making its figure."""

    def bundle(model: Any) -> dict[str, str]:
        shown: dict[str, str] = model._repr_mimebundle_(draw=draw)
        return shown

    return bundle


# (module, class) of each model that draws itself -> its drawing function; by name, so nothing is imported
FIGURE_TYPES: dict[tuple[str, str], FigureHtml] = {
    ("slurmlab.core.gpu.node_models", "NodeTopology"): _topology,
    ("slurmlab.core.gpu.node_models", "NodeMig"): _mig,
    ("slurmlab.core.gpu.job_hardware", "JobTopology"): _job_topology,
    ("slurmlab.core.gpu.job_hardware", "JobMig"): _job_mig,
    ("slurmlab.core.gpu.binding.table", "BindingTable"): _binding,
}


def _mimebundle_formatter(shell: Any) -> Any:
    formatter = getattr(getattr(shell, "display_formatter", None), "mimebundle_formatter", None)
    return formatter if callable(getattr(formatter, "for_type_by_name", None)) else None


def install(shell: Any) -> bool:
    """Register the models' figures with ``shell``'s display formatter (an IPython ``InteractiveShell``; None or
    a shell without one: nothing to do). Registering again replaces; nothing is imported. True if registered."""
    formatter = _mimebundle_formatter(shell)
    if formatter is None:
        return False
    for (module, name), draw in FIGURE_TYPES.items():
        formatter.for_type_by_name(module, name, _bundle_with(draw))
    return True
