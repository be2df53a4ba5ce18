"""Topology explorer: pick a node of the cluster (or a hardware profile), see its GPU topology and MIG layout,
choose N to see the best-connected set of N GPUs and the ``salloc`` line that asks for them. On a cluster node
the best set is chosen among the GPUs that were free when the explorer opened (``scontrol show node -d``), and
the explorer says what the taken ones cost.

    from slurmlab import TopologyExplorer
    TopologyExplorer(profiles=["dgx-h100"])            # a built-in profile, no cluster needed
    TopologyExplorer.from_cluster()                    # the nodes of the cluster the runner talks to

:class:`ExplorerModel` holds the logic without ipywidgets (used by the widget and by tests);
:class:`TopologyExplorer` builds the widgets lazily. Displayed, the explorer leaves a readable snapshot of its
pick (the explanation, the salloc line, the topology as text) for a saved notebook or the HTML course
(:mod:`slurmlab.widgets.saved`); ``select()`` from a cell brings every display of it up to date.
"""

from __future__ import annotations

import html
import shlex
from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from typing import Any

from slurmlab._extras import require
from slurmlab.core.gpu.placement import GpuChoice, best_gpus
from slurmlab.core.gpu.placement.request import INDICES_NOTE, LINKS_NOTE, salloc_advice, taken_on_node
from slurmlab.core.palette import INK_SOFT, WARN
from slurmlab.errors import RequestError, SlurmlabError
from slurmlab.widgets.saved import Snapshots, saved_bundle

__all__ = ["ExplorerModel", "NodeChoice", "Selection", "TopologyExplorer"]

STEERING_NOTE = (
    "Slurm picks the GPU indices itself: it prefers well-connected GPUs only when gres.conf records "
    "NVLinks (Links=); -w names the node, not the GPUs."
)


@dataclass(frozen=True)
class NodeChoice:
    """One entry of the picker: a cluster node or a hardware profile."""

    key: str  # "node:node1" or "profile:dgx-h100"
    label: str
    node: str | None = None
    profile: str | None = None
    gpus: int | None = None  # GPUs Slurm reports on the node (None: unknown)
    gpu_type: str | None = None
    record: Any = None  # the node as Slurm listed it (its GRES in use: the GPUs taken), or None


@dataclass(frozen=True)
class Selection:
    """What the explorer shows for one pick and one N."""

    choice: NodeChoice
    topology: Any = None  # NodeTopology, or None when unknown / no GPUs
    mig: Any = None  # NodeMig, or None
    n: int = 0
    best: GpuChoice | None = None
    salloc: list[str] | None = None
    message: str = ""
    taken: str = ""  # which GPUs jobs held when the explorer opened, in words ("" for a profile)
    notes: tuple[str, ...] = ()  # what the salloc line can and cannot do

    @property
    def salloc_line(self) -> str | None:
        return shlex.join(self.salloc) if self.salloc else None


