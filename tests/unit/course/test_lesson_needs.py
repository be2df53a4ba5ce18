"""Every lesson states what it needs of the cluster and checks the seat's GPU cap before it asks Slurm for GPUs
(issue 31 point 4): a request over a QOS cap is not refused, it waits for ever (``QOSMaxGRESPerUser``)."""

from __future__ import annotations

import json
import re
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[3]
NOTEBOOKS = sorted((REPO / "notebooks").glob("[0-9][0-9]-*.ipynb"))
_REQUEST = re.compile(r"%salloc(?! --dry-run)(?! --form)|\.salloc\(")


def _cells(path: Path) -> list[tuple[str, str]]:
    return [(c["cell_type"], "".join(c["source"])) for c in json.loads(path.read_text())["cells"]]


@pytest.mark.parametrize("path", NOTEBOOKS, ids=[p.stem for p in NOTEBOOKS])
def test_a_lesson_says_what_it_needs_and_checks_the_cap_before_its_first_request(path: Path) -> None:
    cells = _cells(path)
    heading = [
        i for i, (kind, text) in enumerate(cells) if kind == "markdown" and "What this lesson needs" in text
    ]
    assert heading, f"{path.name} has no 'What this lesson needs' section"
    check = next((i for i, (kind, text) in enumerate(cells) if kind == "code" and "gpu_cap()" in text), None)
    assert check is not None, f"{path.name} never asks gpu_cap()"
    first_request = next(
        i for i, (kind, text) in enumerate(cells) if kind == "code" and _REQUEST.search(text)
    )
    assert heading[0] < first_request and check < first_request, path.name


def test_the_mig_lesson_never_starts_a_sandbox_on_a_class_sandbox() -> None:
    # a class's sandbox is the teacher's (the seat may not write its folder): thirty seats, not thirty sandboxes
    (code,) = [
        t
        for k, t in _cells(REPO / "notebooks" / "04-mig.ipynb")
        if k == "code" and "sandbox up h200-mig" in t
    ]
    guard = code.index("os.access(sandbox_in_use().conf_path.parent, os.W_OK)")
    assert guard < code.index("sandbox up h200-mig")
    assert "workshop up --profile h200-mig" in code
