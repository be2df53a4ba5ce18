"""A reopened notebook shows the readable saved form of slurmlab's widgets (issue 28, point 6): the request form
and the topology explorer live while their kernel runs, and once it is gone the notebook shows the snapshot they
saved (with the last state a cell gave them), never "Error displaying widget: model not found". The story: show
the form and the explorer, change both from a cell, save, shut the kernel down through the REST API, reload.
Screenshots go to build/screenshots/ (saved-widgets-live.png, saved-widgets-reopened.png).
"""

from __future__ import annotations

import json
import time
from collections.abc import Iterator
from typing import Any

import pytest
from labserver import Lab, chromium_page, notebook_lab, require_labextension, screenshot
from notebook_driver import NotebookPage

pytestmark = [pytest.mark.browser, pytest.mark.sandbox, pytest.mark.slow]

NOTEBOOK = "saved-widgets.ipynb"
MODEL_NOT_FOUND = "model not found"
CELLS = [
    "%load_ext slurmlab",
    "form = %salloc --form\nform",
    "form.count.value = 2\nform.render()",
    "import slurmlab\nexplorer = slurmlab.TopologyExplorer(profiles=['dgx-h100'])\nexplorer",
    "picked = explorer.select(n=2)",
]
FORM_CELL, EXPLORER_CELL = 1, 3


@pytest.fixture(scope="module")
def lab(slurm_sandbox: Any, tmp_path_factory: pytest.TempPathFactory) -> Iterator[Lab]:
    require_labextension()
    with notebook_lab(tmp_path_factory.mktemp("lab"), slurm_sandbox.env(), {NOTEBOOK: CELLS}) as server:
        yield server


@pytest.fixture
def browser_page(lab: Lab) -> Iterator[Any]:
    with chromium_page(height=1400) as page:
        yield page


def _saved_html(lab: Lab, index: int) -> str:
    nb = json.loads((lab.root / NOTEBOOK).read_text())
    return "".join("".join(o.get("data", {}).get("text/html", "")) for o in nb["cells"][index]["outputs"])


def test_reopened_notebook_shows_the_form_and_explorer_as_saved_never_model_not_found(
    lab: Lab, browser_page: Any
) -> None:
    page = browser_page
    try:
        nb = NotebookPage(page, lab.url, lab.token, NOTEBOOK)
        for index in range(len(CELLS)):
            nb.run(index, timeout=90)
        # live: the widgets themselves
        live = nb.output(FORM_CELL).locator(".slurmlab-widget-output[data-slurmlab-output='widget']")
        live.locator(".slurmlab-form").first.wait_for(timeout=30_000)
        nb.output(EXPLORER_CELL).locator(
            ".slurmlab-widget-output[data-slurmlab-output='widget']"
        ).first.wait_for(timeout=30_000)
        screenshot(page, "saved-widgets-live.png")
        nb.save()
        deadline = time.monotonic() + 10
        while (
            "slurmlab-saved-explorer" not in _saved_html(lab, EXPLORER_CELL) and time.monotonic() < deadline
        ):
            time.sleep(0.2)
        # the saved notebook holds the last state the cells gave them
        assert "<th style='text-align:left'>Count</th><td style='text-align:left'>2</td>" in _saved_html(
            lab, FORM_CELL
        )
        assert "N GPUs 2" in _saved_html(lab, EXPLORER_CELL)

        # kernel gone, page reloaded: the saved forms, never the widget manager's error
        lab.end_sessions(NOTEBOOK)
        nb = NotebookPage(page, lab.url, lab.token, NOTEBOOK)
        form = nb.output(FORM_CELL).locator(".slurmlab-saved-widget.slurmlab-saved-form")
        form.wait_for(timeout=30_000)
        explorer = nb.output(EXPLORER_CELL).locator(".slurmlab-saved-widget.slurmlab-saved-explorer")
        explorer.wait_for(timeout=30_000)
        time.sleep(3)  # time for the widget manager to give up, were it still in charge
        for index in (FORM_CELL, EXPLORER_CELL):
            text = nb.output_text(index)
            assert MODEL_NOT_FOUND not in text and "VBox(" not in text, text
        assert "--gpus=2" in form.inner_text() and "re-run the cell" in form.inner_text()
        assert "N GPUs 2" in explorer.inner_text() and "salloc --no-shell" in explorer.inner_text()
        screenshot(page, "saved-widgets-reopened.png")
    except BaseException:
        screenshot(page, "saved-widgets-failure.png")
        raise
