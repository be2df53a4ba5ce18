"""The Slurm-output tests run on the project's own golden files: with no ``../shared`` they still pass, and
only their extra tests of the shared real-cluster capture skip (issue 12: only nvidia-smi captures stay shared)."""

from __future__ import annotations

import os
import re
import subprocess
import sys
from pathlib import Path

import pytest
from profiles import profile
from shared_paths import ENV_VAR, REPO

SLURM_OUTPUT_TESTS = [
    "tests/unit/core/slurm/test_parse_fixtures.py",
    "tests/unit/core/slurm/test_parse_robustness.py",
    "tests/unit/core/slurm/test_json_per_node.py",
    "tests/unit/core/slurm/test_record_grammar.py",
    "tests/unit/core/slurm/test_parse_cli.py",
    "tests/unit/core/request/test_validate_inventory.py",
    "tests/unit/core/request/test_one_pipeline.py",
    "tests/unit/slurm/test_submit_request.py",
    "tests/unit/sandbox/test_sandbox_render_golden.py",
    "tests/unit/experiments/test_verdicts_on_every_slurm.py",
    "tests/unit/slurm/test_runner.py",
    "tests/unit/fuzz/test_parse_cli_fuzz.py",
]


@pytest.mark.skipif(
    profile() != "ci",
    reason="re-runs ten test files in a subprocess: part of `make test` "
    "(HYPOTHESIS_PROFILE=ci), not of the fast tier",
)
def test_slurm_output_tests_need_no_shared_fixtures(tmp_path: Path) -> None:
    empty = tmp_path / "no-shared"
    empty.mkdir()
    # the dev profile: what is checked is that no test needs the shared captures, not the properties at full depth
    env = {**os.environ, ENV_VAR: str(empty), "HYPOTHESIS_PROFILE": "dev"}
    done = subprocess.run(
        [
            sys.executable,
            "-m",
            "pytest",
            "-q",
            "-p",
            "no:cacheprovider",
            "-rs",
            "-m",
            "not sandbox and not browser",
            *SLURM_OUTPUT_TESTS,
        ],
        cwd=REPO,
        env=env,
        capture_output=True,
        text=True,
        timeout=240,
    )
    assert done.returncode == 0, done.stdout[-4000:] + done.stderr[-2000:]
    skips = [line for line in done.stdout.splitlines() if line.startswith("SKIPPED")]
    # an extra test of the shared capture says so; an empty shared parametrisation is the only other skip
    odd = [s for s in skips if "shared" not in s and "empty parameter set" not in s]
    assert not odd, odd
    passed = int(re.search(r"(\d+) passed", done.stdout).group(1))  # type: ignore[union-attr]
    skipped = sum(int(n) for n in re.findall(r"SKIPPED \[(\d+)\]", done.stdout))
    assert passed >= 600 and skipped < passed / 10, done.stdout[-2000:]
