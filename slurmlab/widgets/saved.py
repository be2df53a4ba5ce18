"""What a slurmlab widget leaves in a saved notebook: a readable snapshot of its state beside the live view.

A widget output is a view of a model that lives in the kernel. Once that kernel is gone (a reopened notebook)
or was never there (the HTML course, nbconvert), the view cannot come back: JupyterLab's widget manager writes
"model not found", nbconvert falls back to ``text/plain`` (ipywidgets' ``VBox(children=(HBox(…``). So each
slurmlab widget displays with a bundle that carries, beside the widget view, a ``text/html`` and ``text/plain``
snapshot of what it shows (:func:`saved_bundle`): the live page shows the widget, everything else the snapshot.

The snapshot says it is one (the time it was taken and how to get the live widget back), and carries the stable
CSS classes ``slurmlab-saved-widget`` and ``slurmlab-saved-<kind>`` (the form, the explorer, the queue, the
sandbox picker), with ``slurmlab-saved-widget-note`` on its last line.

A widget that displays through :class:`Snapshots` (``_ipython_display_``) gives each display a display id, and
:meth:`Snapshots.refresh` updates every display of it with the snapshot of now, so the notebook saves the last
state. It is called where the state is changed from code (a cell that sets the form's fields and calls
``render()``, ``explorer.select(...)``), never for a change made in the page: updating the output rebuilds the
live widget's view, which would take the field from under the user's cursor.
"""

from __future__ import annotations

import html
import threading
import uuid
from collections.abc import Callable, Container
from datetime import datetime
from typing import Any

__all__ = ["SAVED_NOTE", "Snapshots", "saved_bundle", "saved_html"]

SAVED_NOTE = "saved state of a live widget — re-run the cell to use it"


def _stamp(now: datetime | None = None) -> str:
    return (now or datetime.now()).strftime("%Y-%m-%d %H:%M:%S")


def saved_html(kind: str, body: str, now: datetime | None = None) -> str:
    """``body`` (HTML) framed as the saved snapshot of a widget of ``kind``, dated, saying how to get it back."""
    note = f"{SAVED_NOTE} (as of {_stamp(now)})"
    return (
        f"<div class='slurmlab-saved-widget slurmlab-saved-{html.escape(kind)}'>{body}"
        f"<div class='slurmlab-saved-widget-note' style='opacity:0.7;font-style:italic'>"
        f"{html.escape(note)}</div></div>"
    )


def saved_bundle(
    widget: Any,
    kind: str,
    text: str,
    body_html: str,
    *,
    include: Container[str] | None = None,
    exclude: Container[str] | None = None,
) -> dict[str, object]:
    """The display data of a slurmlab widget: ``widget``'s view (ipywidgets' own bundle), with ``text`` as
    ``text/plain`` and ``body_html`` as the ``text/html`` snapshot (:func:`saved_html`) in place of the repr."""
    own = widget._repr_mimebundle_(include=include, exclude=exclude)
    bundle: dict[str, object] = dict(own) if isinstance(own, dict) else {}
    bundle["text/plain"] = f"{text}\n({SAVED_NOTE}, as of {_stamp()})"
    bundle["text/html"] = saved_html(kind, body_html)
    return {
        mime: data
        for mime, data in bundle.items()
        if (include is None or mime in include) and (exclude is None or mime not in exclude)
    }


class Snapshots:
    """The displays of one widget, kept current: ``show()`` displays ``bundle()`` under a display id of its
    own; ``refresh()`` updates every display of it where the snapshot changed (nothing before the first)."""

    def __init__(self, bundle: Callable[[], dict[str, object]]) -> None:
        self._bundle = bundle
        self._display_id: str | None = None
        self._sent = ""
        self._lock = threading.Lock()

    @property
    def shown(self) -> bool:
        return self._display_id is not None

    def show(self) -> None:
        from IPython import display as ipd

        display: Callable[..., object] = ipd.display  # typed: IPython's own is not
        bundle = self._bundle()
        with self._lock:
            if self._display_id is None:
                self._display_id = f"slurmlab-{uuid.uuid4().hex}"
            self._sent = str(bundle.get("text/html", ""))
        display(bundle, raw=True, display_id=self._display_id)

    def refresh(self) -> bool:
        """Update the displays with the snapshot of now; True if it changed and was sent."""
        if self._display_id is None:
            return False
        bundle = self._bundle()
        page = str(bundle.get("text/html", ""))
        with self._lock:
            # the time stamp alone is no change: compare what the widget shows
            if _undated(page) == _undated(self._sent):
                return False
            self._sent = page
        from IPython import display as ipd

        update: Callable[..., object] = ipd.update_display
        update(bundle, raw=True, display_id=self._display_id)
        return True


def _undated(page: str) -> str:
    return page.rsplit(" (as of ", 1)[0]
