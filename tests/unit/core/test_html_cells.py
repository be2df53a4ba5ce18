"""The HTML tables of doctor, the isolation checks and the GPU map (issue 28): every cell left-aligned, where
JupyterLab right-aligns table text by default (a sentence of evidence ended ragged at the right edge), and an
isolation check's evidence as ``key: value`` lines, not raw JSON."""

from __future__ import annotations

import re

import slurmlab
from slurmlab.core.diagnosis.findings import Finding, Report, Verdict
from slurmlab.core.gpu.binding import NodeRecord, TaskReport, explain
from slurmlab.experiments.isolation_result import CheckResult, Grant, IsolationReport


def _cells(html_text: str) -> list[str]:
    return re.findall(r"<t[dh]\b[^>]*>", html_text)


def _all_left(html_text: str) -> bool:
    cells = _cells(html_text)
    return bool(cells) and all("text-align:left" in c for c in cells)


def test_doctor_table_cells_are_left_aligned() -> None:
    report = Report(
        (
            Finding(
                "controller", "controller", Verdict.OK, "slurmctld answers on 127.0.0.1:6817 within 12 ms"
            ),
            Finding("gpu.pcie", "GPU links", Verdict.WARN, "GPU 3 runs at PCIe Gen3 x8", fix="reseat it"),
        )
    )
    assert _all_left(report._repr_html_())


def test_isolation_table_is_left_aligned_with_evidence_as_key_value_lines() -> None:
    report = IsolationReport(
        [
            CheckResult("I1", "one GPU per task", "PASS", {"task 0": ["GPU-1a2b"], "task 1": ["GPU-3c4d"]}),
            CheckResult("I4", "device cgroup", "SKIP", None, "no device cgroup in this sandbox"),
        ],
        Grant(gpus_per_task=1),
    )
    page = report._repr_html_()
    assert _all_left(page)
    assert "<b>task 0</b>: GPU-1a2b<br><b>task 1</b>: GPU-3c4d" in page
    assert '{"task 0"' not in page and "{&quot;task 0&quot;" not in page  # no raw JSON


def test_gpu_map_and_binding_tables_are_left_aligned() -> None:
    table = explain(
        [TaskReport(0, "n1", (4,), ("4",), frozenset({0, 1}), 224)],
        {"n1": slurmlab.topology(profile="dgx-h100")},
        [NodeRecord("n1", (4,), frozenset({0, 1}))],
    )
    page = table._repr_html_()
    assert "slurmlab-gpu-map" in page and _all_left(page)


def test_evidence_forms() -> None:
    from slurmlab.core.html_cells import evidence_html

    assert evidence_html(None) == evidence_html({}) == ""
    assert evidence_html(["a <b>", 3]) == "a &lt;b&gt;<br>3"
    assert evidence_html({"cpus": [0, 1, 2]}) == "<b>cpus</b>: 0, 1, 2"
    assert evidence_html({"nested": {"x": 1}}) == "<b>nested</b>: {&quot;x&quot;: 1}"
    assert evidence_html("x" * 400).endswith("…") and len(evidence_html("x" * 400)) == 300
