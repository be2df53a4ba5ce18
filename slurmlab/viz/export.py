"""Write figures as standalone HTML (inline resources: no internet needed) or PNG (headless chromium).

PNG export drives Debian's ``chromium`` through Playwright with ``executable_path`` (never a downloaded
browser), which also works as root thanks to ``--no-sandbox``. Bokeh's own ``export_png`` would need selenium.
"""

from __future__ import annotations

import os
import shutil
from pathlib import Path
from typing import Any

from slurmlab._extras import require
from slurmlab.errors import SlurmlabError
from slurmlab.viz._bokeh import bokeh

__all__ = ["chromium_path", "export_png", "figure_html", "save_html"]

_CHROMIUM_ARGS = [
    "--no-sandbox",
    "--disable-gpu",
    "--disable-dev-shm-usage",
    "--disable-background-networking",
    "--disable-component-update",
    "--disable-sync",
    "--no-first-run",
]


def figure_html(fig: Any, title: str = "slurmlab") -> str:
    """The figure as one HTML page with BokehJS inlined."""
    embed = bokeh("embed", "HTML export")
    resources = bokeh("resources", "HTML export")
    html: str = embed.file_html(fig, resources.INLINE, title=title)
    return html


def save_html(fig: Any, path: str | os.PathLike[str], title: str = "slurmlab") -> Path:
    out = Path(path)
    out.parent.mkdir(parents=True, exist_ok=True)
    out.write_text(figure_html(fig, title), encoding="utf-8")
    return out


def chromium_path() -> str | None:
    """Debian's chromium binary (``SLURMLAB_CHROMIUM`` overrides), or None."""
    for candidate in (
        os.environ.get("SLURMLAB_CHROMIUM"),
        shutil.which("chromium"),
        "/usr/bin/chromium",
        shutil.which("chromium-browser"),
        shutil.which("google-chrome"),
    ):
        if candidate and Path(candidate).exists():
            return candidate
    return None


def export_png(fig: Any, path: str | os.PathLike[str], *, timeout_s: float = 60.0) -> Path:
    """Render ``fig`` in headless chromium and save a PNG of it at ``path``."""
    browser_bin = chromium_path()
    if browser_bin is None:
        raise SlurmlabError(
            "PNG export needs chromium, which was not found",
            hint="apt-get install chromium chromium-driver (or set SLURMLAB_CHROMIUM to a chromium binary)",
        )
    sync_api = require("playwright.sync_api", feature="PNG export", extra="test")
    out = Path(path)
    out.parent.mkdir(parents=True, exist_ok=True)
    html = figure_html(fig)
    width = int(getattr(fig, "width", None) or 900) + 40
    height = int(getattr(fig, "height", None) or 700) + 40
    try:
        with sync_api.sync_playwright() as pw:
            browser = pw.chromium.launch(
                executable_path=browser_bin, headless=True, args=_CHROMIUM_ARGS, timeout=timeout_s * 1000
            )
            try:
                page = browser.new_page(viewport={"width": width, "height": height}, device_scale_factor=1.5)
                page.set_content(html, wait_until="load", timeout=timeout_s * 1000)
                # BokehJS renders asynchronously; wait until its views exist and have painted
                page.wait_for_function(
                    "() => window.Bokeh && Bokeh.documents.length > 0 && Bokeh.index && "
                    "Object.keys(Bokeh.index).length > 0",
                    timeout=timeout_s * 1000,
                )
                page.wait_for_timeout(400)
                target = page.locator(".bk-Figure, .bk-GridPlot, .bk-Column, .bk-Row").first
                if target.count() and target.bounding_box():
                    target.screenshot(path=str(out), timeout=timeout_s * 1000)
                else:
                    page.screenshot(path=str(out), full_page=True, timeout=timeout_s * 1000)
            finally:
                browser.close()
    except SlurmlabError:
        raise
    except Exception as exc:  # playwright's own errors: say what failed and what to try
        raise SlurmlabError(
            f"PNG export with {browser_bin} failed: {type(exc).__name__}: {str(exc).splitlines()[0] if str(exc) else ''}",
            hint="check that chromium starts headless (chromium --headless=new --no-sandbox --dump-dom about:blank)",
        ) from exc
    return out
