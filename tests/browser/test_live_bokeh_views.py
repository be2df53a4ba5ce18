"""slurmlab's live Bokeh views draw in JupyterLab: the topology explorer's figures and an allocation panel's usage
chart are jupyter_bokeh views (``BokehModel``), which draw with the page's BokehJS and load none of their own.
The bug: nothing put BokehJS in the page, so each view was "Click to show javascript error" (``Failed to create
view for 'BokehView' … Cannot read properties of undefined (reading 'require')``).

One JupyterLab and one chromium for the module; the session's sandbox. Each test opens a fresh page (a page
without BokehJS, as a user's is) and a kernel of its own, ends it and cancels its jobs. Screenshots:
build/screenshots/live-bokeh-*.png.
"""

from __future__ import annotations

import getpass
import json
import re
import urllib.request
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from labserver import Lab, chromium_browser, require_browser, running_lab
from notebook_driver import NotebookPage, write_notebook

pytestmark = [pytest.mark.browser, pytest.mark.sandbox, pytest.mark.slow]

REPO = Path(__file__).resolve().parents[2]
SHOTS = REPO / "build" / "screenshots"
JS_ERROR = re.compile(r"javascript error", re.IGNORECASE)
# what an area shows once its view came up or failed: a Bokeh canvas, or the widget manager's error
SETTLED = """el => {
    // Bokeh draws in nested shadow roots: look through every open one
    const canvas = root => root.querySelector('canvas') !== null
        || [...root.querySelectorAll('*')].some(e => e.shadowRoot && canvas(e.shadowRoot));
    return canvas(el) || /javascript error/i.test(el.innerText);
}"""


def _shot(page: Any, name: str) -> None:
    SHOTS.mkdir(parents=True, exist_ok=True)
    page.screenshot(path=str(SHOTS / f"live-bokeh-{name}.png"), full_page=True)


def _api(lab: Lab, method: str, path: str) -> Any:
    req = urllib.request.Request(f"{lab.url}/{path}?token={lab.token}", method=method)
    with urllib.request.urlopen(req, timeout=30) as res:
        body = res.read()
    return json.loads(body) if body else None


@pytest.fixture(scope="module")
def lab(slurm_sandbox: Any, tmp_path_factory: pytest.TempPathFactory) -> Iterator[Lab]:
    pytest.importorskip("jupyter_bokeh", reason="the live views need jupyter_bokeh (the widgets extra)")
    require_browser()
    base = tmp_path_factory.mktemp("lab-live-bokeh")
    with running_lab(base, slurm_sandbox.env()) as server:
        yield server


@pytest.fixture(scope="module")
def chromium(lab: Lab) -> Iterator[Any]:
    with chromium_browser() as launched:
        yield launched


@pytest.fixture
def open_notebook(lab: Lab, chromium: Any, slurm_sandbox: Any) -> Iterator[Any]:
    """``open_notebook(name, cells)``: the notebook written and opened in a fresh page; afterwards its kernel ends
    and no job of this user is left."""
    opened: list[Any] = []
    mine = ["scancel", "--user", getpass.getuser()]

    def open_(name: str, cells: list[str]) -> NotebookPage:
        write_notebook(lab.root / name, cells)
        context = chromium.new_context(viewport={"width": 1400, "height": 1200})
        opened.append(context)
        return NotebookPage(context.new_page(), lab.url, lab.token, name)

    try:
        yield open_
    finally:
        for context in opened:
            context.close()
        for session in _api(lab, "GET", "api/sessions"):
            _api(lab, "DELETE", f"api/sessions/{session['id']}")
        slurm_sandbox.runner().run(mine, check=False)


def _settled(nb: NotebookPage, area: Any, timeout_ms: int) -> None:
    area.wait_for(timeout=timeout_ms)
    nb.page.wait_for_function(SETTLED, arg=area.element_handle(), timeout=timeout_ms)


def _drawn(area: Any) -> None:
    """``area`` holds a drawn Bokeh canvas and no widget error."""
    text = str(area.inner_text())
    assert not JS_ERROR.search(text), text
    area.locator("canvas").first.wait_for(state="attached", timeout=10_000)


def test_the_topology_explorer_draws_its_figure(open_notebook: Any) -> None:
    """Lesson 03's explorer: its figure area holds a Bokeh canvas, also after a pick made from code."""
    nb = open_notebook(
        "explorer-draws.ipynb",
        [
            "import slurmlab\n"
            "explorer = slurmlab.TopologyExplorer.from_cluster(profiles=['dgx-h100', 'seed'], n=2)\n"
            "explorer",
            "picked = explorer.select('profile:dgx-h100', 4)\nprint('PICKED', picked.n)",
        ],
    )
    try:
        out = nb.run(0, timeout=90)
        assert "Traceback" not in out, out
        explorer = nb.output(0)
        _settled(nb, explorer, 60_000)
        _shot(nb.page, "explorer")
        _drawn(explorer)
        assert "PICKED 4" in nb.run(1, timeout=60)
        nb.page.wait_for_timeout(1000)  # the new figures replace the old ones in place
        _settled(nb, explorer, 30_000)
        _shot(nb.page, "explorer-picked")
        _drawn(explorer)
    except BaseException:
        _shot(nb.page, "explorer-failure")
        raise


def test_a_panels_usage_chart_draws_once_a_step_ran(open_notebook: Any) -> None:
    """A running allocation in which a step ran: the panel's usage section shows the live chart, drawn."""
    nb = open_notebook(
        "usage-chart-draws.ipynb",
        [
            "%load_ext slurmlab",
            "job = %salloc -n1 --gpus=1 -t 5\njob",
            "job.wait('RUNNING', timeout=90)\n%srun sleep 12",
        ],
    )
    try:
        nb.run(0)
        said = nb.run(1, timeout=60)
        assert "Error" not in said, said
        panel = nb.output(1).locator(".slurmlab-allocation").first
        panel.locator(".slurmlab-badge").filter(has_text="RUNNING").wait_for(timeout=90_000)
        out = nb.run(2, timeout=90)
        assert "Traceback" not in out, out
        usage = panel.locator(".slurmlab-usage").first
        _settled(nb, usage, 60_000)
        _shot(nb.page, "usage-chart")
        _drawn(usage)
        assert not JS_ERROR.search(str(panel.inner_text()))
    except BaseException:
        _shot(nb.page, "usage-chart-failure")
        raise