class ExplorerModel:
    """The explorer's state and logic, free of ipywidgets."""

    def __init__(self, choices: Sequence[NodeChoice], runner: Any = None) -> None:
        if not choices:
            raise SlurmlabError(
                "nothing to explore: no nodes and no profiles given",
                hint="TopologyExplorer(profiles=['dgx-h100']) or TopologyExplorer.from_cluster()",
            )
        self.choices = list(choices)
        self.runner = runner
        self._cache: dict[str, tuple[Any, Any, str]] = {}

    def choice(self, key: str) -> NodeChoice:
        for c in self.choices:
            if c.key == key:
                return c
        raise KeyError(f"no choice {key!r} (choices: {', '.join(c.key for c in self.choices)})")

    def _load(self, c: NodeChoice) -> tuple[Any, Any, str]:
        if c.key in self._cache:
            return self._cache[c.key]
        from slurmlab.slurm import hardware_files

        topo: Any = None
        mig: Any = None
        message = ""
        try:
            if c.gpus == 0:
                message = f"{c.node or c.profile} has no GPUs: nothing to place."
            elif c.profile is not None:
                topo = hardware_files.topology(profile=c.profile)
                mig = _mig_or_none(lambda: hardware_files.mig(profile=c.profile or ""))
            elif c.node is not None:
                hw = hardware_files.sandbox_hardware(self.runner) if self.runner is not None else None
                if hw is None:
                    message = (
                        f"The topology of {c.node} is known only from inside an allocation: allocate it "
                        "(the line below) and call alloc.topology(), or load a saved `nvidia-smi topo -m` "
                        "with slurmlab.topology(path)."
                    )
                else:
                    topo = hw.node_topology(c.node)
                    mig = _mig_or_none(lambda: hw.node_mig(c.node or ""))
        except SlurmlabError as exc:
            message = f"could not load the topology: {exc}"
        self._cache[c.key] = (topo, mig, message)
        return topo, mig, message

    def select(self, key: str, n: int = 0) -> Selection:
        c = self.choice(key)
        topo, mig, message = self._load(c)
        if topo is None:
            salloc = _salloc(c, n, c.gpu_type) if n > 0 and c.node and c.gpus else None
            return Selection(c, None, None, n, None, salloc, message)
        mig_gpus = {g.index for g in mig.layout.gpus} if mig is not None else set()
        whole = [g.index for g in topo.topology.gpus if g.index not in mig_gpus]
        held = taken_on_node(c.record, topo.idx_to_gpu) if c.record is not None else None
        taken = [i for i in held.gpus if i in whole] if held is not None else []
        said = _taken_words(held) if held is not None else ""
        if n <= 0:
            return Selection(c, topo, mig, 0, None, None, message, said)
        if n > len(whole):
            extra = f" ({len(mig_gpus)} are split into MIG instances)" if mig_gpus else ""
            return Selection(
                c,
                topo,
                mig,
                n,
                None,
                None,
                f"{c.node or c.profile} has {len(whole)} whole GPUs{extra}; choose N up to that.",
                said,
            )
        try:
            best = best_gpus(topo.topology, n, available=whole, taken=taken)
        except RequestError as exc:  # fewer free than N: say so, as the CLI does
            return Selection(c, topo, mig, n, None, None, str(exc).replace("\n  -> ", "; "), said)
        gpu_type = c.gpu_type or getattr(topo, "gpu_type", None)
        free = len(whole) - len(taken) if held is not None else None
        advice = salloc_advice(topo.topology, best, node=c.node, gpu_type=gpu_type, free=free)
        salloc = _salloc_line(list(advice.options))
        # STEERING_NOTE, shown under every line, already says what INDICES_NOTE and LINKS_NOTE say
        notes = tuple(x for x in advice.notes if x not in (INDICES_NOTE, LINKS_NOTE))
        return Selection(c, topo, mig, n, best, salloc, message, said, notes)

    def max_gpus(self, key: str) -> int:
        c = self.choice(key)
        topo, mig, _ = self._load(c)
        if topo is None:
            return c.gpus or 0
        mig_gpus = {g.index for g in mig.layout.gpus} if mig is not None else set()
        return len([g for g in topo.topology.gpus if g.index not in mig_gpus])


def _mig_or_none(load: Any) -> Any:
    from slurmlab.errors import RequestError

    try:
        return load()
    except RequestError:
        return None  # no MIG instances on this hardware


def _taken_words(held: Any) -> str:
    head = (
        f"GPU{'s' if len(held.gpus) > 1 else ''} {held.gpus_text} "
        f"{'were' if len(held.gpus) > 1 else 'was'} taken"
        if held.gpus
        else "no GPU was taken"
    ) + " when the explorer opened (scontrol show node -d); open it again to refresh"
    return "; ".join([head, *held.notes])


def _salloc_line(options: list[str]) -> list[str]:
    from slurmlab.core.request.pipeline import read_request
    from slurmlab.slurm.allocation import salloc_argv

    return salloc_argv(read_request(options).to_argv())


def _salloc(c: NodeChoice, n: int, gpu_type: str | None) -> list[str]:
    # -N 1: with -w alone Slurm may spread --gpus=N over several nodes
    tokens = ["-N", "1", f"--gpus={gpu_type}:{n}" if gpu_type else f"--gpus={n}"]
    if c.node:
        tokens = ["-w", c.node, *tokens]
    return _salloc_line(tokens)


