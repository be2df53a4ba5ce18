"""``%salloc`` calls the one request pipeline and hands ``Allocation.submit`` the checked model (no Slurm)."""

from __future__ import annotations

import time
from types import SimpleNamespace
from typing import Any

import pytest
from IPython.core.error import UsageError


@pytest.fixture
def cluster(monkeypatch: pytest.MonkeyPatch) -> list[tuple[Any, dict[str, Any]]]:
    """A hand-built cluster answers for the controller; Allocation.submit records what it was given."""
    from slurmlab.core.request.inventory import ClusterInventory, NodeInventory
    from slurmlab.slurm import allocation, inventory, queries
    from slurmlab.slurm.allocation import request as allocation_submit

    inv = ClusterInventory.build(
        nodes=[NodeInventory("node1", cpus=48, memory_mb=64000, sockets=2, gpus={"h100": 4}, shards=16)],
        partitions={"gpu": ["node1"]},
        default="gpu",
    )
    submitted: list[tuple[Any, dict[str, Any]]] = []

    def submit(request: Any, **kw: Any) -> Any:
        submitted.append((request, kw))
        return SimpleNamespace(job_id="42", cancel=lambda: None)

    monkeypatch.setattr(queries, "inventory", lambda runner=None: inv)
    # %salloc reads the inventory cached per cluster (slurm/inventory.py): this one, fetched fresh for this test
    monkeypatch.setattr(
        inventory,
        "fetch_inventory",
        lambda runner, clock=None: inventory.KnownInventory(inv, (), time.monotonic()),
    )
    monkeypatch.setattr(inventory, "_caches", {})
    monkeypatch.setattr(allocation_submit, "known_version", lambda runner: (24, 11, 5))
    monkeypatch.setattr(allocation.Allocation, "submit", staticmethod(submit))
    return submitted


def test_salloc_submits_the_checked_model_with_its_job_name(ip: Any, cluster: list[Any]) -> None:
    from slurmlab.core.request.pipeline import is_checked

    ip.run_line_magic("salloc", "-J train --gpus=h100:2 -t 30")
    ((request, kw),) = cluster
    assert is_checked(request) and request.job_name == "train"
    assert kw == {}  # no name, no validate=False: the model is all


def test_dry_run_shows_the_job_name_first_and_what_was_checked(ip: Any, cluster: list[Any]) -> None:
    dry = ip.run_line_magic("salloc", "--dry-run -J train --gpus=h100:2")
    assert dry.argv[:3] == ("salloc", "--no-shell", "--job-name=train") and "--gpus=h100:2" in dry.argv
    assert dry.checked_against == "checked against the cluster (1 partition), Slurm 24.11.5"
    assert cluster == []
    with pytest.raises(UsageError, match=r"no a100 GPUs.*\n.*h100"):
        ip.run_line_magic("salloc", "--gpus=a100:1")


def test_offline_the_line_is_judged_before_slurm_is_asked(ip: Any, offline_runner: Any) -> None:
    with pytest.raises(UsageError, match=r"%salloc takes no command \(got 'hostname'\)"):
        ip.run_line_magic("salloc", "--gpus=1 hostname")
    with pytest.raises(UsageError, match=r"--gpus=two.*not a GPU count"):
        ip.run_line_magic("salloc", "--gpus=two")
    assert offline_runner.seen == []
    dry = ip.run_line_magic("salloc", "--dry-run --gpus=1")
    assert dry.checked_against.startswith("not checked against the cluster: ")
    with pytest.raises(UsageError, match="cannot submit this request"):
        ip.run_line_magic("salloc", "--gpus=1")
    assert not any(argv[0] == "salloc" for argv in offline_runner.seen)
