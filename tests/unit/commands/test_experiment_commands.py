"""``slurmlab timeslice`` and ``slurmlab isolation`` from the command line."""

from __future__ import annotations

import json
import os
from pathlib import Path

import pytest

from slurmlab.cli import main


def test_timeslice_command_writes_json_and_html(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    core = str(max(os.sched_getaffinity(0)))
    out, page = tmp_path / "r.json", tmp_path / "r.html"
    rc = main(["timeslice", "--procs", "2", "--duration", "0.4", "--cores", core, "--json", str(out),
               "--html", str(page)])  # fmt: skip
    assert rc == 0
    text = capsys.readouterr().out
    assert "2 process(es), cpu" in text and "measured share" in text
    data = json.loads(out.read_text())
    assert len(data["measured"]["processes"]) == 2 and set(data["runs_ns"]) == {"p0", "p1"}
    assert "measured share of D" in page.read_text()


def test_timeslice_bad_input_is_a_clear_error(capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["timeslice", "--procs", "0"]) == 2
    assert "procs must be at least 1" in capsys.readouterr().err


def test_isolation_command(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("SLURM_STEP_GPUS", "0")
    out = tmp_path / "iso.json"
    rc = main(["isolation", "--backend", "cpu", "--gpu-bind", "closest", "--json", str(out)])
    assert rc == 0
    data = json.loads(out.read_text())
    assert data["grant"]["gpus_per_task"] == 1 and data["grant"]["gpu_bind"] == "closest"
    assert data["meta"]["report"]["slurm_env"]["SLURM_STEP_GPUS"] == "0"
    assert [c["status"] for c in data["checks"]][:2] == ["SKIP", "SKIP"]
    assert "I7 SKIP" in capsys.readouterr().out


def test_timeslice_default_shares_one_core(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    out = tmp_path / "r.json"
    assert main(["timeslice", "--procs", "2", "--duration", "0.4", "--json", str(out)]) == 0
    data = json.loads(out.read_text())
    assert data["classification"] == "time-sliced", capsys.readouterr().out


def test_timeslice_cores_outside_the_allowed_set(capsys: pytest.CaptureFixture[str]) -> None:
    bad = str(max(os.sched_getaffinity(0)) + 64)
    assert main(["timeslice", "--procs", "2", "--cores", bad]) == 2
    err = capsys.readouterr().err
    assert bad in err and "not available" in err and "Traceback" not in err
