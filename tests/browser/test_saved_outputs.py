"""A reopened notebook shows slurmlab's dated fallback where its widget cannot come back (issue 13, point 4).

JupyterLab's widget manager writes "Error displaying widget: model not found" for a widget output whose
model is gone (the kernel that made it was shut down) and never shows the output's saved text/HTML. The
labextension (``extensions/slurmlab-lab/src/widgetfallback.ts``) shows that fallback instead; a widget
whose model lives still renders as the widget. The story: allocate a GPU, show the panel (live), save,
reload with the kernel still running (the panel comes back live), shut the kernel down through the REST
API, reload: the cell shows "as of" and "re-run", never "model not found". Screenshots go to
build/screenshots/.
"""

from __future__ import annotations

import json
import re
import time
from collections.abc import Iterator
from typing import Any

import pytest
from labserver import Lab, chromium_page, notebook_lab, require_labextension, screenshot
from notebook_driver import NotebookPage

pytestmark = [pytest.mark.browser, pytest.mark.sandbox, pytest.mark.slow]

NOTEBOOK = "saved-outputs.ipynb"
MODEL_NOT_FOUND = "model not found"
SAVED_NOTE = "Saved output: this widget is not live. Re-run the cell to reconnect."

# a widget view whose model never existed: what any widget output is once its kernel is gone
_GONE_VIEW = {"model_id": "0123456789abcdef0123456789abcdef", "version_major": 2, "version_minor": 0}
CELLS = [
    "%load_ext slurmlab",
    "a = %salloc --gpus=1 -t 5",
    "a",
    "from IPython.display import display\n"
    f"display({{'application/vnd.jupyter.widget-view+json': {_GONE_VIEW!r}, "
    "'text/html': '<b>42 items counted</b>', 'text/plain': 'Counter(42)'}, raw=True)",
    "display({'application/vnd.jupyter.widget-view+json': "
    f"{_GONE_VIEW!r}, 'text/plain': 'Counter(7)'}}, raw=True)",
]
PANEL_CELL, HTML_CELL, PLAIN_CELL = 2, 3, 4


@pytest.fixture(scope="module")
def lab(slurm_sandbox: Any, tmp_path_factory: pytest.TempPathFactory) -> Iterator[Lab]:
    require_labextension()
    with notebook_lab(tmp_path_factory.mktemp("lab"), slurm_sandbox.env(), {NOTEBOOK: CELLS}) as server:
        yield server


@pytest.fixture
def browser_page(lab: Lab) -> Iterator[Any]:
    with chromium_page(height=1000) as page:
        yield page


def _saved_outputs(lab: Lab, index: int) -> list[dict[str, Any]]:
    nb = json.loads((lab.root / NOTEBOOK).read_text())
    return list(nb["cells"][index]["outputs"])


def _settled_text(nb: NotebookPage, index: int, seconds: float = 4.0) -> str:
    """The cell's output once the widget manager had time to give up: it must never say "model not found"."""
    deadline = time.monotonic() + seconds
    text = nb.output_text(index)
    while time.monotonic() < deadline:
        text = nb.output_text(index)
        assert MODEL_NOT_FOUND not in text, f"cell {index} shows the widget manager's error: {text!r}"
        time.sleep(0.25)
    return text


def test_reopened_notebook_shows_dated_fallback_not_model_not_found(
    lab: Lab, browser_page: Any, slurm_sandbox: Any
) -> None:
    page = browser_page
    runner = slurm_sandbox.runner()
    job_id = None
    try:
        nb = NotebookPage(page, lab.url, lab.token, NOTEBOOK)
        for index in range(len(CELLS)):
            nb.run(index, timeout=90)

        # live: the panel renders as the widget, inside slurmlab's wrapper that says so
        live = nb.output(PANEL_CELL).locator(".slurmlab-widget-output[data-slurmlab-output='widget']")
        panel = live.locator(".slurmlab-allocation").first
        panel.locator(".slurmlab-badge").filter(has_text="RUNNING").wait_for(timeout=60_000)
        job_id = re.search(r"allocation (\d+)", panel.inner_text()).group(1)  # type: ignore[union-attr]
        assert nb.output(PANEL_CELL).locator(".slurmlab-saved-output").count() == 0

        # a widget output whose model is gone, with an HTML fallback: the fallback under a note
        html_out = nb.output(HTML_CELL).locator(".slurmlab-widget-output[data-slurmlab-output='saved']")
        html_out.locator(".slurmlab-saved-note").wait_for(timeout=20_000)
        assert html_out.locator(".slurmlab-saved-note").inner_text().strip() == SAVED_NOTE
        assert "42 items counted" in html_out.inner_text()
        # only text/plain (ipywidgets' repr) says less than the manager's own message: that stays
        nb.output(PLAIN_CELL).get_by_text(MODEL_NOT_FOUND).wait_for(timeout=20_000)
        assert "Counter(7)" not in nb.output_text(PLAIN_CELL)

        nb.save()
        deadline = time.monotonic() + 10
        while not _saved_outputs(lab, PANEL_CELL) and time.monotonic() < deadline:
            time.sleep(0.2)
        (saved,) = _saved_outputs(lab, PANEL_CELL)
        assert "application/vnd.jupyter.widget-view+json" in saved["data"]
        assert "slurmlab-saved-allocation" in "".join(saved["data"]["text/html"])

        # reload with the kernel still running: the manager finds the model, the panel is live again
        nb = NotebookPage(page, lab.url, lab.token, NOTEBOOK)
        again = nb.output(PANEL_CELL).locator(".slurmlab-widget-output[data-slurmlab-output='widget']")
        again.locator(".slurmlab-allocation").first.wait_for(timeout=30_000)
        assert nb.output(PANEL_CELL).locator(".slurmlab-saved-output").count() == 0

        # kernel gone, page reloaded (a new kernel starts): the dated fallback, never "model not found"
        assert lab.end_sessions(NOTEBOOK), "the notebook has no session to shut down"
        nb = NotebookPage(page, lab.url, lab.token, NOTEBOOK)
        shown = nb.output(PANEL_CELL).locator(".slurmlab-widget-output[data-slurmlab-output='saved']")
        shown.locator(f".slurmlab-saved-allocation[data-job='{job_id}']").wait_for(timeout=30_000)
        text = _settled_text(nb, PANEL_CELL)
        assert re.search(rf"allocation {job_id}: RUNNING as of \d{{4}}-\d\d-\d\d \d\d:\d\d:\d\d", text), text
        assert "re-run the cell to reconnect" in text
        assert nb.output(PANEL_CELL).locator(".slurmlab-allocation").count() == 0
        # slurmlab's fallback states its own age: no generic note above it
        assert shown.locator(".slurmlab-saved-note").count() == 0
        assert "42 items counted" in _settled_text(nb, HTML_CELL, seconds=0.5)
        screenshot(page, "saved-output-reopened.png")
    except BaseException:
        screenshot(page, "saved-output-failure.png")
        raise
    finally:
        if job_id is not None:
            runner.run(["scancel", job_id], check=False)
