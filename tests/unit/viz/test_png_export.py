"""PNG and HTML export: a DGX H100 topology and an H200 MIG layout are written under build/."""

from __future__ import annotations

import struct
from pathlib import Path

import pytest
from shared_paths import require_shared

pytest.importorskip("bokeh", reason="the viz extra (bokeh) is not installed")

from slurmlab.core.gpu.mig import MigLayout
from slurmlab.core.gpu.smi import parse_topo_matrix
from slurmlab.errors import SlurmlabError
from slurmlab.viz.export import chromium_path, export_png, save_html
from slurmlab.viz.mig_view import mig_figure
from slurmlab.viz.topology_view import topology_figure

BUILD = Path(__file__).resolve().parents[3] / "build"


def png_size(path: Path) -> tuple[int, int]:
    head = path.read_bytes()[:24]
    assert head[:8] == b"\x89PNG\r\n\x1a\n", f"{path} is not a PNG"
    w, h = struct.unpack(">II", head[16:24])
    return w, h


def export_or_skip(fig: object, path: Path) -> Path:
    if chromium_path() is None:
        pytest.skip("chromium is not installed (apt-get install chromium chromium-driver)")
    pytest.importorskip("playwright.sync_api", reason="playwright (test extra) drives chromium")
    try:
        return export_png(fig, path)
    except SlurmlabError as exc:
        if "failed" in str(exc):
            pytest.skip(f"chromium could not start here: {exc}")
        raise


@pytest.mark.slow
@pytest.mark.browser  # headless chromium renders it: not in the fast tier
def test_png_of_the_dgx_h100_profile_topology() -> None:
    # the sandbox's own hardware profile: what its gres.conf (Cores=, Links=) is rendered from
    import slurmlab

    nt = slurmlab.topology(profile="dgx-h100")
    assert len(nt.topology.gpus) == 8 and nt.topology.nvlinks(0, 7) == 18
    fig = topology_figure(
        nt.topology, highlight_gpus=[0, 1], task_cpus={"task 0": range(0, 28), "task 1": range(28, 56)}
    )
    out = export_or_skip(fig, BUILD / "dgx-h100-topology.png")
    w, h = png_size(out)
    assert w >= fig.width and h >= fig.height * 0.9  # rendered at 1.5x device scale, cropped to the figure


@pytest.mark.slow
@pytest.mark.browser  # headless chromium renders it: not in the fast tier
def test_png_of_a_real_8x_h100_capture() -> None:
    text = require_shared("nvidia-smi", "topo-8x-h100-sxm-nv18-no-nics-spaces.txt").read_text()
    topo = parse_topo_matrix(text, gpu_model="NVIDIA H100 80GB HBM3")
    fig = topology_figure(
        topo,
        highlight_gpus=[0, 1, 2, 3],
        task_cpus={"task 0": range(0, 12), "task 1": range(12, 24), "task 2": range(96, 108)},
    )
    out = export_or_skip(fig, BUILD / "h100-capture-topology.png")
    w, h = png_size(out)
    assert w >= fig.width and h >= fig.height * 0.9


@pytest.mark.slow
@pytest.mark.browser  # headless chromium renders it: not in the fast tier
def test_png_of_the_h200_mig_profile() -> None:
    import slurmlab

    nm = slurmlab.mig(profile="h200-mig")
    assert nm.layout.instances()
    out = export_or_skip(mig_figure(nm.layout), BUILD / "h200-mig-profile.png")
    assert png_size(out)[0] > 0


@pytest.mark.slow
@pytest.mark.browser  # headless chromium renders it: not in the fast tier
def test_png_of_h200_mig_layout() -> None:
    lay = MigLayout.from_spec(
        "H200-141GB",
        {
            0: ["3g.71gb", "2g.35gb", "1g.18gb", "1g.18gb"],
            1: ["7g.141gb"],
            2: ["4g.71gb", "2g.35gb", "1g.18gb"],
            3: ["1g.18gb"] * 7,
        },
    )
    fig = mig_figure(lay, highlight=[(0, "2:2"), (3, "6:1")])
    out = export_or_skip(fig, BUILD / "h200-mig.png")
    w, h = png_size(out)
    assert w >= fig.width and h >= fig.height * 0.9


@pytest.mark.slow
@pytest.mark.browser  # headless chromium renders it: not in the fast tier
def test_png_of_nic_rich_capture() -> None:
    text = require_shared(
        "nvidia-smi", "topo-8x-h100-princeton-pli-nv18-6nics-empty-cpu-affinity.txt"
    ).read_text()
    fig = topology_figure(parse_topo_matrix(text), highlight_gpus=[4, 5], show_pcie=True)
    w, _h = png_size(export_or_skip(fig, BUILD / "pli-h100-topology-nics.png"))
    assert w >= fig.width


def test_html_is_standalone(tmp_path: Path) -> None:
    lay = MigLayout.from_spec("A100-40GB", {0: ["3g.20gb", "3g.20gb"]})
    out = save_html(mig_figure(lay), tmp_path / "mig.html")
    html = out.read_text()
    assert "cdn.bokeh.org" not in html and "Bokeh" in html and len(html) > 500_000  # BokehJS inlined
