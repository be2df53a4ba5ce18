"""The course's HTML works offline (issue 16): a lesson page built by slurmlab.course draws its Bokeh figure in
headless chromium with every request that is not a local file refused, and a widget shows its saved text
instead of "Loading widget" forever. Clusters often have no internet: nothing may leave the page."""

from __future__ import annotations

import os
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from labserver import CHROMIUM, CHROMIUM_ARGS, require_browser

pytestmark = [pytest.mark.browser, pytest.mark.slow]

CELLS = [
    "import slurmlab\nslurmlab.topology(profile='dgx-h100')",
    "import ipywidgets\nipywidgets.IntSlider(value=3, description='gpus')",
    "print('figure drawn above')",
]


def _lesson(folder: Path) -> None:
    nbformat = pytest.importorskip("nbformat")
    v4 = nbformat.v4
    nb = v4.new_notebook(
        cells=[
            v4.new_markdown_cell("# A lesson with a figure\nThe topology of a DGX H100."),
            *(v4.new_code_cell(source) for source in CELLS),
        ]
    )
    nb.metadata["kernelspec"] = {"name": "python3", "display_name": "Python 3", "language": "python"}
    nbformat.write(nb, str(folder / "00-figure.ipynb"))


@pytest.fixture(scope="module")
def course(tmp_path_factory: pytest.TempPathFactory) -> Path:
    require_browser()
    pytest.importorskip("nbclient")
    from slurmlab.course import build_course, discover

    src = tmp_path_factory.mktemp("lessons")
    _lesson(src)
    out = tmp_path_factory.mktemp("course")
    built = build_course(discover(src), out, env=dict(os.environ), profile="dgx-h100", slurm="-", echo=print)
    assert built.ok, [r.error for r in built.results]
    return out


@pytest.fixture
def page() -> Iterator[tuple[Any, list[str], list[str]]]:
    """A chromium page that answers only file:// requests: (page, refused URLs, console errors)."""
    from playwright.sync_api import sync_playwright

    refused: list[str] = []
    errors: list[str] = []
    with sync_playwright() as pw:
        chromium = pw.chromium.launch(executable_path=CHROMIUM, args=CHROMIUM_ARGS, headless=True)
        try:
            context = chromium.new_context(viewport={"width": 1400, "height": 1000})

            def gate(route: Any) -> None:
                if route.request.url.startswith("file://"):
                    route.continue_()
                else:
                    refused.append(route.request.url)
                    route.abort()

            context.route("**/*", gate)
            tab = context.new_page()
            tab.on("console", lambda msg: errors.append(msg.text) if msg.type == "error" else None)
            tab.on("pageerror", lambda exc: errors.append(str(exc)))
            yield tab, refused, errors
        finally:
            chromium.close()


def test_the_lesson_page_draws_its_bokeh_figure_offline(
    course: Path, page: tuple[Any, list[str], list[str]]
) -> None:
    tab, refused, errors = page
    tab.goto((course / "00-figure.html").as_uri())
    # BokehJS came inline with the figure: its root fills with a canvas (inside Bokeh's shadow DOM)
    canvas = tab.locator("[data-root-id] canvas").first
    canvas.wait_for(state="attached", timeout=20_000)
    box = canvas.bounding_box()
    assert box is not None and box["width"] > 100 and box["height"] > 100
    assert tab.evaluate("typeof window.Bokeh") == "object"
    assert not tab.locator(".slurmlab-bokehjs-missing").first.is_visible()
    tab.wait_for_timeout(500)  # late requests (fonts, a lazily loaded script) would show up here
    assert refused == [], f"the page asked the network for {refused}"
    assert errors == [], errors


def test_a_widget_shows_its_saved_text_not_loading_widget(
    course: Path, page: tuple[Any, list[str], list[str]]
) -> None:
    tab, refused, _errors = page
    tab.goto((course / "00-figure.html").as_uri())
    text = tab.inner_text("body")
    assert "IntSlider(value=3" in text and "gpus" in text
    assert "Loading widget" not in text
    assert "figure drawn above" in text
    assert refused == []


def test_the_index_links_the_lesson_and_says_how_widgets_show(
    course: Path, page: tuple[Any, list[str], list[str]]
) -> None:
    tab, refused, errors = page
    tab.goto((course / "index.html").as_uri())
    link = tab.get_by_role("link", name="A lesson with a figure")
    assert link.get_attribute("href") == "00-figure.html"
    assert "dgx-h100" in tab.inner_text("body") and "saved" in tab.inner_text("body")
    link.click()
    tab.wait_for_url("**/00-figure.html")
    assert tab.title() == "A lesson with a figure"
    assert refused == [] and errors == []
