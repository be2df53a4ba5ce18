"""``slurmlab parse FILE|-`` on every recorded output (the project's golden files), on stdin, and on garbage."""

from __future__ import annotations

import io
import json
import subprocess
import sys
from pathlib import Path

import pytest
from fake_slurm import GOLDEN_VERSIONS, golden_outputs, golden_path, golden_with

from slurmlab.cli import main

# what `slurmlab parse` does not claim to read (one-column lists, srun output, ping, the hand-made hostile
# records) and what a stopped controller printed: test_parse_fixtures checks each is refused or empty
NOT_PARSED = (
    "sinfo_node_states",
    "owner",
    "srun_",
    "ping",
    "sinfo_partitions",
    "hostile_",
    "controller_down",
)
OUTPUTS = [p for p in golden_outputs() if p.suffix != ".yaml" and not any(k in p.name for k in NOT_PARSED)]


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
        "brief",
    }
    assert doc["items"]
    assert main(["parse", str(path), "--format", "table"]) == 0
    table = capsys.readouterr().out
    assert table.startswith(f"# {doc['kind']}")
    assert len(table.splitlines()) >= len(doc["items"]) + 2


@pytest.mark.parametrize("version", GOLDEN_VERSIONS)
def test_parse_json_has_the_gpu_facts(version: str, capsys: pytest.CaptureFixture[str]) -> None:
    path = golden_path(version, "s06_scontrol_show_job_d.txt")
    assert main(["parse", str(path)]) == 0
    doc = json.loads(capsys.readouterr().out)
    job2 = next(j for j in doc["items"] if j["job_id"] == 2)
    assert [(a["node"], a["gpu_indices"]) for a in job2["gpu_allocs"]] == [("node1", [4]), ("node2", [0])]
    job3 = next(j for j in doc["items"] if j["job_id"] == 3)
    assert job3["gpu_allocs"][0]["shards"] == {"1": 4}


@pytest.mark.parametrize("version", GOLDEN_VERSIONS)
def test_parse_reads_stdin(
    version: str, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    text = golden_path(version, "s08_scontrol_show_node_d.txt").read_text()
    monkeypatch.setattr(sys, "stdin", io.StringIO(text))
    assert main(["parse", "-"]) == 0
    doc = json.loads(capsys.readouterr().out)
    assert (
        doc["kind"] == "nodes"
        and doc["version"] == {"22.05": "22.05.8", "24.11": "24.11.5", "26.05": "26.05.5"}[version]
    )
    assert [n["gpu_used_indices"] for n in doc["items"]][1] == {"h100": [0, 4]}


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


@pytest.mark.parametrize("version", golden_with("s03_squeue.yaml"))
def test_yaml_is_refused_with_the_fix(version: str, capsys: pytest.CaptureFixture[str]) -> None:
    path = golden_path(version, "s03_squeue.yaml")
    assert main(["parse", str(path)]) == 2
    assert "--json" in capsys.readouterr().err


def test_missing_file_exits_2(capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["parse", "/nonexistent/file.json"]) == 2
    assert "cannot read it" in capsys.readouterr().err


def test_module_entry_point_on_stdin() -> None:
    text = golden_path("24.11", "00_sinfo_version.txt").read_text()
    done = subprocess.run(
        [sys.executable, "-m", "slurmlab", "parse", "-"],
        input=text,
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert done.returncode == 0, done.stderr
    assert json.loads(done.stdout)["version"] == "24.11.5"
