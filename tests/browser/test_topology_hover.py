"""The topology figure's hover text in a real browser: one hover tool per layer (``nodes``, ``links``) shows the
title and lines of the row under the mouse, and a device name read from ``nvidia-smi`` stays text, never markup."""

from __future__ import annotations

import dataclasses
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from labserver import chromium_browser, fresh_page, require_browser
from shared_paths import require_shared

pytestmark = [pytest.mark.browser]

pytest.importorskip("bokeh", reason="the viz extra (bokeh) is not installed")

HOSTILE = '<img src=x onerror="window.__pwned=1">'

# where the row of ``kind`` sits on the page: its data coordinates through the figure's scales
_ROW_ON_PAGE = """([name, kind]) => {
  const view = Object.values(Bokeh.index)[0];
  const layer = view.model.renderers.find(r => r.name === name);
  const data = layer.data_source.data;
  const i = Array.from(data.kind).indexOf(kind);
  const box = view.canvas_view.el.getBoundingClientRect();
  return [box.left + view.frame.x_scale.compute(data.x[i]), box.top + view.frame.y_scale.compute(data.y[i])];
}"""

# the text of every Bokeh tooltip shown, searched through the shadow roots Bokeh draws into
_TOOLTIPS = """() => {
  const out = [];
  const walk = (root) => {
    for (const el of root.querySelectorAll('*')) {
      if (el.classList.contains('bk-tooltip-content')) out.push({text: el.innerText, imgs: el.querySelectorAll('img').length});
      if (el.shadowRoot) walk(el.shadowRoot);
    }
  };
  walk(document);
  return out;
}"""


@pytest.fixture(scope="module")
def browser() -> Iterator[Any]:
    require_browser()
    with chromium_browser() as b:
        yield b


def _page_of(fig: Any, folder: Path) -> str:
    from bokeh.embed import file_html
    from bokeh.resources import INLINE

    path = folder / "figure.html"
    path.write_text(file_html(fig, INLINE, "topology"))
    return path.as_uri()


def _hover(browser: Any, url: str, kind: str) -> list[dict[str, Any]]:
    with fresh_page(browser, 1400, 1200) as page:
        errors: list[str] = []
        page.on("pageerror", lambda exc: errors.append(str(exc)))
        page.goto(url)
        page.locator("canvas").first.wait_for(state="attached", timeout=20_000)
        page.wait_for_function("() => window.Bokeh && Object.keys(Bokeh.index).length > 0")
        x, y = page.evaluate(_ROW_ON_PAGE, ["nodes", kind])
        page.mouse.move(x, y)
        page.wait_for_function(f"({_TOOLTIPS})().length > 0", timeout=10_000)
        shown: list[dict[str, Any]] = page.evaluate(_TOOLTIPS)
        assert page.evaluate("window.__pwned") is None
        assert errors == [], errors
        return shown


def test_a_gpu_shows_its_facts_on_hover(browser: Any, tmp_path: Path) -> None:
    import slurmlab
    from slurmlab.viz.topology_view import topology_figure

    fig = topology_figure(slurmlab.topology(profile="dgx-h100").topology, highlight_gpus=[0])
    shown = _hover(browser, _page_of(fig, tmp_path), "gpus")
    gpu = next(t["text"] for t in shown if t["text"].startswith("GPU0\n"))
    assert "NUMA: NUMA 0" in gpu and "CPU affinity: 0-55" in gpu and "NVLinks: 18" in gpu


def test_a_hostile_nic_name_is_shown_as_text(browser: Any, tmp_path: Path) -> None:
    from slurmlab.core.gpu.smi import parse_topo_matrix
    from slurmlab.viz.topology_view import topology_figure

    topo = parse_topo_matrix(require_shared("nvidia-smi", "topo-dgx1-v100-8gpu-4mlx5-tabs.txt").read_text())
    first = topo.nics[0]
    topo = dataclasses.replace(topo, nics=(dataclasses.replace(first, device=HOSTILE), *topo.nics[1:]))
    shown = _hover(browser, _page_of(topology_figure(topo), tmp_path), "nics")
    # the NIC's own tip, and the tip of its dotted line to a closest GPU (the mouse is over both)
    nic = next(t["text"] for t in shown if t["text"].startswith(f"{first.name} = "))
    assert nic.startswith(f"{first.name} = {HOSTILE}\nclosest GPUs: ")
    assert any(t["text"].startswith(f"{HOSTILE} – GPU") for t in shown)
    assert [t["imgs"] for t in shown] == [0] * len(shown)
