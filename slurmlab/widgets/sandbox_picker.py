"""A sandbox picker: choose a hardware profile, press Start, and a local Slurm sandbox comes up — without a
cluster and without blocking the kernel.

    from slurmlab.widgets.sandbox_picker import sandbox_picker
    sandbox_picker(lambda name: start_sandbox(name))       # what %slurm shows when no Slurm is configured

``start(name)`` runs in a background thread (a sandbox takes 10-70 s to come up); its outcome is one line in
the widget: what it returned, or what went wrong and what to do. :class:`PickerState` holds that logic without
ipywidgets; :class:`SandboxPicker` builds the widgets lazily.

Stable CSS classes for the browser tests: ``slurmlab-sandbox-picker`` (the whole widget),
``slurmlab-sandbox-start`` (the button), ``slurmlab-sandbox-status`` (the line), and one of
``slurmlab-sandbox-starting`` / ``-ready`` / ``-failed`` on the line while in that state.
"""

from __future__ import annotations

import html
import threading
import time
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from slurmlab._extras import require
from slurmlab.core.palette import FAILED, OK
from slurmlab.errors import SlurmlabError
from slurmlab.widgets.live import LiveUpdater, get_updater
from slurmlab.widgets.saved import saved_bundle

__all__ = [
    "PickerState",
    "SandboxPicker",
    "outcome_line",
    "profile_choices",
    "profile_label",
    "sandbox_picker",
]

DEFAULT_PROFILE = "dgx-h100"  # the sandbox's own default (the room cannot import it: it reads the profiles)
STATES = ("idle", "starting", "ready", "failed")


def profile_choices() -> list[tuple[str, str]]:
    """(label, name) of every built-in hardware profile, read from the profile files the sandbox ships."""
    from slurmlab.slurm.hardware_files import profile_data, profile_names

    return [(profile_label(name, profile_data(name)), name) for name in profile_names()]


def profile_label(name: str, data: Mapping[str, object]) -> str:
    """``dgx-h100: 2 nodes × 8 h100 GPUs, shards`` — what a profile builds, short enough for a dropdown."""
    nodes = data.get("nodes")
    gpus = data.get("gpus")
    parts = []
    if isinstance(nodes, int) and isinstance(gpus, list):
        models = sorted({str(g.get("model")) for g in gpus if isinstance(g, dict) and g.get("model")})
        parts.append(
            f"{nodes} node{'s' if nodes != 1 else ''} × {len(gpus)} {'/'.join(models)} GPUs".replace(
                "  ", " "
            )
        )
    if data.get("mig"):
        parts.append("MIG slices")
    if isinstance(data.get("shards_per_gpu"), int) and data.get("shards_per_gpu"):
        parts.append("shards")
    return f"{name}: {', '.join(parts)}" if parts else name


def _one_line(text: str) -> str:
    return " ".join(text.split())


def _slurmlab_error(error: BaseException) -> SlurmlabError | None:
    """The SlurmlabError behind ``error`` (the magics re-raise ours as IPython's UsageError ``from None``)."""
    seen: set[int] = set()
    current: BaseException | None = error
    while current is not None and id(current) not in seen:
        if isinstance(current, SlurmlabError):
            return current
        seen.add(id(current))
        current = current.__cause__ or current.__context__
    return None


def outcome_line(name: str, result: object = None, error: BaseException | None = None) -> str:
    """What the picker says when ``start(name)`` has returned ``result`` or raised ``error``: one line."""
    if error is None:
        said = _one_line(str(result).splitlines()[0]) if result is not None and str(result).strip() else ""
        return (
            said or f"sandbox {name} is up; this kernel uses it"
        ) + " · next: %sinfo, then %salloc --gpus=1 -t 10"
    ours = _slurmlab_error(error)
    if ours is not None:
        fix = f" → {_one_line(ours.hint)}" if ours.hint else ""
        return f"sandbox {name} did not start: {_one_line(ours.message)}{fix}"
    if (
        type(error).__name__ == "UsageError"
    ):  # IPython's: the magics' words for a user's mistake, fix included
        return f"sandbox {name} did not start: {_one_line(str(error))}"
    # an unexpected failure still gets one line, never a traceback in the notebook
    return (
        f"sandbox {name} did not start: {type(error).__name__}: {_one_line(str(error))} → see "
        f"`slurmlab sandbox status --profile {name}` and the sandbox's log folder"
    )


@dataclass
class PickerState:
    """What the picker shows; changed by the start thread, read by the widget thread."""

    state: str = "idle"
    profile: str | None = None
    line: str = ""
    started_at: float = 0.0

    def text(self, now: float | None = None) -> str:
        if self.state == "starting":
            waited = int((time.monotonic() if now is None else now) - self.started_at)
            return (
                f"starting sandbox {self.profile}… {waited} s (usually 15-70 s; the kernel stays free, "
                "you can run other cells)"
            )
        return self.line


