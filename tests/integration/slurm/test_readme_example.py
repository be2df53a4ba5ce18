"""The README's Python example, as printed there, against the sandbox (on every Slurm of the matrix)."""

from __future__ import annotations

import ast
import re
from pathlib import Path
from typing import Any

import pytest

pytestmark = pytest.mark.sandbox

README = Path(__file__).resolve().parents[3] / "README.md"


def _example() -> str:
    blocks = re.findall(r"```python\n(.*?)```", README.read_text(), re.S)
    found = [b for b in blocks if "Allocation.submit(" in b and "from slurmlab import Allocation" in b]
    assert found, "the README lost its Python example"
    # the one line that names a script the reader has: run a command every node has instead
    return found[0].replace('["python", "train.py"]', '["hostname"]')


def test_the_readme_python_example_runs_as_written(
    slurm_sandbox: Any, capfd: pytest.CaptureFixture[str]
) -> None:
    code = _example()
    assert '"-p"' not in code and "--partition" not in code  # no partition: the default one is found
    namespace: dict[str, Any] = {}
    exec(compile(ast.parse(code), str(README), "exec"), namespace)  # the README's own text
    alloc = namespace["alloc"]
    out = capfd.readouterr().out
    gpus = ast.literal_eval(out.strip().splitlines()[0])
    assert sum(len(v) for v in gpus.values()) == 2, out
    # leaving the with-block released it: Slurm no longer runs it (its record may linger as CANCELLED)
    import time

    deadline = time.monotonic() + 15
    state = "?"
    while time.monotonic() < deadline:
        state = (
            slurm_sandbox.runner()
            .run(["squeue", "-h", "-t", "all", "-j", alloc.job_id, "-o", "%T"], check=False)
            .stdout.strip()
        )
        if state in ("", "CANCELLED", "COMPLETED"):
            break
        time.sleep(0.2)
    assert state in ("", "CANCELLED", "COMPLETED"), state
