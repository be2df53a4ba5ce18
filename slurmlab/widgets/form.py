"""A GPU request form: only what the cluster offers, checked as you type, with the exact ``salloc`` line.

Partition (from the cluster), GPU type (only those the partition has), count, sharing (whole GPU,
shards, MPS, MIG slice — only what the partition offers), nodes and tasks, ``--gpu-bind``,
enforce-binding and time. Every change re-validates with the same rules as ``%salloc`` and shows
the command and its plain-words explanation, or each problem with its fix. Submit creates the
allocation and shows its live panel under the form.

Displayed, the form leaves a readable snapshot of its fields, its command and what it submitted for a saved
notebook or the HTML course (:mod:`slurmlab.widgets.saved`); ``render()`` called from a cell brings every
display of it up to date.
"""

from __future__ import annotations

import html
import shlex
import threading
from collections.abc import Callable
from pathlib import Path
from typing import Any

from slurmlab._extras import require
from slurmlab.core.gpu.mig import is_mig_type
from slurmlab.core.palette import FAILED, WARN
from slurmlab.errors import SlurmlabError
from slurmlab.widgets.live import LiveUpdater, get_updater
from slurmlab.widgets.saved import Snapshots, saved_bundle

__all__ = ["BIND_CHOICES", "RequestForm", "is_mig_type", "sharing_modes"]

BIND_CHOICES = (
    ("(Slurm's default)", ""),
    ("closest: GPUs nearest each task's CPUs", "closest"),
    ("single:1 — tasks share the nearest GPU", "single:1"),
    ("per_task:1 — one GPU per task", "per_task:1"),
    ("none", "none"),
)


def sharing_modes(partition: Any) -> list[tuple[str, str]]:
    """(label, mode) of the ways this partition can give GPUs: only what its nodes offer."""
    types = list(partition.gpu_types)
    modes = []
    if any(not is_mig_type(t) for t in types) or (not types and partition.most_per_node("gpu")):
        modes.append(("whole GPUs", "gpu"))
    if "shard" in partition.gres_names:
        modes.append(("shards of a GPU (time-sliced)", "shard"))
    if "mps" in partition.gres_names:
        modes.append(("MPS share of a GPU (%)", "mps"))
    if any(is_mig_type(t) for t in types):
        modes.append(("MIG slice", "mig"))
    return modes