def _choices_from_nodes(nodes: Iterable[Any]) -> list[NodeChoice]:
    out = []
    for nd in nodes:
        total = int(nd.gpu_total)
        types = [t for t in nd.gpu_types() if t] if callable(getattr(nd, "gpu_types", None)) else []
        gpu_type = types[0] if len(types) == 1 else None
        used = f", {nd.gpu_used} in use" if total and nd.gpu_used else ""
        label = (
            f"{nd.name} ({total} GPUs{', ' + gpu_type if gpu_type else ''}, {nd.state}{used})"
            if total
            else f"{nd.name} (no GPUs, {nd.state})"
        )
        out.append(
            NodeChoice(f"node:{nd.name}", label, node=nd.name, gpus=total, gpu_type=gpu_type, record=nd)
        )
    return out


class TopologyExplorer:
    """The widget: a picker, an N slider, the explanation with the salloc line, and the Bokeh views."""

    def __init__(
        self,
        *,
        profiles: Iterable[str] = (),
        nodes: Iterable[NodeChoice] = (),
        runner: Any = None,
        n: int = 0,
    ) -> None:
        choices = list(nodes) + [NodeChoice(f"profile:{p}", f"profile {p}", profile=p) for p in profiles]
        self.model = ExplorerModel(choices, runner)
        self._snapshots = Snapshots(self._repr_mimebundle_)
        w = require("ipywidgets", feature="the topology explorer", extra="widgets")
        self._w = w
        first = self.model.choices[0].key
        self.picker = w.Dropdown(
            options=[(c.label, c.key) for c in self.model.choices], value=first, description="node"
        )
        self.count = w.BoundedIntText(
            value=0, min=0, max=max(self.model.max_gpus(first), 0), description="N GPUs"
        )
        self.info = w.HTML()
        self.views = w.Output()
        self.selection: Selection = self.model.select(first, 0)
        self.widget = w.VBox([w.HBox([self.picker, self.count]), self.info, self.views])
        self.picker.observe(self._on_pick, names="value")
        self.count.observe(self._on_count, names="value")
        self._render()
        if n:
            self.count.value = n

    @classmethod
    def from_cluster(
        cls, runner: Any = None, *, profiles: Iterable[str] = (), n: int = 0
    ) -> TopologyExplorer:
        """The nodes of the cluster the runner (default: the process-wide one) talks to."""
        from slurmlab.slurm import queries
        from slurmlab.slurm.runner import get_runner

        runner = runner or get_runner()
        return cls(
            nodes=_choices_from_nodes(queries.list_nodes(runner)), profiles=profiles, runner=runner, n=n
        )

    # ---- events ------------------------------------------------------------------------------------
    def _on_pick(self, change: dict[str, Any]) -> None:
        key = change["new"]
        self.count.max = max(self.model.max_gpus(key), 0)
        self.count.value = min(self.count.value, self.count.max)
        self.selection = self.model.select(key, self.count.value)
        self._render()

    def _on_count(self, change: dict[str, Any]) -> None:
        self.selection = self.model.select(self.picker.value, int(change["new"]))
        self._render()

    def select(self, key: str | None = None, n: int | None = None) -> Selection:
        """Set the pick and/or N from code (as the controls would)."""
        if key is not None:
            self.picker.value = key
        if n is not None:
            self.count.value = n
        self._snapshots.refresh()  # a pick made from code: the saved explorer follows
        return self.selection

    # ---- drawing -----------------------------------------------------------------------------------
    def _render(self) -> None:
        self.info.value = info_html(self.selection)
        self.views.clear_output()
        sel = self.selection
        self.figures: list[Any] = []
        if sel.topology is None:
            return
        from slurmlab.viz.mig_view import mig_figure
        from slurmlab.viz.topology_view import topology_figure

        figs = [topology_figure(sel.topology.topology, highlight_gpus=sel.best.gpus if sel.best else ())]
        if sel.mig is not None:
            figs.append(mig_figure(**sel.mig.figure_args()))
        self.figures = figs
        # shown already (a pick made in the page): BokehJS goes before the views if no output carried it yet
        loader = _bokehjs(figs[0]) if self._snapshots.shown else ""
        with self.views:
            if loader:
                _show_html(loader)
            for fig in figs:
                _show(fig)

    # ---- what a saved notebook keeps ---------------------------------------------------------------
    def snapshot_text(self) -> str:
        sel = self.selection
        lines = [f"topology explorer: {sel.choice.label}, N GPUs {sel.n}"]
        if sel.message:
            lines.append(sel.message)
        if sel.best is not None:
            lines.append(f"best {sel.n}: {sel.best.explain()}")
        if sel.salloc_line:
            lines.append(sel.salloc_line)
        return "\n".join(lines)

    def snapshot_html(self) -> str:
        sel = self.selection
        head = (
            f"<div><b>topology explorer</b>: {html.escape(sel.choice.label)}, N GPUs {sel.n}</div>"
            if sel.topology is None
            else f"<div><b>topology explorer</b>, N GPUs {sel.n}</div>"
        )
        topo = (
            f"<details class='slurmlab-figure-text'><summary>the topology as text</summary>"
            f"<pre>{html.escape(sel.topology.summary())}</pre></details>"
            if sel.topology is not None
            else ""
        )
        return f"<div class='slurmlab-explorer'>{head}{info_html(sel)}{topo}</div>"

    def _repr_mimebundle_(self, include: Any = None, exclude: Any = None) -> dict[str, object]:
        return saved_bundle(
            self.widget,
            "explorer",
            self.snapshot_text(),
            self.snapshot_html(),
            include=include,
            exclude=exclude,
        )

    def _ipython_display_(self) -> None:
        # jupyter_bokeh's views draw with the page's BokehJS and load none: it goes first, in the cell's own
        # output area (which renders in order), once per kernel (``slurmlab.viz.notebook.resend_bokehjs``)
        loader = _bokehjs(self.figures[0]) if self.figures else ""
        if loader:
            _show_html(loader)
        self._snapshots.show()


