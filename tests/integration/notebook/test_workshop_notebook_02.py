"""Workshop notebook 02 (topology, binding, isolation, time-slicing) runs top to bottom against the sandbox."""

from __future__ import annotations

import re
import time
from pathlib import Path
from typing import Any

import pytest

pytestmark = [pytest.mark.sandbox, pytest.mark.slow]

NOTEBOOK = Path(__file__).resolve().parents[3] / "notebooks" / "02-what-did-i-get.ipynb"
BOKEH = "application/vnd.bokehjs_exec.v0+json"


def _text(cell: Any) -> str:
    parts = []
    for out in cell.get("outputs", []):
        if "text" in out:
            parts.append(out["text"])
        data = out.get("data", {})
        parts.append(str(data.get("text/plain", "")))
        parts.append(str(data.get("text/html", "")))
        if out.get("output_type") == "error":
            parts.append(f"{out['ename']}: {out['evalue']}")
    return "\n".join(parts)


def _has_bokeh(cell: Any) -> bool:
    return any(BOKEH in o.get("data", {}) for o in cell.get("outputs", []))


def _draws_itself(cell: Any) -> bool:
    """The cell's value displayed as a figure of its own (no bokeh import, no figure_args())."""
    return any("slurmlab-figure" in str(o.get("data", {}).get("text/html", "")) for o in cell.get("outputs", []))


def _granted_gpus(slurm_sandbox: Any, job_id: str) -> dict[str, list[int]]:
    """node -> GPU IDX of the job, read straight from ``scontrol show job -d``."""
    from slurmlab.core.slurm import hostlist

    out = slurm_sandbox.runner().run(["scontrol", "show", "job", "-d", job_id]).stdout
    granted: dict[str, list[int]] = {}
    for nodes, idx in re.findall(r"Nodes=(\S+) .*?GRES=\S*?gpu[^(\s]*\(IDX:([\d,\-]+)\)", out):
        ids: list[int] = []
        for part in idx.split(","):
            lo, _, hi = part.partition("-")
            ids.extend(range(int(lo), int(hi or lo) + 1))
        for node in hostlist.expand(nodes):
            granted.setdefault(node, []).extend(ids)
    assert granted, f"no GPU IDX in scontrol show job -d {job_id}:\n{out}"
    return granted


def _checks(cell: Any) -> dict[str, str]:
    """check id -> PASS/FAIL/SKIP/INFO, read from the report's HTML table."""
    html = next(o["data"]["text/html"] for o in cell.outputs if "text/html" in o.get("data", {}))
    return dict(re.findall(r"<td>(I\d+)</td><td[^>]*><b>([A-Z]+)</b>", html))


def _squeue_ids(slurm_sandbox: Any) -> list[str]:
    out = slurm_sandbox.runner().run(["squeue", "-h", "-o", "%i"]).stdout
    return [line.strip() for line in out.splitlines() if line.strip()]