class RequestForm:
    """``RequestForm()`` reads the cluster's inventory; ``.widget`` is the form.

    ``on_submit(alloc)`` is called with each allocation the form creates (``%salloc --form`` uses it
    to make it the notebook's default). ``memory``: a file to start from the values last submitted and to keep
    them in (``%salloc --form`` passes :func:`slurmlab.widgets.form_memory.default_path`).
    """

    tick: float | None = None  # renders only when something changed

    def __init__(
        self,
        *,
        runner: Any = None,
        inventory: Any = None,
        updater: LiveUpdater | None = None,
        on_submit: Callable[[Any], None] | None = None,
        version: tuple[int, ...] | None = None,
        memory: Path | None = None,
    ) -> None:
        w = require("ipywidgets", feature="the request form", extra="widgets")
        from slurmlab.slurm import queries
        from slurmlab.slurm.allocation import known_version
        from slurmlab.slurm.runner import get_runner

        self.runner = runner
        self.inventory = inventory if inventory is not None else queries.inventory(runner)
        # what this Slurm accepts (26.05 refuses options 24.11 takes); None: warn, never refuse
        self.version = (
            version if version is not None or inventory is not None else known_version(runner or get_runner())
        )
        self.updater = updater or get_updater()
        self.on_submit = on_submit
        self._snapshots = Snapshots(self._repr_mimebundle_)
        parts = list(self.inventory.partition_names)
        if not parts:
            raise SlurmlabError("the cluster reports no partition", hint="check the cluster with %sinfo")
        default = self.inventory.default_partition
        style = {"description_width": "110px"}
        self.partition = w.Dropdown(
            options=parts, value=default.name if default else parts[0], description="Partition", style=style
        )
        self.sharing = w.Dropdown(description="Sharing", style=style)
        self.gpu_type = w.Dropdown(description="GPU type", style=style)
        self.count = w.BoundedIntText(value=1, min=0, max=10_000, description="Count", style=style)
        self.per_node = w.Checkbox(value=False, description="count is per node", indent=False)
        self.nodes = w.BoundedIntText(value=1, min=1, max=10_000, description="Nodes", style=style)
        self.tasks = w.BoundedIntText(value=1, min=1, max=100_000, description="Tasks", style=style)
        self.gpu_bind = w.Dropdown(
            options=list(BIND_CHOICES), value="", description="--gpu-bind", style=style
        )
        self.enforce = w.Checkbox(
            value=False, description="enforce-binding (CPUs next to the GPUs only)", indent=False
        )
        self.time = w.Text(
            value="00:30:00", description="Time", placeholder="HH:MM:SS or minutes", style=style
        )
        self.command = w.HTML(value="")
        self.submit_button = w.Button(description="Submit", button_style="primary", icon="play")
        self.submit_button.add_class("slurmlab-submit")
        self.result = w.VBox([])
        self.widget = w.VBox(
            [
                w.HBox([self.partition, self.sharing]),
                w.HBox([self.gpu_type, self.count, self.per_node]),
                w.HBox([self.nodes, self.tasks, self.time]),
                w.HBox([self.gpu_bind, self.enforce]),
                self.command,
                self.submit_button,
                self.result,
            ]
        )
        self.widget.add_class("slurmlab-form")
        self.allocations: list[Any] = []
        self._panel_widgets: list[Any] = []
        self.submit_error: str | None = None
        self._submitting = False
        self._lock = threading.Lock()
        # render() runs in a cell and on the widget thread: one at a time, or the thread's choice sync (options
        # read, then a value set) interleaves with a cell's and puts back a GPU type the cell had just changed
        self._rendering = threading.RLock()
        self._sync_choices()
        # the last values submitted (slurmlab.widgets.form_memory), where the cluster still offers them
        self.memory = memory
        if memory is not None:
            from slurmlab.widgets.form_memory import recall

            recall(self, memory)
        self.request: Any = None
        self.problem: str | None = None
        self.render()
        for control in (
            self.partition,
            self.sharing,
            self.gpu_type,
            self.count,
            self.per_node,
            self.nodes,
            self.tasks,
            self.gpu_bind,
            self.enforce,
            self.time,
        ):
            control.observe(self._changed, names="value")
        self.submit_button.on_click(lambda _b: self.submit(wait=False))
        self.updater.add(self)

    # ---- what the form asks for --------------------------------------------------------------------
    def _partition(self) -> Any:
        return self.inventory.partition(self.partition.value)

    def sync_choices(self) -> None:
        """Sharing modes and GPU types that the chosen partition offers (after a value was set in code)."""
        with self._rendering:
            self._sync_choices()

    def _sync_choices(self) -> None:
        """Sharing modes and GPU types that the chosen partition offers."""
        part = self._partition()
        modes = sharing_modes(part) or [("no GPUs in this partition", "none")]
        if list(self.sharing.options) != modes:
            keep = self.sharing.value
            self.sharing.options = modes
            self.sharing.value = keep if keep in [m for _, m in modes] else modes[0][1]
        mode = self.sharing.value
        types = [t for t in part.gpu_types if is_mig_type(t) == (mode == "mig")]
        choices = ([("any type", "")] if mode != "mig" else []) + [(t, t) for t in types]
        if list(self.gpu_type.options) != choices:
            keep = self.gpu_type.value
            self.gpu_type.options = choices
            values = [v for _, v in choices]
            self.gpu_type.value = keep if keep in values else (values[0] if values else None)

    def tokens(self) -> list[str]:
        """The salloc options the form stands for, as the user would type them."""
        mode, gtype, count = self.sharing.value, self.gpu_type.value or "", int(self.count.value)
        toks = [
            f"--partition={self.partition.value}",
            f"--nodes={self.nodes.value}",
            f"--ntasks={self.tasks.value}",
        ]
        if self.time.value.strip():
            toks.append(f"--time={self.time.value.strip()}")
        if mode in ("gpu", "mig") and count:
            opt = "--gpus-per-node" if self.per_node.value else "--gpus"
            toks.append(f"{opt}={gtype + ':' if gtype else ''}{count}")
        elif mode in ("shard", "mps") and count:
            toks.append(f"--gres={mode}:{gtype + ':' if gtype else ''}{count}")
        if self.gpu_bind.value:
            toks.append(f"--gpu-bind={self.gpu_bind.value}")
        if self.enforce.value:
            toks.append("--gres-flags=enforce-binding")
        return toks

    def check(self) -> Any:
        """The form's request through the one pipeline (RequestError with the fixes when it is wrong)."""
        from slurmlab.core.request.pipeline import check_request

        return check_request(self.tokens(), self.inventory, version=self.version)

    # ---- live behaviour ----------------------------------------------------------------------------
    def _changed(self, _change: Any) -> None:
        self.updater.mark_dirty(self)

    def render(self) -> None:
        """Re-validate and show the command or the problems (the widget thread calls this)."""
        with self._rendering:
            self._render()

    def _render(self) -> None:
        from slurmlab.core.request.explain import explain
        from slurmlab.slurm.allocation import salloc_argv

        esc = html.escape
        self._sync_choices()
        try:
            req = self.check()
        except SlurmlabError as exc:
            self.request, self.problem = None, str(exc)
            text = (
                f"<div class='slurmlab-form-problem' style='color:{FAILED};white-space:pre-wrap'>"
                f"{esc(str(exc))}</div>"
            )
        else:
            self.request, self.problem = req, None
            line = shlex.join(salloc_argv(req))
            warn = "".join(f"<div style='color:{WARN}'>warning: {esc(x)}</div>" for x in req.warnings)
            text = (
                f"<pre class='slurmlab-form-command' style='margin:0'>{esc(line)}</pre>"
                f"<div><b>What it asks for:</b> {esc(explain(req))}</div>{warn}"
            )
        if self.submit_error:
            text += f"<div style='color:{FAILED}'>{esc(self.submit_error)}</div>"
        if self.command.value != text:
            self.command.value = text
        disabled = self.request is None or self._submitting
        if self.submit_button.disabled != disabled:
            self.submit_button.disabled = disabled
        with self._lock:
            boxes = tuple(self._panel_widgets)
        if tuple(self.result.children) != boxes:
            self.result.children = boxes
        if threading.current_thread() is threading.main_thread():
            # called from a cell (the updater thread renders what the page changed): the saved form follows
            self._snapshots.refresh()

    def submit(self, *, wait: bool = True) -> Any:
        """Submit the request in a worker thread; with ``wait`` return its Allocation (None if refused).

        The button submits without waiting, so the kernel is never blocked by a click."""
        if self.request is None or self._submitting:
            return None
        if self.memory is not None:  # the next form starts from these values
            from slurmlab.widgets.form_memory import remember

            remember(self, self.memory)
        self._submitting = True
        self.updater.mark_dirty(self)
        done = threading.Event()
        box: list[Any] = []

        def work() -> None:
            from slurmlab.slurm.allocation import Allocation
            from slurmlab.widgets.panel import AllocationPanel

            try:
                alloc = Allocation.submit(self.request, runner=self.runner)  # checked as it was typed
            except SlurmlabError as exc:
                self.submit_error = f"submit failed: {exc}"
            else:
                self.submit_error = None
                panel = AllocationPanel.for_allocation(alloc)
                with self._lock:
                    self.allocations.append(alloc)
                    self._panel_widgets.append(panel.widget)
                box.append(alloc)
                if self.on_submit is not None:
                    self.on_submit(alloc)
            finally:
                self._submitting = False
                self.updater.mark_dirty(self)
                done.set()

        threading.Thread(target=work, name="slurmlab-submit", daemon=True).start()
        if not wait:
            return None
        done.wait(60)
        return box[0] if box else None

    # ---- what a saved notebook keeps ---------------------------------------------------------------
    def fields(self) -> list[tuple[str, str]]:
        """(label, what it is set to) of each field, as the form shows them."""
        count = f"{self.count.value}{' per node' if self.per_node.value else ''}"
        return [
            ("Partition", str(self.partition.value)),
            ("Sharing", str(self.sharing.label or "")),
            ("GPU type", str(self.gpu_type.label or "")),
            ("Count", count),
            ("Nodes", str(self.nodes.value)),
            ("Tasks", str(self.tasks.value)),
            ("Time", str(self.time.value)),
            ("--gpu-bind", str(self.gpu_bind.label or "")),
            ("enforce-binding", "yes" if self.enforce.value else "no"),
        ]

    def _outcome(self) -> tuple[str, str]:
        """(the salloc line or the problem, what it asks for or "") as text."""
        from slurmlab.core.request.explain import explain
        from slurmlab.slurm.allocation import salloc_argv

        if self.request is None:
            return f"problem: {self.problem or 'not checked yet'}", ""
        return shlex.join(salloc_argv(self.request)), explain(self.request)

    def _submitted(self) -> list[str]:
        from slurmlab.slurm.allocation.display import saved_text

        with self._lock:
            made = list(self.allocations)
        return [saved_text(alloc) for alloc in made]

    def snapshot_text(self) -> str:
        command, asks = self._outcome()
        lines = ["request form: " + " · ".join(f"{k}: {v}" for k, v in self.fields()), command]
        if asks:
            lines.append(f"What it asks for: {asks}")
        lines += [f"submitted: {s}" for s in self._submitted()]
        return "\n".join(lines)

    def snapshot_html(self) -> str:
        esc = html.escape
        rows = "".join(
            f"<tr><th style='text-align:left'>{esc(k)}</th><td style='text-align:left'>{esc(v)}</td></tr>"
            for k, v in self.fields()
        )
        command, asks = self._outcome()
        if self.request is None:
            shown = f"<div class='slurmlab-form-problem' style='color:{FAILED};white-space:pre-wrap'>{esc(command)}</div>"
        else:
            shown = (
                f"<pre class='slurmlab-form-command' style='margin:0'>{esc(command)}</pre>"
                f"<div><b>What it asks for:</b> {esc(asks)}</div>"
            )
        made = "".join(f"<li><code>{esc(s)}</code></li>" for s in self._submitted())
        return (
            f"<div class='slurmlab-form'><b>request form</b><table style='margin-left:0'>{rows}</table>{shown}"
            f"{f'<div>submitted:</div><ul>{made}</ul>' if made else ''}</div>"
        )

    def _repr_mimebundle_(self, include: Any = None, exclude: Any = None) -> dict[str, Any]:
        return saved_bundle(
            self.widget, "form", self.snapshot_text(), self.snapshot_html(), include=include, exclude=exclude
        )

    def _ipython_display_(self) -> None:
        self._snapshots.show()