def _bokehjs(fig: Any) -> str:
    """BokehJS inline, where jupyter_bokeh will draw ``fig`` and no output of this kernel carried it yet."""
    try:
        require("jupyter_bokeh", feature="the topology explorer", extra="widgets")
    except ImportError:
        return ""  # the static figure HTML carries its own
    from slurmlab.viz.notebook import bokehjs_once

    loader = bokehjs_once(fig)
    return loader and f"<div class='slurmlab-bokehjs' style='display:none'>{loader}</div>"


def _show_html(page: str) -> None:
    ipd = require("IPython.display", feature="the topology explorer", extra="widgets")
    ipd.display(ipd.HTML(page))


def _show(fig: Any) -> None:
    display = require("IPython.display", feature="the topology explorer", extra="widgets").display
    try:
        bokeh_model = require("jupyter_bokeh", feature="the topology explorer", extra="widgets").BokehModel
    except ImportError:
        from slurmlab.viz.export import figure_html

        display(
            require("IPython.display", feature="the topology explorer", extra="widgets").HTML(
                figure_html(fig)
            )
        )
        return
    display(bokeh_model(fig))


def info_html(sel: Selection) -> str:
    """The text part of the explorer: source, best set and why, the salloc line, notes."""
    parts = []
    if sel.topology is not None:
        parts.append(
            f"<div><b>{html.escape(sel.choice.label)}</b> — topology from "
            f"{html.escape(sel.topology.source)} ({html.escape(sel.topology.detail)})</div>"
        )
    if sel.taken:
        parts.append(f"<div>{html.escape(sel.taken)}</div>")
    if sel.message:
        parts.append(f"<div style='color:{WARN}'>{html.escape(sel.message)}</div>")
    if sel.best is not None:
        parts.append(f"<div>best {sel.n}: {html.escape(sel.best.explain()).replace(chr(10), '<br>')}</div>")
    if sel.salloc_line:
        parts.append(
            f"<pre>{html.escape(sel.salloc_line)}</pre>"
            f"<div style='color:{INK_SOFT}'>{html.escape(STEERING_NOTE)}</div>"
        )
        parts += [f"<div style='color:{INK_SOFT}'>{html.escape(note)}</div>" for note in sel.notes]
    return "".join(parts)
