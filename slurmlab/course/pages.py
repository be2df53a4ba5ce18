"""An executed lesson as one HTML page that works offline (nbconvert's lab page, with nothing from a CDN)."""

from __future__ import annotations

import copy
from pathlib import Path
from typing import Any

from slurmlab._extras import require

__all__ = ["TEMPLATES", "lesson_html"]

TEMPLATES = Path(__file__).resolve().parent / "templates"
_TEMPLATE = "slurmlab-course"
_FEATURE = "the course's HTML pages"


def lesson_html(nb: Any, *, title: str, folder: Path) -> str:
    """The page of executed notebook ``nb``; ``folder`` is where its relative images are found.

    Widget state is dropped on purpose: with none, nbconvert shows each widget's saved text/HTML (slurmlab's
    widgets save a dated one) instead of a widget view that would need the widget manager from the internet.
    """
    exporters = require("nbconvert.exporters", feature=_FEATURE, extra="course")
    page = copy.deepcopy(nb)
    page.metadata.pop("widgets", None)
    exporter = exporters.HTMLExporter(
        extra_template_basedirs=[str(TEMPLATES)], template_name=_TEMPLATE, embed_images=True
    )
    body: str
    body, _resources = exporter.from_notebook_node(
        page, resources={"metadata": {"name": title, "path": str(folder)}}
    )
    return body
