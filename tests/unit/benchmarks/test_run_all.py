"""benchmarks/run_all.py (`make bench`): collects every module's rows, survives a failing one, fits growth,
writes valid JSON and sets its exit code from the verdicts. No timing is asserted."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[3]
sys.path.insert(0, str(REPO))

from benchmarks.run_all import fit_exponent, growth  # noqa: E402

RUN_ALL = REPO / "benchmarks" / "run_all.py"

OK_MODULE = """
from benchmarks._bench import Row

def measure(quick: bool = False) -> list[Row]:
    rows = [Row("poll", "one poll", 0.001 * (n + 1000) / 1000, "s", size=f"1000 nodes x {n} jobs")
            for n in (1000, 5000, 10000)]
    slow = 3.0 if not quick else 0.5
    return rows + [Row("parse", "x json.loads", slow, "x", target=2.0, baseline=0.1, baseline_name="json.loads")]
"""
BROKEN_MODULE = "def measure(quick=False):\n    raise RuntimeError('boom: no such cluster')\n"
NO_MEASURE = "print('a script, not a benchmark module')\n"


def _run(folder: Path, out: Path, *extra: str) -> subprocess.CompletedProcess[str]:
    # no .pyc: a module rewritten within the same second at the same size would be read from its stale bytecode
    return subprocess.run(
        [sys.executable, str(RUN_ALL), "--dir", str(folder), "--out", str(out), *extra],
        capture_output=True,
        text=True,
        timeout=600,
        cwd=REPO,
        check=False,
        env={**os.environ, "PYTHONDONTWRITEBYTECODE": "1"},
    )


@pytest.fixture
def folder(tmp_path: Path) -> Path:
    d = tmp_path / "benches"
    d.mkdir()
    (d / "bench_ok.py").write_text(OK_MODULE)
    (d / "bench_broken.py").write_text(BROKEN_MODULE)
    (d / "bench_script.py").write_text(NO_MEASURE)
    return d


def test_a_failing_module_is_a_row_and_the_run_goes_on(folder: Path, tmp_path: Path) -> None:
    out = tmp_path / "bench.json"
    done = _run(folder, out, "--quick")
    assert done.returncode == 0, done.stderr  # --quick: verdicts do not set the exit code
    report = json.loads(out.read_text())
    broken = [r for r in report["rows"] if r["module"] == "bench_broken"]
    assert len(broken) == 1 and "boom: no such cluster" in broken[0]["error"] and broken[0]["ok"] is False
    assert {r["module"] for r in report["rows"]} == {"bench_ok", "bench_broken"}
    assert "FAILED" in done.stdout and "VERDICT" in done.stdout
    [poll] = [g for g in report["growth"] if g["group"] == "poll"]
    assert [p["nodes_plus_jobs"] for p in poll["points"]] == [2000, 6000, 11000]
    assert poll["exponent"] == pytest.approx(1.0, abs=1e-6) and poll["ok"] is True
    assert "fitted exponent 1" in done.stdout


def test_a_missed_target_or_failure_exits_1(folder: Path, tmp_path: Path) -> None:
    out = tmp_path / "bench.json"
    done = _run(folder, out)
    assert done.returncode == 1
    report = json.loads(out.read_text())
    assert "parse: x json.loads" in report["missed"] and "bench_broken: module failed" in report["missed"]
    (folder / "bench_broken.py").unlink()
    (folder / "bench_ok.py").write_text(OK_MODULE.replace("3.0 if", "1.5 if"))
    assert _run(folder, out).returncode == 0
    assert json.loads(out.read_text())["missed"] == []


def test_growth_fits_the_exponent() -> None:
    assert fit_exponent([(1000, 1.0), (2000, 4.0), (4000, 16.0)]) == pytest.approx(2.0)
    assert fit_exponent([(1000, 1.0)]) is None
    rows = [
        {
            "group": "g",
            "name": f"poll, 1000 nodes x {j} jobs",
            "unit": "s",
            "value": (1000 + j) ** 2 / 1e8,
            "size": f"1000 nodes x {j} jobs",
        }
        for j in (1000, 5000, 10000)
    ]
    [g] = growth(rows)
    assert g["name"] == "poll" and g["exponent"] == pytest.approx(2.0) and g["ok"] is False


def test_the_real_modules_in_quick_mode_write_valid_json(tmp_path: Path) -> None:
    out = tmp_path / "bench.json"
    done = subprocess.run(
        [sys.executable, str(RUN_ALL), "--quick", "--only", "parse,analysis", "--out", str(out)],
        capture_output=True,
        text=True,
        timeout=600,
        cwd=REPO,
        check=False,
    )
    assert done.returncode == 0, done.stdout[-2000:] + done.stderr[-2000:]
    report = json.loads(out.read_text())
    groups = {r["group"] for r in report["rows"]}
    assert {"parse squeue --json", "slurmlab parse", "time-slicing analysis"} <= groups
    assert not [r for r in report["rows"] if r.get("error")]
    assert all(isinstance(r["value"], (int, float)) for r in report["rows"])
    assert any(g["group"] == "parse squeue --json" for g in report["growth"])
