"""`slurmlab topo --nvlink` and a lone `nvidia-smi nvlink -s` file: link state in words, mistakes told plainly."""

from __future__ import annotations

from pathlib import Path

import pytest
from shared_paths import require_shared

from slurmlab.cli import main

TOPO = "topo-8x-h100-sxm-nv18-no-nics-spaces.txt"
NVLINK = "nvlink-status-i0-h100-80gb-hbm3.txt"


def degraded(tmp_path: Path) -> Path:
    text = require_shared("nvidia-smi", NVLINK).read_text()
    text = text.replace("Link 2: 26.562 GB/s", "Link 2: <inactive>").replace(
        "Link 5: 26.562 GB/s", "Link 5: 0 GB/s"
    )
    path = tmp_path / "nvlink-s.txt"
    path.write_text(text)
    return path


def test_topo_with_nvlink_prints_the_fabric_and_the_faults(
    capsys: pytest.CaptureFixture[str], tmp_path: Path
) -> None:
    topo = require_shared("nvidia-smi", TOPO)
    nv = degraded(tmp_path)
    assert main(["topo", str(topo), "--nvlink", str(nv)]) == 0
    out = capsys.readouterr().out
    assert "NVLink fabric: switched (NVSwitch)" in out and "but an H100 has 18" in out
    assert "GPU0: 2 of 18 links inactive (inactive: link 2, 5)" in out
    # the same files the other way round are put right
    assert main(["topo", str(nv), "--nvlink", str(topo)]) == 0
    assert "GPU0: 2 of 18 links inactive" in capsys.readouterr().out


def test_topo_with_nvlink_writes_the_marked_figure(
    capsys: pytest.CaptureFixture[str], tmp_path: Path
) -> None:
    pytest.importorskip("bokeh")
    html = tmp_path / "topo.html"
    assert (
        main(
            [
                "topo",
                str(require_shared("nvidia-smi", TOPO)),
                "--nvlink",
                str(degraded(tmp_path)),
                "--html",
                str(html),
            ]
        )
        == 0
    )
    page = html.read_text()
    assert "2 of 18 links inactive" in page and "NVSwitch" in page


def test_lone_nvlink_s_is_reported_not_refused(capsys: pytest.CaptureFixture[str], tmp_path: Path) -> None:
    assert main(["topo", str(degraded(tmp_path))]) == 0
    out = capsys.readouterr().out
    assert (
        "GPU 0: NVIDIA H100 80GB HBM3 (GPU-5a10e6e5-95f7-2785-ed63-6f6147f304f7): 16 of 18 links active"
        in out
    )
    assert "for the fabric and the figure: slurmlab topo topo-m.txt --nvlink" in out
    assert "slurmlab mig" not in out


def test_nvlink_mistakes_are_told(capsys: pytest.CaptureFixture[str], tmp_path: Path) -> None:
    nv = degraded(tmp_path)
    assert main(["topo", str(nv), "--html", str(tmp_path / "x.html")]) == 2
    err = capsys.readouterr().err
    assert "nothing to draw from `nvidia-smi nvlink -s` alone" in err and "--nvlink" in err
    assert "Traceback" not in err
    assert main(["topo", str(nv), "--nvlink", str(nv)]) == 2
    assert "both FILE and --nvlink are `nvidia-smi nvlink -s` output" in capsys.readouterr().err
    topo = require_shared("nvidia-smi", TOPO)
    assert main(["topo", str(topo), "--nvlink", str(topo)]) == 2
    assert (
        "looks like `topo` output; the link state comes from `nvidia-smi nvlink -s`"
        in capsys.readouterr().err
    )
    assert main(["topo", str(topo), "--nvlink", str(tmp_path / "missing.txt")]) == 2
    assert "cannot read it" in capsys.readouterr().err
    other = require_shared("nvidia-smi", "nvlink-status-4x-a100-sxm4-80gb.txt")
    assert (
        main(
            [
                "topo",
                str(require_shared("nvidia-smi", "topo-2x-rtx3090-nvlink-bridge-nv4.txt")),
                "--nvlink",
                str(other),
            ]
        )
        == 2
    )
    assert "the topology has GPUs 0, 1: were both captures taken on the same node" in capsys.readouterr().err
