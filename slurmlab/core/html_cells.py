"""Cells of the HTML tables slurmlab shows in a notebook (doctor findings, isolation checks, GPU maps).

JupyterLab's rendered HTML right-aligns every table cell (it is made for numbers), so a sentence of evidence
ended at the right edge, ragged on its left (issue 28). These cells carry their alignment inline, where every
viewer keeps it: JupyterLab in any theme, the saved notebook, the HTML course. Evidence that is data (a dict,
a list) is shown as ``key: value`` lines a reader can scan, not as one line of raw JSON.
"""

from __future__ import annotations

import html
import json
from collections.abc import Iterable, Mapping

__all__ = ["CELL_STYLE", "evidence_html", "td", "th"]

CELL_STYLE = "text-align:left;vertical-align:top"
EVIDENCE_CHARS = 300  # a long value ends in an ellipsis; the whole record is in the result's JSON


def td(inner_html: str, style: str = "") -> str:
    """A left-aligned cell holding ``inner_html`` (already escaped), with more ``style`` when given."""
    return f"<td style='{CELL_STYLE}{';' + style if style else ''}'>{inner_html}</td>"


def th(text: str) -> str:
    """A left-aligned header cell of plain ``text``."""
    return f"<th style='{CELL_STYLE}'>{html.escape(text)}</th>"


def _short(text: str) -> str:
    return text if len(text) <= EVIDENCE_CHARS else text[: EVIDENCE_CHARS - 1] + "…"


def _value(value: object) -> str:
    if isinstance(value, str):
        return value
    if isinstance(value, (list, tuple)) and all(isinstance(v, (str, int, float)) for v in value):
        return ", ".join(str(v) for v in value)
    return json.dumps(value, default=str)


def evidence_html(evidence: object) -> str:
    """Evidence as HTML: one ``key: value`` line per entry of a mapping (the key in bold), a list's items one a
    line, any other value as its text; nothing for no evidence."""
    if evidence in (None, "", [], {}):
        return ""
    lines: Iterable[str]
    if isinstance(evidence, Mapping):
        lines = (
            f"<b>{html.escape(str(key))}</b>: {html.escape(_short(_value(value)))}"
            for key, value in evidence.items()
        )
    elif isinstance(evidence, (list, tuple)):
        lines = (html.escape(_short(_value(item))) for item in evidence)
    else:
        lines = [html.escape(_short(str(evidence)))]
    return "<br>".join(lines)
