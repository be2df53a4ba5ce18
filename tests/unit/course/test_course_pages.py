"""A lesson's HTML page asks nothing of the internet, keeps the figures' scripts, and shows a widget's saved
fallback (nbconvert on hand-made executed notebooks; no kernel, no browser: tests/browser/test_course_html.py
opens real pages in chromium)."""

from __future__ import annotations

import re
from pathlib import Path
from typing import Any

import pytest

nbformat = pytest.importorskip("nbformat")
pytest.importorskip("nbconvert")

from slurmlab.course.pages import lesson_html  # noqa: E402

WIDGET_VIEW = "application/vnd.jupyter.widget-view+json"
WIDGET_STATE = "application/vnd.jupyter.widget-state+json"
MODEL = "5b0ad6b1c3e34b4c9d3c6ad9b4f6e2aa"


def _executed() -> Any:
    v4 = nbformat.v4
    figure = v4.new_code_cell(
        "fig",
        outputs=[
            v4.new_output(
                "display_data",
                data={
                    "text/html": "<script type='text/javascript'>window.slurmlabFigure = 1;</script>"
                    "<div class='figure-root'></div>",
                    "text/plain": "<figure>",
                },
            )
        ],
    )
    widget = v4.new_code_cell(
        "panel",
        outputs=[
            v4.new_output(
                "display_data",
                data={
                    WIDGET_VIEW: {"model_id": MODEL, "version_major": 2, "version_minor": 0},
                    "text/html": "<b>job 12: RUNNING</b> (as of 08:10; re-run the cell to reconnect)",
                    "text/plain": "Allocation(job 12)",
                },
            )
        ],
    )
    error = v4.new_code_cell(
        "1/0",
        outputs=[
            v4.new_output(
                "error",
                ename="ZeroDivisionError",
                evalue="division by zero",
                traceback=["ZeroDivisionError: division by zero"],
            )
        ],
    )
    nb = v4.new_notebook(
        cells=[v4.new_markdown_cell("# Lesson\nInline math $x^2$ stays text."), figure, widget, error]
    )
    nb.metadata["widgets"] = {
        WIDGET_STATE: {
            "version_major": 2,
            "version_minor": 0,
            "state": {MODEL: {"model_name": "BoxModel", "state": {}}},
        }
    }
    return nb


@pytest.fixture(scope="module")
def page() -> str:
    return lesson_html(_executed(), title="Lesson <one>", folder=Path("."))


def test_nothing_is_loaded_from_the_network(page: str) -> None:
    loads = re.findall(
        r"""<(?:script|link|img|iframe)\b[^>]*\b(?:src|href)\s*=\s*["']?(https?:)?//""", page, re.I
    )
    assert loads == [], "the page loads something over the network"
    assert "require.min.js" not in page and "MathJax.Hub.Config" not in page and "html-manager" not in page
    assert "mermaid.esm" not in page and "cdnjs" not in page and "unpkg.com" not in page


def test_figure_scripts_and_errors_survive(page: str) -> None:
    assert "window.slurmlabFigure = 1;" in page and "figure-root" in page
    assert "ZeroDivisionError" in page and "division by zero" in page


def test_a_widget_shows_its_saved_html_not_a_widget_view(page: str) -> None:
    assert "job 12: RUNNING" in page and "re-run the cell" in page
    assert WIDGET_VIEW not in page and WIDGET_STATE not in page and MODEL not in page


def test_the_page_is_titled_and_links_back_to_the_index(page: str) -> None:
    assert "<title>Lesson &lt;one&gt;</title>" in page
    assert 'href="index.html"' in page


def test_the_notebook_itself_is_left_as_it_was() -> None:
    nb = _executed()
    lesson_html(nb, title="x", folder=Path("."))
    assert WIDGET_STATE in nb.metadata["widgets"]
