"""How long the sidebar takes to draw a real cluster's GPU map (issue 14: "the sidebar draws 8,000 GPUs
without jank"), in Debian's headless chromium.

    python benchmarks/bench_sidebar.py

The compiled map modules (``extensions/slurmlab-lab/lib``: gpumap, gpucanvas, palette, dom) are served to a
blank page and asked to draw 1,000 nodes x 8 GPUs with 3,121 jobs: on the canvas (what the sidebar does for
a map this size), and as one DOM cell per GPU (what it does for small maps: the baseline). Each draw is
timed to the next painted frame, so layout and paint count too. Target: one draw within a frame budget of
50 ms (a refresh the eye does not see stall). Needs the built extension (``make labextension``) and
chromium with Playwright; without them it returns no rows and says why.
"""

from __future__ import annotations

import functools
import http.server
import json
import re
import sys
import tempfile
import threading
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parent))

from _bench import Row

LIB = Path(__file__).resolve().parents[1] / "extensions" / "slurmlab-lab" / "lib"
CHROMIUM = "/usr/bin/chromium"
CHROMIUM_ARGS = ["--headless", "--no-sandbox", "--disable-gpu", "--no-first-run"]
MODULES = ("gpumap", "gpucanvas", "palette", "dom")
NODES, PER_NODE, JOBS = 1000, 8, 3121

PAGE = """<!doctype html><html><body><div id="map" style="width:300px"></div><script type="module">
import { renderMap } from './gpumap.js';
import { JobPalette } from './palette.js';
const nodes = await (await fetch('./nodes.json')).json();
const frame = () => new Promise(r => requestAnimationFrame(() => setTimeout(r, 0)));
window.draw = async (canvasAbove, repeat) => {
  const ctx = { palette: new JobPalette(), jobs: new Map() };
  const target = document.getElementById('map');
  const times = [];
  for (let i = 0; i < repeat + 1; i++) {
    target.replaceChildren();
    await frame();
    const t0 = performance.now();
    renderMap(target, nodes, ctx, canvasAbove);
    await frame();
    times.push(performance.now() - t0);
  }
  times.shift();
  times.sort((a, b) => a - b);
  return times[Math.floor(times.length / 2)];
};
window.ready = true;
</script></body></html>"""


def _nodes() -> list[dict[str, Any]]:
    out = []
    for n in range(NODES):
        gpus = []
        for i in range(PER_NODE):
            k = n * PER_NODE + i
            held = [str(100000 + k)] if k < JOBS else []
            gpus.append(
                {
                    "index": i,
                    "type": "h100",
                    "mig": False,
                    "jobs": held,
                    "shards_used": 0,
                    "shards_total": 0,
                    "whole": bool(held),
                }
            )
        out.append(
            {
                "name": f"gpu{n:04d}",
                "state": "MIXED",
                "partitions": ["gpu"],
                "cpus": 112,
                "alloc_cpus": 8,
                "gres": None,
                "reason": None,
                "gpus": gpus,
            }
        )
    return out


class _Quiet(http.server.SimpleHTTPRequestHandler):
    def log_message(self, format: str, *args: Any) -> None:
        pass


def _serve(folder: Path) -> http.server.ThreadingHTTPServer:
    handler = functools.partial(_Quiet, directory=str(folder))
    server = http.server.ThreadingHTTPServer(("127.0.0.1", 0), handler)
    threading.Thread(target=server.serve_forever, daemon=True).start()
    return server


def measure(quick: bool = False) -> list[Row]:
    missing = [m for m in MODULES if not (LIB / f"{m}.js").exists()]
    if missing or not Path(CHROMIUM).exists():
        print(
            f"bench_sidebar: skipped (built modules missing: {missing}; chromium: {Path(CHROMIUM).exists()})"
        )
        return []
    try:
        from playwright.sync_api import sync_playwright
    except ImportError:
        print("bench_sidebar: skipped (playwright is not installed: pip install -e '.[test]')")
        return []
    repeat = 3 if quick else 5
    with tempfile.TemporaryDirectory(prefix="slurmlab-bench-sidebar-") as d:
        folder = Path(d)
        for m in MODULES:
            # the browser wants the file's name: './dom' -> './dom.js'
            text = (LIB / f"{m}.js").read_text()
            (folder / f"{m}.js").write_text(re.sub(r"from '\./(\w+)'", r"from './\1.js'", text))
        (folder / "index.html").write_text(PAGE)
        (folder / "nodes.json").write_text(json.dumps(_nodes()))
        server = _serve(folder)
        try:
            with sync_playwright() as pw:
                browser = pw.chromium.launch(executable_path=CHROMIUM, args=CHROMIUM_ARGS)
                page = browser.new_page(viewport={"width": 1400, "height": 900})
                page.goto(f"http://127.0.0.1:{server.server_address[1]}/index.html")
                page.wait_for_function("window.ready === true", timeout=30_000)
                canvas_ms = float(page.evaluate(f"draw(512, {repeat})"))
                dom_ms = float(page.evaluate(f"draw(Infinity, {max(1, repeat - 2)})"))
                browser.close()
        finally:
            server.shutdown()
    size = f"{NODES} nodes x {PER_NODE} GPUs, {JOBS} jobs"
    return [
        Row(
            "cluster GPU map",
            "sidebar draws the map (canvas), to the next frame",
            canvas_ms,
            "ms",
            target=50.0,
            baseline=dom_ms,
            baseline_name="one DOM cell per GPU (ms)",
            size=size,
            note=f"canvas {canvas_ms:.0f} ms vs DOM cells {dom_ms:.0f} ms, medians in headless chromium",
        )
    ]


if __name__ == "__main__":
    for row in measure("--quick" in sys.argv):
        print(
            f"{row.group:<18} {row.name:<52} {row.value:>8.1f} {row.unit} (target <= {row.target:g}; "
            f"{'ok' if row.ok else 'MISSED'}) {row.note}"
        )
