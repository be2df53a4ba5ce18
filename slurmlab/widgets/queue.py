"""The queue as a sortable table with GPU columns, mine or everyone's, refreshing by itself.

The fetch and the re-render happen in the one widget thread (:mod:`slurmlab.widgets.live`) every
``interval`` seconds, with a short Slurm timeout so a hung controller delays the other live
widgets by at most a few seconds; changes of the filter or the sort only mark the view dirty.
"""

from __future__ import annotations

import dataclasses
import html
import time
from collections.abc import Callable
from typing import TYPE_CHECKING, Any

from slurmlab._extras import require
from slurmlab.core.palette import FAILED
from slurmlab.errors import SlurmlabError
from slurmlab.widgets.live import LiveUpdater, get_updater
from slurmlab.widgets.rows import JOB_COLUMNS, Table, job_row
from slurmlab.widgets.saved import saved_bundle

if TYPE_CHECKING:
    from slurmlab.slurm.runner import Runner

__all__ = ["QueueMonitor"]

_NUMERIC = {"job"}


def _sort_key(column: str) -> Callable[[dict[str, str]], tuple[int, int | str]]:
    def key(row: dict[str, str]) -> tuple[int, int | str]:
        value = row.get(column, "")
        if column in _NUMERIC:
            head = value.split("_")[0]
            return (0, int(head)) if head.isdigit() else (1, value)
        return (0, value)

    return key


class QueueMonitor:
    """``QueueMonitor(interval=5)``; display it (``.widget``) and it keeps itself current."""

    def __init__(
        self,
        *,
        interval: float = 5.0,
        all_users: bool = False,
        runner: Runner | None = None,
        updater: LiveUpdater | None = None,
        fetch_timeout: float = 5.0,
    ) -> None:
        w = require("ipywidgets", feature="the queue monitor", extra="widgets")
        self.tick: float | None = interval
        self.runner = runner
        self.fetch_timeout = fetch_timeout
        self.updater = updater or get_updater()
        self.scope = w.ToggleButtons(
            options=[("mine", "mine"), ("all users", "all")],
            value="all" if all_users else "mine",
            description="Jobs:",
        )
        self.sort_by = w.Dropdown(options=list(JOB_COLUMNS), value="job", description="Sort by:")
        self.descending = w.Checkbox(value=False, description="descending", indent=False)
        self.table = w.HTML(value="<i>loading the queue…</i>")
        self.status = w.HTML(value="")
        self.stop_button = w.Button(description="Stop refreshing", icon="pause")
        self.widget = w.VBox(
            [
                w.HBox([self.scope, self.sort_by, self.descending]),
                self.table,
                w.HBox([self.status, self.stop_button]),
            ]
        )
        self.widget.add_class("slurmlab-queue")
        self.rows: list[dict[str, str]] = []
        self.error: str | None = None
        self.fetched_at: float | None = None
        self.fetches = 0
        self._fetched_scope: str | None = None
        for control in (self.scope, self.sort_by, self.descending):
            control.observe(self._changed, names="value")
        self.stop_button.on_click(lambda _b: self.stop())
        self.updater.add(self)

    def _changed(self, _change: object) -> None:
        self.updater.mark_dirty(self)

    def stop(self) -> None:
        """Stop refreshing: the table stays, sorting still works, the filter still fetches once."""
        self.tick = None
        self.updater.mark_dirty(self)

    def close(self) -> None:
        """Stop following and close the widget."""
        self.tick = None
        self.updater.remove(self)
        self.widget.close()

    def _runner(self) -> Runner:
        from slurmlab.slurm.runner import get_runner

        base = self.runner or get_runner()
        return dataclasses.replace(base, timeout=min(base.timeout, self.fetch_timeout))

    def fetch(self) -> None:
        """Read the queue now (the widget thread calls this when a refresh is due)."""
        from slurmlab.slurm import queries

        scope = self.scope.value
        try:
            jobs = queries.list_jobs(self._runner(), all_users=scope == "all")
        except SlurmlabError as exc:  # shown in the widget; the last good table stays
            self.error = str(exc)
        else:
            self.error = None
            self.rows = [job_row(j) for j in jobs]
        self._fetched_scope = scope
        self.fetched_at = time.time()
        self.fetches += 1

    def sorted_rows(self) -> list[dict[str, str]]:
        return sorted(self.rows, key=_sort_key(self.sort_by.value), reverse=bool(self.descending.value))

    def render(self) -> None:
        interval = self.tick
        stale = self.fetched_at is None or (
            interval is not None and time.time() - self.fetched_at >= interval * 0.9
        )
        if stale or self._fetched_scope != self.scope.value:
            self.fetch()
        table = Table(self.sorted_rows(), JOB_COLUMNS, empty="(no jobs)").html()
        if self.table.value != table:
            self.table.value = table
        when = time.strftime("%H:%M:%S", time.localtime(self.fetched_at or time.time()))
        status = f"{len(self.rows)} jobs, updated {when}"
        if self.tick is None:
            status += " (not refreshing)"
        if self.error:
            status = f"<span style='color:{FAILED}'>{html.escape(self.error)}</span> (showing {status})"
        if self.status.value != status:
            self.status.value = status

    def _repr_mimebundle_(self, include: Any = None, exclude: Any = None) -> dict[str, object]:
        # the saved form: the table as it stands when shown (it refreshes itself only in the live widget)
        rows = self.sorted_rows()
        table = Table(rows, JOB_COLUMNS, empty="(no jobs)")
        scope = "all users" if self.scope.value == "all" else "mine"
        text = f"queue ({scope}): {len(rows)} jobs"
        return saved_bundle(
            self.widget,
            "queue",
            f"{text}\n{table.text()}",
            f"<div class='slurmlab-queue'><b>{html.escape(text)}</b>{table.html()}</div>",
            include=include,
            exclude=exclude,
        )
