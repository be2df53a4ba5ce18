"""Isolation checks I1–I10 over constructed worker reports, with each verdict's evidence."""

from __future__ import annotations

import json
from typing import Any

import numpy as np
import pytest

from slurmlab.experiments.analysis import analyse
from slurmlab.experiments.isolation import mig_profile_gb, parse_cpulist, run_checks
from slurmlab.experiments.isolation_result import FAIL, INFO, MIG, PASS, SHARED, SKIP, Grant

MS = 1_000_000
GB = 1_000_000_000


def gpu(uuid: str, bus: str, *, mem: int = 141 * GB, mode: str = "Default", cpus: str | None = "0-23",
        app_mhz: float | None = None) -> dict[str, Any]:  # fmt: skip
    return {
        "uuid": uuid,
        "pci_bus_id": bus,
        "memory_total": mem,
        "compute_mode": mode,
        "local_cpulist": cpus,
        "clocks": {"applications_mhz": app_mhz} if app_mhz else {},
    }


def task(label: str, devices: list[dict[str, Any]], cvd: str | None, *, affinity: list[int] | None = None,
         child: int | None = None, over: bool | None = None) -> dict[str, Any]:  # fmt: skip
    identity: dict[str, Any] = {"kind": "gpu", "devices": devices, "child_visible_gpus": child}
    if over is not None:
        identity["overallocation"] = {"failed": over}
    env = {"SLURM_PROCID": label} | ({"CUDA_VISIBLE_DEVICES": cvd} if cvd is not None else {})
    return {
        "backend": "cupy",
        "label": label,
        "identity": identity,
        "slurm_env": env,
        "cpu_affinity": affinity or [0],
    }


A = gpu("GPU-aaaa", "0000:18:00.0")
B = gpu("GPU-bbbb", "0000:2A:00.0", cpus="24-47")


def alternating(n: int) -> Any:
    period = n * MS
    runs = [
        np.stack([np.arange(10) * period + i * MS, np.arange(10) * period + (i + 1) * MS], axis=1)
        for i in range(n)
    ]
    return analyse(runs, (0, 10 * period))


def overlapping(n: int) -> Any:
    return analyse([[[0, 10 * MS]]] * n, (0, 10 * MS))


def test_cpu_reports_skip_every_gpu_check_with_the_reason() -> None:
    reports = [{"backend": "cpu", "label": "0", "identity": {"kind": "cpu", "devices": []}, "slurm_env": {}}]
    rep = run_checks(reports, Grant(gpus_per_task=1))
    for cid in ("I1", "I2", "I3", "I4", "I5", "I9", "I10"):
        c = rep.by_id(cid)
        assert c.status == SKIP and "no GPU visible" in c.reason and "cpu" in c.reason
    assert rep.by_id("I6").status == SKIP
    assert not rep.failed


def test_exclusive_gpus_pass_and_show_their_evidence() -> None:
    reports = [task("0", [A], "0", child=1), task("1", [B], "0", child=1)]
    rep = run_checks(reports, Grant(gpus_per_task=1))
    for cid in ("I1", "I2", "I3", "I4", "I9"):
        assert rep.by_id(cid).status == PASS, rep.summary()
    assert rep.by_id("I3").evidence["1"][0]["pci_bus_id"] == "0000:2A:00.0"
    assert rep.by_id("I5").status == INFO


def test_wrong_count_and_unset_visible_devices_fail() -> None:
    reports = [task("0", [A, B], None)]
    rep = run_checks(reports, Grant(gpus_per_task=1))
    assert rep.by_id("I1").status == FAIL and "granted 1" in rep.by_id("I1").reason
    assert rep.by_id("I2").status == FAIL and "unset" in rep.by_id("I2").reason


def test_exclusive_grant_sharing_a_uuid_fails() -> None:
    reports = [task("0", [A], "0"), task("1", [A], "0")]
    c = run_checks(reports, Grant(gpus_per_task=1)).by_id("I3")
    assert c.status == FAIL and "GPU-aaaa" in c.reason


def test_shared_grant_needs_equal_uuids() -> None:
    assert run_checks([task("0", [A], "0"), task("1", [A], "0")], Grant(1, SHARED)).by_id("I3").status == PASS
    assert run_checks([task("0", [A], "0"), task("1", [B], "0")], Grant(1, SHARED)).by_id("I3").status == FAIL


def test_device_cgroup_not_enforced_fails() -> None:
    c = run_checks([task("0", [A], "0", child=4)], Grant(1)).by_id("I4")
    assert c.status == FAIL and "sees 4" in c.reason
    assert run_checks([task("0", [A], "0")], Grant(1)).by_id("I4").status == SKIP


def test_mig_memory_and_visible_devices() -> None:
    slice_ = gpu("MIG-1111", "0000:18:00.0", mem=int(16.9 * GB))
    good = task("0", [slice_], "MIG-1111", over=True)
    rep = run_checks([good], Grant(1, MIG, mig_profile="1g.18gb"))
    assert rep.by_id("I2").status == PASS
    assert rep.by_id("I5").status == PASS, rep.summary()
    whole = task("0", [A], "0", over=True)
    rep = run_checks([whole], Grant(1, MIG, mig_profile="1g.18gb"))
    assert rep.by_id("I2").status == FAIL and "MIG-" in rep.by_id("I2").reason
    assert rep.by_id("I5").status == FAIL and "141.0 GB" in rep.by_id("I5").reason
    leaky = task("0", [slice_], "MIG-1111", over=False)
    assert run_checks([leaky], Grant(1, MIG, mig_profile="1g.18gb")).by_id("I5").status == FAIL


