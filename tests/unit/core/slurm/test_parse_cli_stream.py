"""`slurmlab parse` writes as it parses: one item per line, compact unless --indent, the same document as before."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from fake_slurm import GOLDEN_VERSIONS, golden_path

from slurmlab.cli import main
from slurmlab.core.slurm.detect import detect_and_parse


@pytest.mark.parametrize("version", GOLDEN_VERSIONS)
@pytest.mark.parametrize(
    "name", ["s01_squeue.json", "s06_scontrol_show_job_d.txt", "s08_scontrol_show_node_d.txt"]
)
def test_compact_lines_hold_the_same_document(
    version: str, name: str, capsys: pytest.CaptureFixture[str]
) -> None:
    path = golden_path(version, name)
    assert main(["parse", str(path)]) == 0
    out = capsys.readouterr().out
    expected = detect_and_parse(path.read_text()).to_dict()
    assert json.loads(out) == expected
    lines = out.splitlines()
    # the header line, one line per item, the closing line
    assert len(lines) == len(expected["items"]) + 2
    assert [json.loads(ln.rstrip(",")) for ln in lines[1:-1]] == expected["items"]


@pytest.mark.parametrize("version", GOLDEN_VERSIONS)
def test_indent_gives_what_json_dumps_indent_gives(version: str, capsys: pytest.CaptureFixture[str]) -> None:
    path = golden_path(version, "s01_squeue.json")
    assert main(["parse", "--indent", "2", str(path)]) == 0
    out = capsys.readouterr().out
    assert out == json.dumps(detect_and_parse(path.read_text()).to_dict(), indent=2) + "\n"


def test_an_empty_job_list_is_still_one_document(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    f = tmp_path / "empty.json"
    f.write_text('{"meta": {}, "errors": ["controller busy"], "jobs": []}')
    assert main(["parse", str(f)]) == 0
    doc = json.loads(capsys.readouterr().out)
    assert doc["items"] == [] and doc["notes"] == ["Slurm reported: controller busy"]


def test_a_bad_job_stops_the_stream_with_one_line(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    doc = json.loads(golden_path("24.11", "s01_squeue.json").read_text())
    doc["jobs"][3]["job_state"] = {"corrupt": True}
    f = tmp_path / "bad.json"
    f.write_text(json.dumps(doc))
    assert main(["parse", str(f)]) == 2
    out, err = capsys.readouterr()
    assert err.count("\n") == 1 and err.startswith(f"slurmlab: error: {f}: ") and "job_state" in err
    assert "Traceback" not in out + err
    assert len(out.splitlines()) == 4  # the header and the three jobs before it, as they were parsed


def test_corrupt_errors_field_is_refused(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    f = tmp_path / "bad.json"
    f.write_text('{"meta": {}, "errors": "not a list", "jobs": []}')
    assert main(["parse", str(f)]) == 2
    out, err = capsys.readouterr()
    assert err.count("\n") == 1 and "errors" in err and out == ""
