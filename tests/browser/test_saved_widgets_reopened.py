"""A reopened notebook shows the readable saved form of slurmlab's widgets (issue 28, point 6): the request form
and the topology explorer live while their kernel runs, and once it is gone the notebook shows the snapshot they
saved (with the last state a cell gave them), never "Error displaying widget: model not found". The story: show
the form and the explorer, change both from a cell, save, shut the kernel down through the REST API, reload.
Screenshots go to build/screenshots/ (saved-widgets-live.png, saved-widgets-reopened.png).
"""

from __future__ import annotations

import json
import time
import urllib.request
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from labserver import CHROMIUM, CHROMIUM_ARGS, Lab, require_browser, running_lab
from notebook_driver import NotebookPage, write_notebook

pytestmark = [pytest.mark.browser, pytest.mark.sandbox, pytest.mark.slow]

REPO = Path(__file__).resolve().parents[2]
SHOTS = REPO / "build" / "screenshots"
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
    if not (REPO / "slurmlab" / "labextension" / "package.json").exists():
        pytest.skip("the JupyterLab extension is not built: run `make labextension` (needs node and npm)")
    require_browser()
    base = tmp_path_factory.mktemp("lab")
    (base / "root").mkdir()
    write_notebook(base / "root" / NOTEBOOK, CELLS)
    with running_lab(base, slurm_sandbox.env()) as server:
        yield server


@pytest.fixture
def browser_page(lab: Lab) -> Iterator[Any]:
    from playwright.sync_api import sync_playwright

    with sync_playwright() as pw:
        browser = pw.chromium.launch(executable_path=CHROMIUM, args=CHROMIUM_ARGS, headless=True)
        try:
            yield browser.new_page(viewport={"width": 1400, "height": 1400})
        finally:
            browser.close()


def _api(lab: Lab, method: str, path: str) -> Any:
    req = urllib.request.Request(
        f"{lab.url}/api/{path}", method=method, headers={"Authorization": f"token {lab.token}"}
    )
    with urllib.request.urlopen(req, timeout=30) as res:
        body = res.read()
    return json.loads(body) if body else None


def _shut_kernel_down(lab: Lab) -> None:
    for s in [s for s in _api(lab, "GET", "sessions") if s["path"].endswith(NOTEBOOK)]:
        _api(lab, "DELETE", f"sessions/{s['id']}")
    assert not [s for s in _api(lab, "GET", "sessions") if s["path"].endswith(NOTEBOOK)]


def _saved_html(lab: Lab, index: int) -> str:
    nb = json.loads((lab.root / NOTEBOOK).read_text())
    return "".join("".join(o.get("data", {}).get("text/html", "")) for o in nb["cells"][index]["outputs"])


def _shot(page: Any, name: str) -> None:
    SHOTS.mkdir(parents=True, exist_ok=True)
    page.screenshot(path=str(SHOTS / name), full_page=True)


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
        _shot(page, "saved-widgets-live.png")
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
        _shut_kernel_down(lab)
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
        _shot(page, "saved-widgets-reopened.png")
    except BaseException:
        _shot(page, "saved-widgets-failure.png")
        raise
