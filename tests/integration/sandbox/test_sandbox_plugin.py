"""The pytest plugin, run in a child pytest: --sandbox-profile, runner redirection, teardown, skip reason."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

from slurmlab.sandbox.processes import alive
from slurmlab.testing.sandbox_fixtures import slurm_missing_reason

INNER = """
import json, os
from slurmlab.slurm.runner import get_runner

def test_inner(slurm_sandbox):
    assert get_runner().slurm_conf == str(slurm_sandbox.conf_path)
    with open(os.environ["SANDBOX_REPORT"], "w") as fh:
        json.dump({"profile": slurm_sandbox.profile_name, "dir": str(slurm_sandbox.directory),
                   "pids": list(slurm_sandbox.pids.values())}, fh)

def test_runner_restored_later():
    pass
"""


def _run_inner(
    tmp_path: Path, *args: str, env: dict[str, str] | None = None
) -> subprocess.CompletedProcess[str]:
    test = tmp_path / "test_inner_sandbox.py"
    test.write_text(INNER)
    return subprocess.run(
        [sys.executable, "-m", "pytest", "-q", "-rs", "-p", "no:cacheprovider", str(test), *args],
        capture_output=True,
        text=True,
        timeout=300,
        cwd=tmp_path,
        env={**os.environ, "SANDBOX_REPORT": str(tmp_path / "report.json"), **(env or {})},
    )


@pytest.mark.sandbox
@pytest.mark.skipif(slurm_missing_reason() is not None, reason=slurm_missing_reason() or "")
def test_sandbox_profile_option_and_teardown(tmp_path: Path) -> None:
    proc = _run_inner(tmp_path, "--sandbox-profile", "seed")
    assert proc.returncode == 0, proc.stdout + proc.stderr
    report = json.loads((tmp_path / "report.json").read_text())
    assert report["profile"] == "seed"
    assert not any(alive(p) for p in report["pids"]), "the session ended but the sandbox still runs"
    assert not Path(report["dir"]).exists()


def test_without_slurm_the_fixture_skips_with_the_install_line(tmp_path: Path) -> None:
    empty = tmp_path / "bin"
    empty.mkdir()
    # no Slurm client on PATH: the fixture must skip, naming the apt-get line
    proc = _run_inner(tmp_path, env={"PATH": str(empty)})
    out = proc.stdout + proc.stderr
    if (
        "sinfo" not in out
        and slurm_missing_reason() is None
        and any(Path(d, "sinfo").exists() for d in ("/usr/sbin", "/sbin"))
    ):
        pytest.skip("sinfo is installed in an sbin folder here, so it cannot be hidden through PATH")
    assert proc.returncode == 0, out
    assert "apt-get install slurmctld slurmd slurm-client munge" in out and "1 skipped" in out