def test_workshop_notebook_02_shows_topology_binding_isolation_timeslicing(
    slurm_sandbox: Any, monkeypatch: pytest.MonkeyPatch, tmp_path: Path
) -> None:
    nbformat = pytest.importorskip("nbformat")
    nbclient = pytest.importorskip("nbclient")
    for key, value in slurm_sandbox.env().items():
        monkeypatch.setenv(key, value)
    before = set(_squeue_ids(slurm_sandbox))
    nb = nbformat.read(NOTEBOOK, as_version=4)
    client = nbclient.NotebookClient(
        nb,
        kernel_name="python3",
        timeout=180,
        allow_errors=True,
        resources={"metadata": {"path": str(tmp_path)}},
    )
    job_ids: dict[str, str] = {}
    grants: dict[str, dict[str, list[int]]] = {}

    # the jobs' grants are read while they run: record the ids as the kernel prints them
    def on_cell_executed(cell: Any, **_: Any) -> None:
        if cell.source.startswith(("alloc.wait(", "shared = %salloc")):
            name = "alloc" if cell.source.startswith("alloc") else "shared"
            found = re.search(r"\b(?:job|allocation) (\d+)", _text(cell))
            if found:
                job_ids[name] = found.group(1)
                grants[name] = _granted_gpus(slurm_sandbox, found.group(1))

    client.on_cell_executed = on_cell_executed
    client.execute()
    code = [c for c in nb.cells if c.cell_type == "code"]

    def cell(prefix: str) -> Any:
        return next(c for c in code if c.source.startswith(prefix))

    errors = [
        (c.source, _text(c))
        for c in code
        if any(o.get("output_type") == "error" or "Error" in o.get("text", "") for o in c.outputs)
    ]
    assert errors == []

    # 1. the profile figure and the best-connected 4 GPUs of a DGX H100 (all NVLink, one NUMA node)
    best = cell("from bokeh.io")
    assert _has_bokeh(best)
    chosen = re.search(r"GPUs ([\d, ]+): every pair is joined by NVLink.*all on NUMA (\d+)", _text(best))
    assert chosen, _text(best)
    assert len(chosen.group(1).split(",")) == 4

    # 2. what Slurm granted, as scontrol show job -d says it, is what the notebook shows
    assert {"alloc", "shared"} <= set(grants), job_ids
    granted = grants["alloc"]
    assert sum(len(v) for v in granted.values()) == 2
    shown = _text(cell("alloc.wait("))
    assert "RUNNING" in shown
    for node, gpus in granted.items():
        assert f"'{node}': {sorted(gpus)}" in shown, (granted, shown)

    topo = cell("topo = alloc.topology()")
    assert topo.source.splitlines()[-1] == "topo" and _draws_itself(topo)
    held = re.search(r"this allocation's GPUs here: ([\d, ]+)", _text(topo))
    assert held, _text(topo)
    first_node = next(iter(granted))
    assert sorted(int(x) for x in held.group(1).split(",")) == sorted(granted[first_node])

    table = _text(cell("binding = alloc.explain_binding()"))
    idx = ",".join(map(str, sorted(granted[first_node])))
    assert f"GRES IDX {idx}" in table, table
    assert re.search(r"--gpu-bind: \S*closest -(?:>|&gt;) honoured", table), table
    assert re.search(r"--gres-flags=enforce-binding: set -(?:>|&gt;) honoured", table), table
    assert _draws_itself(cell("binding = alloc.explain_binding()"))
    # how to draw the MIG view is written next to the topology, and what the sandbox cannot measure
    text = next(c.source for c in nb.cells if c.source.startswith("## 3. Which GPUs"))
    assert "`alloc.mig()`" in text and "h200-mig" in text and "On the sandbox" in text

    # 4. isolated: I1-I3 and I7 pass on Slurm's view, the GPU-only checks skip with a reason
    iso = cell("%gpu_isolation --jobid {alloc.job_id}")
    assert "verdict: isolated" in _text(iso), _text(iso)
    checks = _checks(iso)
    assert {k: checks.get(k) for k in ("I1", "I2", "I3", "I7")} == dict.fromkeys(
        ("I1", "I2", "I3", "I7"), "PASS"
    )
    assert "FAIL" not in checks.values()
    if "no GPU hardware" in _text(iso):  # the sandbox: the checks that need a real GPU say SKIP
        assert checks["I4"] == checks["I5"] == "SKIP", checks

    # 5. the deliberately shared request: both tasks on one GPU
    assert sum(len(v) for v in grants["shared"].values()) == 1
    assert "verdict: shared" in _text(cell("%gpu_isolation --jobid {shared.job_id}"))

    # 6. time-slicing measured, classified, and drawn
    ts = _text(cell("ts = %gpu_timeslice"))
    assert "time-sliced" in ts, ts
    assert _has_bokeh(cell("show(gantt_figure(ts))"))

    # 7. released: neither job is left in the queue
    deadline = time.monotonic() + 30
    ours = {job_ids["alloc"], job_ids["shared"]}
    while ours & set(_squeue_ids(slurm_sandbox)) and time.monotonic() < deadline:
        time.sleep(0.5)
    assert not ours & set(_squeue_ids(slurm_sandbox))
    assert set(_squeue_ids(slurm_sandbox)) <= before