class SandboxPicker:
    """``SandboxPicker(start)``; ``.widget`` is the dropdown, the Start button and the status line."""

    def __init__(
        self,
        start: Callable[[str], object],
        *,
        profiles: Sequence[tuple[str, str]] | None = None,
        intro: str | None = None,
        updater: LiveUpdater | None = None,
    ) -> None:
        w = require("ipywidgets", feature="the sandbox picker", extra="widgets")
        self._start = start
        self.updater = updater or get_updater()
        self.choices = list(profiles) if profiles is not None else profile_choices()
        if not self.choices:
            raise SlurmlabError(
                "no sandbox hardware profiles found in this installation",
                hint="reinstall slurmlab: pip install --force-reinstall 'slurmlab[all]'",
            )
        names = [name for _, name in self.choices]
        self.model = PickerState()
        self.tick: float | None = None  # ticks only while starting, for the seconds waited
        self._lock = threading.Lock()
        self.thread: threading.Thread | None = None
        self.dropdown = w.Dropdown(
            options=self.choices,
            value=DEFAULT_PROFILE if DEFAULT_PROFILE in names else names[0],
            description="Profile",
            layout=w.Layout(width="auto"),
        )
        self.button = w.Button(description="Start sandbox", button_style="primary", icon="play")
        self.button.add_class("slurmlab-sandbox-start")
        self.status = w.HTML(value="")
        self.status.add_class("slurmlab-sandbox-status")
        text = (
            intro
            if intro is not None
            else (
                "Start a local Slurm sandbox on this machine: a real Slurm with stand-in GPUs from a hardware profile."
            )
        )
        self.widget = w.VBox(
            [w.HTML(value=html.escape(text)), w.HBox([self.dropdown, self.button]), self.status]
        )
        self.widget.add_class("slurmlab-sandbox-picker")
        self.button.on_click(lambda _b: self.start())
        self._shown = ""  # the state whose CSS class the status line carries
        self.render()

    def start(self, name: str | None = None) -> threading.Thread | None:
        """Run ``start(name)`` in a background thread (None when a start is already under way)."""
        name = name or str(self.dropdown.value)
        with self._lock:
            if self.model.state == "starting":
                return None
            self.model = PickerState("starting", name, "", time.monotonic())
        self.tick = 1.0
        thread = threading.Thread(target=self._run, args=(name,), name="slurmlab-sandbox-start", daemon=True)
        self.thread = thread
        self.updater.add(self)
        thread.start()
        return thread

    def _run(self, name: str) -> None:
        try:
            result = self._start(name)
        except BaseException as exc:  # every failure becomes the widget's one line, never a traceback
            done = PickerState("failed", name, outcome_line(name, error=exc))
        else:
            done = PickerState("ready", name, outcome_line(name, result))
        with self._lock:
            self.model = done
        self.tick = None
        self.updater.mark_dirty(self)

    def render(self) -> None:
        """Show the current state (the widget thread calls this; the constructor once, before display)."""
        with self._lock:
            model = self.model
        starting = model.state == "starting"
        self.button.disabled = starting or model.state == "ready"
        self.dropdown.disabled = starting or model.state == "ready"
        if model.state != self._shown:
            if self._shown:
                self.status.remove_class(f"slurmlab-sandbox-{self._shown}")
            self.status.add_class(f"slurmlab-sandbox-{model.state}")
            self._shown = model.state
        colour = {"failed": FAILED, "ready": OK}.get(model.state)
        text = html.escape(model.text())
        self.status.value = f"<span style='color:{colour}'>{text}</span>" if colour and text else text
        if not starting and model.state != "idle":
            self.updater.remove(self)

    def _repr_mimebundle_(self, include: Any = None, exclude: Any = None) -> dict[str, object]:
        # the saved form: the profile chosen and what became of the start
        with self._lock:
            said = self.model.text()
        label = str(self.dropdown.label or self.dropdown.value)
        text = f"sandbox picker: profile {label}" + (f"\n{said}" if said else "")
        page = f"<div class='slurmlab-sandbox-picker'><b>sandbox picker</b>: profile {html.escape(label)}" + (
            f"<div>{html.escape(said)}</div>" if said else ""
        )
        return saved_bundle(
            self.widget, "sandbox-picker", text, page + "</div>", include=include, exclude=exclude
        )


def sandbox_picker(start: Callable[[str], object], **kwargs: Any) -> Any:
    """The picker's widget: a profile dropdown and a Start button that runs ``start(name)`` in the background."""
    return SandboxPicker(start, **kwargs).widget
