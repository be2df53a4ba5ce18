"""The workshop notebook runs top to bottom against the sandbox (nbclient, a real kernel), and says where the
sandbox cannot behave like a real cluster."""

from __future__ import annotations

import re
from pathlib import Path
from typing import Any

import pytest

pytestmark = [pytest.mark.sandbox, pytest.mark.slow]

NOTEBOOK = Path(__file__).resolve().parents[3] / "notebooks" / "01-allocate-gpus.ipynb"
WIDGET = "application/vnd.jupyter.widget-view+json"


def _text(cell: Any) -> str:
    parts = []
    for out in cell.get("outputs", []):
        if "text" in out:
            parts.append(out["text"])
        parts.append(str(out.get("data", {}).get("text/plain", "")))
        if out.get("output_type") == "error":
            parts.append(f"{out['ename']}: {out['evalue']}")
    return "\n".join(parts)


def test_workshop_notebook_allocates_runs_and_releases(slurm_sandbox: Any, monkeypatch: pytest.MonkeyPatch,
                                                       tmp_path: Path) -> None:
    nbformat = pytest.importorskip("nbformat")
    nbclient = pytest.importorskip("nbclient")
    for key, value in slurm_sandbox.env().items():
        monkeypatch.setenv(key, value)
    nb = nbformat.read(NOTEBOOK, as_version=4)
    client = nbclient.NotebookClient(nb, kernel_name="python3", timeout=180, allow_errors=True,
                                     resources={"metadata": {"path": str(tmp_path)}})
    client.execute()
    code = {c.source.splitlines()[0] if c.source else "": c for c in nb.cells if c.cell_type == "code"}

    def cell(prefix: str) -> Any:
        return next(c for first, c in code.items() if first.startswith(prefix))

    # IPython shows a UsageError as one line on stderr, a real failure as an "error" output
    errors = [(c.source, _text(c)) for c in nb.cells if c.cell_type == "code"
              and any(o.get("output_type") == "error" or "Error" in o.get("text", "") for o in c.outputs)]
    # the one deliberate mistake is a short UsageError; nothing else fails
    assert [src for src, _ in errors] == ["%salloc --gpus=b200:1"], errors
    assert "UsageError" in errors[0][1] and "h100" in errors[0][1]
    assert "Traceback" not in errors[0][1]
    assert str(slurm_sandbox.conf_path) in _text(cell("%slurm"))
    assert "h100" in _text(cell("%sinfo"))
    assert "--gpus=2" in _text(cell("ngpus = 2"))
    assert any(WIDGET in o.get("data", {}) for o in cell("alloc = %salloc").outputs)
    assert "RUNNING" in _text(cell('alloc.wait("RUNNING"'))
    step = _text(cell("%%srun"))
    assert "0: CUDA_VISIBLE_DEVICES=" in step and "1: CUDA_VISIBLE_DEVICES=" in step
    assert re.search(r"node=node\d+ host=", step), step  # the Slurm node, beside the machine's host name
    # where the sandbox differs from a real cluster, the notebook says so right under the step's output
    after = nb.cells[nb.cells.index(cell("%%srun")) + 1]
    assert after.cell_type == "markdown"
    for said in ("`0,3`", "`0,1`", "ConstrainDevices", "`hostname`", "SLURMD_NODENAME", "stand-in"):
        assert said in after.source, said
    # nvidia-smi in a step answers on the sandbox (slurmlab's stand-in, labelled), one line per GPU of the job
    smi = _text(cell("%srun nvidia-smi -L"))
    assert "stand-in" in smi and len(re.findall(r"^GPU \d+: NVIDIA H100", smi, re.M)) == 2, smi
    assert "RUNNING" in _text(cell("%squeue"))
    assert "cancelled job" in _text(cell("%scancel"))
