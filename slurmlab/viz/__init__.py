"""Bokeh figures of slurmlab's models. Bokeh is imported only when a figure is built.

In a notebook no call is needed: a topology, a MIG layout or a binding table evaluated alone draws itself
(``alloc.topology()``, ``alloc.mig()``, ``alloc.explain_binding()``, ``slurmlab.mig(path)``; see
:mod:`slurmlab.viz.notebook`). The functions below place a figure yourself, e.g.
``show(topology_figure(**alloc.topology("node1").figure_args()))``.

``topology_figure`` (GPUs, NVLink, PCIe, NICs, CPU sets), ``mig_figure`` (MIG slices),
``mig_catalogue_figure`` (what can still be carved: an ``-lgip``/``-lgipp`` catalogue) and ``gantt_figure`` (a
time-slicing measurement: who ran when); ``export_png`` renders
a figure in headless chromium and ``save_html`` writes a standalone page with inline resources (works without
internet).
"""

from __future__ import annotations

from typing import Any

__all__ = ["export_png", "gantt_figure", "mig_catalogue_figure", "mig_figure", "save_html", "topology_figure"]


def __getattr__(name: str) -> Any:
    # keep `import slurmlab.viz` free of bokeh: the submodule is imported on first use
    if name == "topology_figure":
        from slurmlab.viz.topology_view import topology_figure

        return topology_figure
    if name in ("mig_figure", "mig_catalogue_figure"):
        from slurmlab.viz import mig_view

        return getattr(mig_view, name)
    if name == "gantt_figure":
        from slurmlab.viz.gantt import gantt_figure

        return gantt_figure
    if name in ("export_png", "save_html"):
        from slurmlab.viz import export

        return getattr(export, name)
    raise AttributeError(f"module 'slurmlab.viz' has no attribute {name!r}")


def __dir__() -> list[str]:
    # the figures load on first use (above), and dir() offers them before that
    return sorted({*globals(), *__all__})