def test_shared_memory_is_reported_not_isolated() -> None:
    c = run_checks([task("0", [A], "0")], Grant(1, SHARED)).by_id("I5")
    assert c.status == INFO and "not memory-isolated" in c.reason


def test_compute_share_under_time_slicing_and_mig() -> None:
    reports = [task(str(i), [A], "0") for i in range(3)]
    assert run_checks(reports, Grant(1, SHARED), alternating(3)).by_id("I6").status == PASS
    unfair = analyse([[[0, 8 * MS]], [[8 * MS, 9 * MS]], [[9 * MS, 10 * MS]]], (0, 10 * MS))
    assert run_checks(reports, Grant(1, SHARED), unfair).by_id("I6").status == FAIL
    mig_ok = analyse([[[0, MS]], [[0, MS]]], (0, MS), work_s=[1.05, 1.0], solo_work_s=1.0)
    mig_bad = analyse([[[0, MS]], [[0, MS]]], (0, MS), work_s=[2.0, 2.0], solo_work_s=1.0)
    assert run_checks(reports[:2], Grant(1, MIG), mig_ok).by_id("I6").status == PASS
    assert run_checks(reports[:2], Grant(1, MIG), mig_bad).by_id("I6").status == FAIL


def test_gpu_bind_closest_checks_cpu_affinity() -> None:
    near = task("0", [A], "0", affinity=[2, 3])
    far = task("1", [A], "0", affinity=[30])
    grant = Grant(1, gpu_bind="closest")
    assert run_checks([near], grant).by_id("I7").status == PASS
    c = run_checks([far], grant).by_id("I7")
    assert c.status == FAIL and "[30]" in c.reason
    assert run_checks([near], Grant(1)).by_id("I7").status == SKIP
    blind = task("0", [gpu("GPU-x", "0000:01:00.0", cpus=None)], "0")
    assert run_checks([blind], grant).by_id("I7").status == SKIP


def test_gpu_freq() -> None:
    t = task("0", [gpu("GPU-a", "0000:18:00.0", app_mhz=1500)], "0")
    assert run_checks([t], Grant(1, gpu_freq="1500")).by_id("I8").status == PASS
    assert run_checks([t], Grant(1, gpu_freq="1980")).by_id("I8").status == FAIL
    assert run_checks([t], Grant(1, gpu_freq="high")).by_id("I8").status == INFO
    assert run_checks([t], Grant(1)).by_id("I8").status == SKIP


def test_exclusive_process_mode_forbids_sharing() -> None:
    excl = gpu("GPU-a", "0000:18:00.0", mode="Exclusive_Process")
    c = run_checks([task("0", [excl], "0")], Grant(1, SHARED)).by_id("I9")
    assert c.status == FAIL and "Exclusive_Process" in c.reason
    assert run_checks([task("0", [excl], "0")], Grant(1)).by_id("I9").status == PASS


def test_co_location_needs_equal_uuids_and_alternating_runs() -> None:
    same = [task("0", [A], "0"), task("1", [A], "0")]
    diff = [task("0", [A], "0"), task("1", [B], "0")]
    assert run_checks(same, Grant(1, SHARED), alternating(2)).by_id("I10").status == PASS
    assert run_checks(same, Grant(1, SHARED), overlapping(2)).by_id("I10").status == INFO
    assert run_checks(diff, Grant(1), alternating(2)).by_id("I10").status == FAIL
    assert run_checks(diff, Grant(1), overlapping(2)).by_id("I10").status == PASS
    assert run_checks(same, Grant(1, SHARED)).by_id("I10").status == SKIP


def test_grant_from_a_step_environment() -> None:
    g = Grant.from_env({"SLURM_STEP_GPUS": "2,3", "CUDA_VISIBLE_DEVICES": "0,1", "SLURM_GPU_BIND": "closest"})
    assert (g.gpus_per_task, g.sharing, g.gpu_bind) == (2, "exclusive", "closest")
    assert Grant.from_env({"SLURM_SHARDS_ON_NODE": "4"}).sharing == SHARED
    assert Grant.from_env({"CUDA_VISIBLE_DEVICES": "MIG-abc"}).sharing == MIG
    assert Grant.from_env({"SLURM_GPUS_PER_TASK": "h100:1", "SLURM_JOB_GPUS": "0,1"}).gpus_per_task == 1
    assert Grant.from_env({}).gpus_per_task is None


def test_views() -> None:
    rep = run_checks([task("0", [A], "0")], Grant(1))
    data = json.loads(rep.to_json())
    assert [c["id"] for c in data["checks"]] == [f"I{i}" for i in range(1, 11)]
    assert "I1 PASS" in rep.summary()
    assert "<table>" in rep._repr_html_()


def test_parsers() -> None:
    assert parse_cpulist("0-3,8,10-11\n") == {0, 1, 2, 3, 8, 10, 11}
    with pytest.raises(ValueError):
        parse_cpulist("0-3,x")
    assert mig_profile_gb("1g.18gb") == 18.0
    assert mig_profile_gb("7g") is None
