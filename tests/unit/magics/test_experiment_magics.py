"""%gpu_timeslice and %gpu_isolation through run_line_magic: errors offline, real runs in the sandbox."""

from __future__ import annotations

from typing import Any

import pytest
from IPython.core.error import UsageError


def test_isolation_without_an_allocation_says_to_salloc_first(xip: Any) -> None:
    with pytest.raises(UsageError, match="%salloc"):
        xip.run_line_magic("gpu_isolation", "")


def test_unknown_options_are_refused_with_the_way_to_help(xip: Any) -> None:
    with pytest.raises(UsageError, match="gpu_timeslice\\?"):
        xip.run_line_magic("gpu_timeslice", "--local --gpus=2")
    with pytest.raises(UsageError, match="after --"):
        xip.run_line_magic("gpu_isolation", "--gpus-per-task=1")


def test_timeslice_magic_runs_locally_without_an_allocation(xip: Any) -> None:
    r = xip.run_line_magic("gpu_timeslice", "--local --procs 2 --duration 0.3 --backend cpu")
    assert r.meta["launcher"] == "local"
    assert len(r.processes) == 2
    # --cores default: both workers pinned to one CPU
    assert r.meta["cpu_affinity"][0] == r.meta["cpu_affinity"][1] and len(r.meta["cpu_affinity"][0]) == 1


def test_bad_values_become_usage_errors(xip: Any) -> None:
    with pytest.raises(UsageError, match="--procs must be between 1 and 64, got 0"):
        xip.run_line_magic("gpu_timeslice", "--local --procs 0 --backend cpu")


@pytest.mark.sandbox
def test_magics_run_in_the_notebooks_default_allocation(slurm_sandbox: Any, xip: Any) -> None:
    alloc = xip.run_line_magic("salloc", "-n2 --gpus-per-task=1 --gpu-bind=closest -t 10")
    alloc.wait(timeout=60)
    report = xip.run_line_magic("gpu_isolation", "")
    assert report.verdict == "isolated", report.summary()
    assert report.meta["job_id"] == str(alloc.job_id)
    assert report.by_id("I3").status == "PASS"
    assert "verdict: isolated" in report._repr_html_()

    ts = xip.run_line_magic("gpu_timeslice", "--procs 2 --duration 0.5 --backend cpu")
    assert ts.meta["launcher"] == "steps" and ts.meta["job_id"] == str(alloc.job_id)
    assert {r["slurm_env"]["SLURM_JOB_ID"] for r in ts.meta["reports"]} == {str(alloc.job_id)}

    # --jobid picks the allocation explicitly; -- passes srun options to the check step
    again = xip.run_line_magic("gpu_isolation", f"--jobid {alloc.job_id} -- -n1 --gpus-per-task=1")
    assert again.meta["tasks"] == 1 and "--gpus-per-task=1" in again.meta["step_argv"]
