"""`slurmlab topo` and `slurmlab mig` on real captures and sandbox profiles."""

from __future__ import annotations

from pathlib import Path

import pytest
from shared_paths import require_shared

from slurmlab.cli import main


def test_topo_summary_and_best(capsys: pytest.CaptureFixture[str]) -> None:
    path = require_shared("nvidia-smi", "topo-dgx1-v100-8gpu-4mlx5-tabs.txt")
    assert main(["topo", str(path), "--best", "4"]) == 0
    out = capsys.readouterr().out
    assert "8 GPUs, 4 NICs" in out and "NVLink generation: NVLink 2" in out
    assert "NVLink: 8 pairs NV2, 8 pairs NV1" in out and "GPUs 0, 1, 2, 3 (CPUs 0-19,40-59)" not in out
    assert "GPUs 0, 1, 2, 3: every pair is joined by NVLink" in out


def test_topo_partial_warns_on_stderr(capsys: pytest.CaptureFixture[str]) -> None:
    path = require_shared("nvidia-smi", "topo-16gpu-nvswitch-nv6-10mlx5-dgx2-class-PARTIAL.txt")
    assert main(["topo", str(path)]) == 0
    captured = capsys.readouterr()
    assert "warning:" in captured.err and "incomplete" in captured.err and "16 GPUs, 10 NICs" in captured.out


def test_a_resource_warning_from_elsewhere_is_not_told_as_the_capture_s(
    capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    import warnings

    from slurmlab.commands.topo import command as topo

    def collected_meanwhile(found: object, args: object) -> object:
        # what the garbage collector says of another thread's unclosed pipe while the capture is read
        warnings.warn(
            "unclosed file <_io.FileIO name=39 mode='rb' closefd=True>", ResourceWarning, stacklevel=1
        )
        return found

    monkeypatch.setattr(topo, "apply_nvlink", collected_meanwhile)
    path = require_shared("nvidia-smi", "topo-16gpu-nvswitch-nv6-10mlx5-dgx2-class-PARTIAL.txt")
    assert main(["topo", str(path)]) == 0
    err = capsys.readouterr().err
    assert "incomplete" in err and "unclosed file" not in err


def test_wrong_kind_and_bad_file_are_clear_errors(capsys: pytest.CaptureFixture[str], tmp_path: Path) -> None:
    path = require_shared("nvidia-smi", "mig-lgi-a30-24gb-4x1g.6gb.txt")
    assert main(["topo", str(path)]) == 2
    assert "`slurmlab mig` reads MIG listings" in capsys.readouterr().err
    assert main(["topo", str(tmp_path / "missing.txt")]) == 2
    assert "cannot read it" in capsys.readouterr().err
    assert main(["topo"]) == 2
    assert "give a FILE" in capsys.readouterr().err


def test_mig_listing_and_html(capsys: pytest.CaptureFixture[str], tmp_path: Path) -> None:
    pytest.importorskip("bokeh")
    path = require_shared("nvidia-smi", "smi-L-h100-80gb-hbm3-ci-uuids-r570-migguide.txt")
    out_html = tmp_path / "mig.html"
    assert main(["mig", str(path), "--html", str(out_html)]) == 0
    out = capsys.readouterr().out
    assert "MIG-c788539f-c1ea-5a36-8b4d-9b07d024b1bb" in out and "3g.40gb" in out and out_html.exists()


def test_mig_tables(capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["mig", str(require_shared("nvidia-smi", "mig-lgipp-a30-24gb.txt"))]) == 0
    assert "profile id  5  placements 0:2, 2:2" in capsys.readouterr().out
    assert main(["mig", str(require_shared("nvidia-smi", "mig-lci-a100-1g.5gb-single.txt"))]) == 0
    assert "GPU 0  GI 13  CI 0  1g.5gb placement 0:1" in capsys.readouterr().out


def test_profiles(capsys: pytest.CaptureFixture[str]) -> None:
    pytest.importorskip("slurmlab.sandbox.profile")
    assert main(["topo", "--profile", "dgx-h100", "--best", "2"]) == 0
    out = capsys.readouterr().out
    assert "8 GPUs (NVIDIA H100 80GB HBM3)" in out and "28 pairs NV18" in out and "all on NUMA 0" in out
    assert main(["mig", "--profile", "h200-mig"]) == 0
    assert "H200-141GB" in capsys.readouterr().out
    assert main(["topo", "--profile", "no-such-profile"]) == 2


@pytest.mark.parametrize(
    "name",
    [
        "mig-cgi-C-h100-pcie-create-log.txt",
        "mig-lgi-a100-40gb-3-2-1-1-migguide-r450fmt.txt",
        "smi-L-a100-40gb-2x3g.20gb-migguide.txt",
    ],
)
def test_cli_and_library_read_the_same_layout(name: str, capsys: pytest.CaptureFixture[str]) -> None:
    # one reader: `slurmlab mig FILE` prints the summary of exactly what slurmlab.mig(FILE) loads
    import slurmlab

    path = require_shared("nvidia-smi", name)
    layout = slurmlab.mig(path).layout
    assert layout.gpus, name
    assert main(["mig", str(path)]) == 0
    assert layout.summary() in capsys.readouterr().out


@pytest.mark.parametrize(
    ("name", "kind", "expect"),
    [
        ("mig-lgip-a100-80gb-partially-used.txt", "lgip", "free"),
        ("mig-lgipp-a30-24gb.txt", "lgipp", "placements"),
        ("mig-lci-a100-1g.5gb-single.txt", "lci", "CI"),
    ],
)
def test_catalogues_are_read_by_the_library_and_refused_as_layouts(
    name: str, kind: str, expect: str, capsys: pytest.CaptureFixture[str]
) -> None:
    import slurmlab
    from slurmlab.core.gpu.captures import read_mig_capture
    from slurmlab.errors import RequestError

    path = require_shared("nvidia-smi", name)
    capture = read_mig_capture(path.read_text(), name)
    assert capture.kind == kind and capture.layout is None and capture.lines()
    assert main(["mig", str(path)]) == 0
    out = capsys.readouterr().out
    assert out.splitlines() == capture.lines() and expect in out
    with pytest.raises(RequestError, match="catalogue, not a layout"):
        slurmlab.mig(path)
