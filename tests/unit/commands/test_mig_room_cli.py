"""`slurmlab mig`: the room left on each GPU, the model in the title, `--model` mistakes, and the -lgip/-lgipp
catalogue drawn."""

from __future__ import annotations

from pathlib import Path

import pytest
from shared_paths import require_shared

from slurmlab.cli import main

CGI = "mig-cgi-C-h100-pcie-create-log.txt"  # 3g.40gb + 3x 1g.10gb on an H100 PCIe; the log does not name the GPU


def path(name: str) -> str:
    return str(require_shared("nvidia-smi", name))


def test_summary_says_what_can_still_be_carved(capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["mig", path(CGI)]) == 0
    out = capsys.readouterr().out
    assert "free: 1 of 7 compute slices, 1 of 8 memory slices (slice 0)" in out
    assert "room for one more 1g.10gb or 1g.10gb+me" in out
    # the log names no GPU: the geometry fits two models, and the output says so instead of picking one
    assert "MIG profile table: A100-80GB or H100-80GB" in out and "pass the GPU model" in out


def test_model_given_for_a_capture_that_does_not_name_it(capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["mig", path(CGI), "--model", "NVIDIA H100 PCIe"]) == 0
    out = capsys.readouterr().out
    assert "MIG profile table: H100-80GB" in out and "GPU 0: NVIDIA H100 PCIe" in out
    assert "pass the GPU model" not in out


@pytest.mark.parametrize(
    ("name", "model", "expect"),
    [
        # a GPU without MIG
        (CGI, "V100", ["no MIG profile table for GPU model 'V100'", "fit A100-80GB or H100-80GB"]),
        # a MIG GPU whose profiles are not those of the capture
        (
            CGI,
            "A30",
            ["1g.10gb, 3g.40gb do not exist on A30-24GB", "fit A100-80GB or H100-80GB: give one of those"],
        ),
        # a listing that names its GPU, contradicted by --model
        (
            "smi-L-h100-80gb-hbm3-ci-uuids-r570-migguide.txt",
            "A100-40GB",
            ["names its GPU 'NVIDIA H100 80GB HBM3'", "leave the model out"],
        ),
    ],
)
def test_model_mistakes_are_told(
    name: str, model: str, expect: list[str], capsys: pytest.CaptureFixture[str]
) -> None:
    assert main(["mig", path(name), "--model", model]) == 2
    err = capsys.readouterr().err
    assert "Traceback" not in err
    for text in expect:
        assert text in err, err


def test_a_model_that_agrees_with_the_listing_is_accepted(capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["mig", path("smi-L-h100-80gb-hbm3-ci-uuids-r570-migguide.txt"), "--model", "H100-80GB"]) == 0
    assert "GPU 0: NVIDIA H100 80GB HBM3" in capsys.readouterr().out


def test_library_refuses_the_same_model_mistake() -> None:
    import slurmlab
    from slurmlab.errors import RequestError

    with pytest.raises(RequestError, match="do not exist on A30-24GB"):
        slurmlab.mig(path(CGI), model="A30")


@pytest.mark.parametrize("name", ["mig-lgip-a100-80gb-partially-used.txt", "mig-lgipp-a30-24gb.txt"])
def test_catalogues_are_drawn(name: str, tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    pytest.importorskip("bokeh")
    out_html = tmp_path / "catalogue.html"
    assert main(["mig", path(name), "--html", str(out_html)]) == 0
    assert out_html.exists() and "what can still be carved" in out_html.read_text()
    assert "nothing to draw" not in capsys.readouterr().err


def test_lgip_lines_end_with_the_room_sentence(capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["mig", path("mig-lgip-a100-80gb-partially-used.txt")]) == 0
    out = capsys.readouterr().out.splitlines()
    assert out[-1] == (
        "GPU 0: room for up to 4x 1g.10gb, 1x 1g.10gb+me, 2x 2g.20gb, 1x 3g.40gb "
        "(each count alone: they share the free slices)"
    )
    assert main(["mig", path("mig-lgip-a30-24gb-all-used.txt")]) == 0
    assert capsys.readouterr().out.splitlines()[-1] == "GPU 0: no room for another instance"


def test_lci_has_nothing_to_draw(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["mig", path("mig-lci-a100-1g.5gb-single.txt"), "--html", str(tmp_path / "x.html")]) == 0
    assert "nothing to draw" in capsys.readouterr().err and not (tmp_path / "x.html").exists()


def test_lgipp_with_a_model_of_other_placements_is_refused(capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["mig", path("mig-lgipp-a100-40gb-migguide.txt"), "--model", "A30"]) == 2
    err = capsys.readouterr().err
    assert "not those of A30-24GB" in err and "A100-40GB" in err and "Traceback" not in err


def test_lgipp_with_a_tab_in_the_braces(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    f = tmp_path / "lgipp.txt"
    f.write_text(
        "GPU  0 Profile ID 19 Placements: {0,1,2,3,4,5,\t6}:1\nGPU  0 Profile ID 14 Placements: {0,\t}:2\n"
    )
    assert main(["mig", str(f)]) == 0


@pytest.mark.parametrize(
    "failure", [ValueError("invalid literal for int()"), IndexError("list index"), KeyError("x")]
)
def test_any_parse_failure_is_one_error_line(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch, failure: Exception
) -> None:
    def broken(*_a: object, **_k: object) -> None:
        raise failure

    monkeypatch.setattr("slurmlab.core.gpu.captures.read_mig_capture", broken)
    f = tmp_path / "lgipp.txt"
    f.write_text("GPU  0 Profile ID 14 Placements: {0,2,4}:2\n")
    assert main(["mig", str(f)]) == 2
    err = capsys.readouterr().err
    assert err.startswith("slurmlab: error: cannot parse") and str(f) in err and "Traceback" not in err


def test_a_tab_in_lgipp_braces_leaves_no_traceback(tmp_path: Path) -> None:
    import subprocess
    import sys

    f = tmp_path / "lgipp.txt"
    f.write_text("GPU  0 Profile ID 14 Placements: {\t}:2\n")
    done = subprocess.run(
        [sys.executable, "-m", "slurmlab", "mig", str(f)],
        capture_output=True,
        text=True,
        timeout=120,
        check=False,
    )
    assert done.returncode == 2 and "Traceback" not in done.stderr
    assert done.stderr.splitlines()[0].startswith("slurmlab: error: cannot parse nvidia-smi mig -lgipp")
