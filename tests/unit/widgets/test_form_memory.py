"""The request form remembers the values last submitted (issue 28: it forgot them, Open OnDemand's remembers),
in the user's own config file, and starts from them where the cluster still offers them."""

from __future__ import annotations

import json
import time
from pathlib import Path
from typing import Any

import pytest

from slurmlab.errors import SlurmlabError
from slurmlab.widgets.live import LiveUpdater


@pytest.fixture
def inventory() -> Any:
    from slurmlab.core.request.inventory import ClusterInventory, NodeInventory

    h100 = [
        NodeInventory(f"node{i}", cpus=112, memory_mb=2_000_000, sockets=2, gpus={"h100": 8}, shards=32)
        for i in (1, 2)
    ]
    mig = NodeInventory("mig1", cpus=96, memory_mb=1_000_000, sockets=2, gpus={"1g.18gb": 7, "3g.71gb": 2})
    return ClusterInventory.build(
        nodes=[*h100, mig], partitions={"gpu": ["node1", "node2"], "mig": ["mig1"]}, default="gpu"
    )


def _form(inventory: Any, memory: Path | None) -> Any:
    pytest.importorskip("ipywidgets")
    from slurmlab.widgets.form import RequestForm

    return RequestForm(inventory=inventory, updater=LiveUpdater(period=0.02), memory=memory)


def test_a_submitted_request_is_where_the_next_form_starts(
    inventory: Any, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    from slurmlab.slurm import allocation

    def refuse(*_a: Any, **_k: Any) -> Any:
        raise SlurmlabError("no Slurm in this test")

    monkeypatch.setattr(allocation.Allocation, "submit", staticmethod(refuse))
    memory = tmp_path / "slurmlab" / "request-form.json"
    first = _form(inventory, memory)
    first.partition.value = "mig"
    first.render()
    first.gpu_type.value = "3g.71gb"
    first.count.value = 2
    first.tasks.value = 2
    first.time.value = "01:00:00"
    first.render()
    assert first.problem is None, first.problem
    first.submit(wait=False)
    deadline = time.monotonic() + 10
    while first._submitting and time.monotonic() < deadline:
        time.sleep(0.02)
    kept = json.loads(memory.read_text())
    assert kept["partition"] == "mig" and kept["gpu_type"] == "3g.71gb" and kept["count"] == 2
    again = _form(inventory, memory)
    assert (again.partition.value, again.sharing.value, again.gpu_type.value) == ("mig", "mig", "3g.71gb")
    assert (again.count.value, again.tasks.value, again.time.value) == (2, 2, "01:00:00")
    assert again.problem is None
    # a form made without a memory file (a test, a teacher's code) starts from the defaults
    assert _form(inventory, None).partition.value == "gpu"


def test_what_the_cluster_no_longer_offers_or_a_broken_file_is_left_at_the_default(
    inventory: Any, tmp_path: Path
) -> None:
    memory = tmp_path / "request-form.json"
    memory.write_text(
        json.dumps({"partition": "gone", "gpu_type": "b200", "count": -4, "nodes": 3, "time": 7})
    )
    form = _form(inventory, memory)
    assert (form.partition.value, form.gpu_type.value, form.count.value, form.time.value) == (
        "gpu",
        "",
        1,
        "00:30:00",
    )
    assert form.nodes.value == 3
    memory.write_bytes(b"\xff not json")
    assert _form(inventory, memory).partition.value == "gpu"
