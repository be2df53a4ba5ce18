"""The seff-like efficiency line, from real sacct recordings and from records built to test each branch."""

from __future__ import annotations

from dataclasses import replace
from pathlib import Path

import pytest

from slurmlab.core.diagnosis.efficiency import efficiencies, efficiency
from slurmlab.core.slurm.sacct import SacctRecord, parse_sacct

DATA = Path(__file__).resolve().parents[3] / "data" / "slurm"
RECORDINGS = sorted(DATA.glob("*/sacct/a01_sacct_jobs.txt"))

JOB = (
    "7|1000|alice|research|debug|normal|COMPLETED|0:0|01:00:00|02:00:00|2026-12-01T10:00:00|2026-12-01T10:00:00|"
    "2026-12-01T11:00:00|node1|4|billing=4,cpu=4,gres/gpu=2,mem=8G,node=1|8G||02:00:00||train"
)
STEP = (
    "7.0|||research|||COMPLETED|0:0|00:30:00||2026-12-01T10:00:00|2026-12-01T10:00:00|2026-12-01T10:30:00|node1|4|"
    "cpu=4,gres/gpu=2,mem=8G,node=1||{rss}|01:00:00|{usage}|python"
)


def records(usage: str = "cpu=01:00:00", rss: str = "2048M") -> list[SacctRecord]:
    return parse_sacct(JOB + "\n" + STEP.format(usage=usage, rss=rss))


def test_gpu_hours_held_cpu_efficiency_and_peak_memory() -> None:
    e = efficiency(records())
    assert e.gpu_hours_held == pytest.approx(2.0) and e.gpu_hours_used is None
    assert e.cpu_efficiency == pytest.approx(0.5)  # 2 CPU-hours of 4 CPUs x 1 hour
    assert (e.peak_rss_mb, e.requested_mem_mb) == (2048, 8192) and e.memory_fraction == pytest.approx(0.25)
    text = e.line()
    assert "2 GPUs held 2.00 GPU-hours" in text and "not accounted" in text
    assert "CPU 50%" in text and "peak memory 2048 MiB of 8192 MiB requested (25%)" in text


def test_gpu_hours_used_where_slurm_accounts_gpu_utilisation() -> None:
    e = efficiency(records(usage="cpu=01:00:00,gres/gpuutil=80"))
    # 80 % of the step's GPUs for its 30 minutes
    assert e.gpu_hours_used == pytest.approx(0.4)
    assert "used 0.40, 20%" in e.line()


def test_no_gpu_no_measure_say_so_and_never_divide_by_zero() -> None:
    job, step = records(rss="")
    bare = replace(job, alloc_tres={"cpu": "0"}, cpus=0, elapsed=0, total_cpu=None, req_mem_mb=None)
    e = efficiency([bare, replace(step, total_cpu=None)])
    assert e.gpus == 0 and e.cpu_efficiency is None and e.peak_rss_mb is None and e.memory_fraction is None
    assert "GPU" not in e.line() and "not measured" in e.line()
    with pytest.raises(ValueError):
        efficiency([])


@pytest.mark.parametrize("path", RECORDINGS, ids=lambda p: p.parent.parent.name)
def test_every_recorded_job_has_a_line_and_the_overrun_shows(path: Path) -> None:
    per_job = efficiencies(parse_sacct(path.read_text()))
    assert len(per_job) >= 9 and all(
        e.line().startswith(f"Efficiency of job {j}:") for j, e in per_job.items()
    )
    over = [e for e in per_job.values() if (e.memory_fraction or 0) > 1]
    assert len(over) == 1 and over[0].requested_mem_mb == 200  # only the --mem=200M job went over
    assert sum(e.gpus for e in per_job.values()) == 1
