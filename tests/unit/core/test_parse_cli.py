"""``slurmlab parse FILE|-`` on every recorded output, on stdin, and on garbage."""

from __future__ import annotations

import io
import json
import subprocess
import sys
from pathlib import Path

import pytest
from shared_paths import list_shared, require_shared

from slurmlab.cli import main

OUTPUTS = [
    p
    for p in list_shared("slurm", "22.05")
    + list_shared("slurm", "24.11")
    + list_shared("slurm", "24.11", "dp")
    if p.suffix not in (".stderr", ".yaml", ".conf") and p.name != "commands.txt"
]


@pytest.mark.parametrize("path", OUTPUTS, ids=lambda p: "/".join(p.parts[-2:]))
def test_parse_every_fixture_as_json_and_table(path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["parse", str(path)]) == 0
    doc = json.loads(capsys.readouterr().out)
    assert doc["kind"] in {
        "jobs",
        "nodes",
        "partitions",
        "steps",
        "version",
        "submitted",
        "config",
        "table",
        "hostnames",
    }
    assert doc["items"]
    assert main(["parse", str(path), "--format", "table"]) == 0
    table = capsys.readouterr().out
    assert table.startswith(f"# {doc['kind']}")
    assert len(table.splitlines()) >= len(doc["items"]) + 2


def test_parse_json_has_the_gpu_facts(capsys: pytest.CaptureFixture[str]) -> None:
    path = require_shared("slurm", "24.11", "s06_scontrol_show_job_d.txt")
    assert main(["parse", str(path)]) == 0
    doc = json.loads(capsys.readouterr().out)
    job2 = next(j for j in doc["items"] if j["job_id"] == 2)
    assert [(a["node"], a["gpu_indices"]) for a in job2["gpu_allocs"]] == [("node1", [2]), ("node2", [0])]
    job3 = next(j for j in doc["items"] if j["job_id"] == 3)
    assert job3["gpu_allocs"][0]["shards"] == {"3": 4}


def test_parse_reads_stdin(monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]) -> None:
    text = require_shared("slurm", "22.05", "s08_scontrol_show_node_d.txt").read_text()
    monkeypatch.setattr(sys, "stdin", io.StringIO(text))
    assert main(["parse", "-"]) == 0
    doc = json.loads(capsys.readouterr().out)
    assert doc["kind"] == "nodes" and doc["version"] == "22.05.8"
    assert [n["gpu_used_indices"] for n in doc["items"]][1] == {"h100": [0, 1, 2, 3]}


@pytest.mark.parametrize("content", ["this is not slurm output\nat all, sorry\n", "{broken json", ""])
def test_garbage_exits_2_with_a_clear_error(
    tmp_path: Path, content: str, capsys: pytest.CaptureFixture[str]
) -> None:
    bad = tmp_path / "garbage.txt"
    bad.write_text(content)
    assert main(["parse", str(bad)]) == 2
    err = capsys.readouterr().err
    # one line: the file, what was wrong, the next step
    assert err.startswith(f"slurmlab: error: {bad}: cannot parse") and err.count("\n") == 1
    assert " -> " in err and "Traceback" not in err


def test_yaml_is_refused_with_the_fix(capsys: pytest.CaptureFixture[str]) -> None:
    path = require_shared("slurm", "24.11", "s03_squeue.yaml")
    assert main(["parse", str(path)]) == 2
    assert "--json" in capsys.readouterr().err


def test_missing_file_exits_2(capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["parse", "/nonexistent/file.json"]) == 2
    assert "cannot read it" in capsys.readouterr().err


def test_module_entry_point_on_stdin() -> None:
    text = require_shared("slurm", "24.11", "00_sinfo_version.txt").read_text()
    done = subprocess.run(
        [sys.executable, "-m", "slurmlab", "parse", "-"],
        input=text,
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert done.returncode == 0, done.stderr
    assert json.loads(done.stdout)["version"] == "24.11.5"
