"""The JupyterLab extension's own unit tests (extensions/slurmlab-lab/src/__tests__, jest in jsdom), run as one
test of the suite: the API client against the server's answers, the GPU map, the palette, the recent jobs, the
job table, and when the sidebar polls (Lumino's Poll: standby when the tab is hidden, backoff while the server
does not answer). Skipped, with the reason, where node or the extension's node dependencies are missing."""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest

EXT = Path(__file__).resolve().parents[2] / "extensions" / "slurmlab-lab"
SPECS = EXT / "src" / "__tests__"


@pytest.mark.slow
def test_the_extensions_jest_tests_pass(tmp_path: Path) -> None:
    if shutil.which("node") is None:
        pytest.skip("node is not installed (the extension's build needs it too)")
    jlpm = Path(sys.executable).parent / "jlpm"
    if not jlpm.exists():
        pytest.skip(f"{jlpm} not found: install the test extras (pip install -e '.[test]')")
    if not (EXT / "node_modules" / ".bin" / "jest").exists():
        pytest.skip("the extension's node dependencies are not installed: make labextension")
    report = tmp_path / "jest.json"
    env = {
        **os.environ,
        "CI": "1",
        "FORCE_COLOR": "0",
        "PATH": f"{jlpm.parent}{os.pathsep}{os.environ.get('PATH', '')}",
    }
    res = subprocess.run(
        [str(jlpm), "test", "--ci", "--coverage=false", "--json", f"--outputFile={report}"],
        cwd=EXT,
        env=env,
        capture_output=True,
        text=True,
        timeout=600,
    )
    assert report.exists(), f"jest wrote no report (exit {res.returncode}):\n{res.stderr[-3000:]}"
    result: dict[str, Any] = json.loads(report.read_text())
    failures = [
        f"{Path(suite['name']).name} › {case['fullName']}: {' '.join(case['failureMessages'])[:800]}"
        for suite in result["testResults"]
        for case in suite["assertionResults"]
        if case["status"] == "failed"
    ]
    broken = [
        f"{Path(s['name']).name}: {s['message'][:800]}"
        for s in result["testResults"]
        if s["status"] == "failed" and not s["assertionResults"]
    ]
    assert not failures and not broken, "\n".join(failures + broken)
    assert res.returncode == 0, res.stderr[-3000:]
    # every spec file ran, and each had tests
    ran = sorted(Path(s["name"]).name for s in result["testResults"])
    assert ran == sorted(p.name for p in SPECS.glob("*.spec.ts"))
    assert result["numPassedTests"] == result["numTotalTests"] > 0
