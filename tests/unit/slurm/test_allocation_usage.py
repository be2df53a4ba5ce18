"""The usage sampler of an allocation, on scripted Slurm output: sstat readings become CPU samples, the GPU
step's streamed lines become GPU samples, and every failure ends as the table's error — never in the kernel."""

from __future__ import annotations

import json
import time
from collections.abc import Callable
from dataclasses import dataclass, field

import pytest

from slurmlab.core.framing import frame
from slurmlab.core.slurm.sstat import SSTAT_FIELDS
from slurmlab.slurm.allocation import sampler as allocation_usage
from slurmlab.slurm.allocation.sampler import UsageSampler, sampler_for, sstat_argv, usage_of
from slurmlab.testing import FakeRunner, golden
from slurmlab.testing.scripted import ANY


@dataclass
class StandIn:
    """What the sampler reads of an Allocation."""

    runner: FakeRunner
    job_id: str = "77"
    state: str = "RUNNING"
    gpus: dict[str, list[int]] = field(default_factory=dict)

    @property
    def running(self) -> bool:
        return self.state == "RUNNING"

    @property
    def ended(self) -> bool:
        return self.state in ("COMPLETED", "CANCELLED")

    def time_left(self) -> float | None:
        return 600.0


def _until(check: Callable[[], object], seconds: float = 10.0) -> None:
    deadline = time.monotonic() + seconds
    while not check():
        assert time.monotonic() < deadline, "condition not reached"
        time.sleep(0.01)


def _sampler(alloc: StandIn) -> UsageSampler:
    return UsageSampler(alloc, interval=0.01)  # type: ignore[arg-type]


SSTAT = ["sstat", "--parsable2", "--noheader", "--allsteps", "-j", "77", ANY]


def test_sstat_readings_become_the_cpu_of_the_jobs_tasks(fake: FakeRunner) -> None:
    first, later = (
        golden("22.05/sstat/u01_sstat_busy_step.txt"),
        golden("22.05/sstat/u02_sstat_busy_step_later.txt"),
    )
    fake.on(SSTAT, stderr=golden("22.05/sstat/u00_sstat_no_step.stderr")).then(stdout=first).then(
        stdout=later
    )
    alloc = StandIn(fake)
    sampler = _sampler(alloc)
    calls: list[int] = []
    sampler.listen(lambda: calls.append(1))
    sampler.start()
    _until(lambda: sampler.table().samples)
    alloc.state = "COMPLETED"
    _until(lambda: not sampler.alive)
    table = sampler.table()
    assert table.source == "sstat" and "this machine has no GPU" in table.label and table.error is None
    first_sample = table.samples[0]
    assert first_sample.series == "step 1.0" and first_sample.util > 0  # 14 s -> 22 s of CPU
    assert calls and "sampling ended with the allocation (COMPLETED)" == table.note


@pytest.mark.parametrize("version", ["22.05", "24.11", "26.05"])
def test_a_fresh_allocation_without_a_step_is_a_plain_note_not_sstats_error(
    fake: FakeRunner, version: str
) -> None:
    from slurmlab.widgets.panel_usage import summary_html

    fake.on(SSTAT, stderr=golden(f"{version}/sstat/u00_sstat_no_step.stderr"))  # salloc starts no step
    alloc = StandIn(fake)
    sampler = _sampler(alloc).start()
    _until(lambda: len(fake.called(SSTAT)) >= 2)
    table = sampler.table()
    alloc.state = "COMPLETED"
    _until(lambda: not sampler.alive)
    shown = summary_html(table)
    assert table.error is None and "error" not in shown and "sstat:" not in shown
    assert "once one does (%srun" in shown and table.note == allocation_usage.NO_STEP_YET


def test_the_argv_asks_for_every_field_parsably() -> None:
    argv = sstat_argv("42")
    assert argv[:3] == ["sstat", "--parsable2", "--noheader"] and "--allsteps" in argv
    assert argv[-1] == "--format=" + ",".join(SSTAT_FIELDS) and argv[argv.index("-j") + 1] == "42"


def test_sampling_ends_when_sstat_says_the_job_is_gone_before_the_poller_does(fake: FakeRunner) -> None:
    fake.on(SSTAT, stdout=golden("26.05/sstat/u01_sstat_busy_step.txt")).then(
        stderr=golden("26.05/sstat/u04_sstat_unknown_job.stderr")
    )
    sampler = _sampler(StandIn(fake)).start()
    _until(lambda: not sampler.alive)
    table = sampler.table()
    assert table.error is None and (table.note or "").startswith(
        "sampling ended: the job has no running step"
    )


def test_a_failing_sstat_is_the_tables_error(fake: FakeRunner) -> None:
    fake.on(SSTAT, stderr="sstat: error: Unable to contact slurm controller", returncode=1)
    sampler = _sampler(StandIn(fake)).start()
    _until(lambda: not sampler.alive)
    table = sampler.table()
    assert table.error and "sstat" in table.error and table.samples == ()
    assert "stopped:" in str(table)


def test_garbage_from_sstat_is_the_tables_error_naming_the_line(fake: FakeRunner) -> None:
    fake.on(SSTAT, stdout="1.0|2|node1|<script>|x\n")
    sampler = _sampler(StandIn(fake)).start()
    _until(lambda: not sampler.alive)
    assert "cannot parse sstat line" in (sampler.table().error or "")


def _gpu_lines() -> str:
    samples = [
        {
            "t": 100 + i,
            "node": "n1",
            "gpus": [
                {"index": 2, "uuid": "GPU-a", "util": 40 + i, "mem_used_mb": 10.0, "mem_total_mb": 80.0}
            ],
        }
        for i in range(3)
    ]
    second = frame(samples[1])
    lines = [
        "srun: warning: something srun says",
        "0: " + frame({"source": "nvml", "gpus": ["GPU-a"]}),
        "0: " + frame(samples[0]),
        # a report srun cut in two pieces (it forwards a task's output in pieces of at most 1 KiB)
        "0: " + second[:40],
        "0: " + second[40:],
        "0: " + frame(samples[2]),
        '0: <slurmlab-report>{"t": 1, "node": "n1", "gpus": [{"index": 0, "ut</slurmlab-report>',  # broken
    ]
    return "\n".join(lines) + "\n"


def test_on_a_gpu_cluster_one_overlapping_step_samples_this_jobs_gpus(fake: FakeRunner) -> None:
    fake.on(["srun", ...], stdout=_gpu_lines())
    alloc = StandIn(fake, gpus={"n1": [2], "n2": []})
    sampler = _sampler(alloc).start()
    _until(lambda: not sampler.alive)
    [argv] = fake.called(["srun", ...])
    assert argv[1:5] == ["--jobid=77", "--overlap", "--label", "-N"] and argv[5] == "1"
    assert "--ntasks-per-node=1" in argv and argv[argv.index("-w") + 1] == "n1"
    assert "python3" in argv and json.loads(argv[-1]) == {"n1": [2]}
    table = sampler.table()
    assert table.source == "nvml" and [s.util for s in table.samples] == [40.0, 41.0, 42.0]
    assert table.rows[0].series == "n1 GPU 2" and table.error is None
    assert "a garbled sample was skipped" in (table.note or "") and "task 0" in (table.note or "")


def test_a_sampler_step_that_prints_no_sample_says_what_srun_said(fake: FakeRunner) -> None:
    fake.on(
        ["srun", ...],
        stdout="srun: error: Unable to create step for job 77: Job/step already completing\n",
        returncode=1,
    )
    sampler = _sampler(StandIn(fake, gpus={"n1": [0]})).start()
    _until(lambda: not sampler.alive)
    error = sampler.table().error or ""
    assert "printed no sample" in error and "already completing" in error


def test_the_sampler_says_when_it_cannot_see_this_jobs_gpus(fake: FakeRunner) -> None:
    fake.on(["srun", ...], stdout="0: " + frame({"error": "none of this job's GPUs"}) + "\n")
    sampler = _sampler(StandIn(fake, gpus={"n1": [0]})).start()
    _until(lambda: not sampler.alive)
    assert sampler.table().error == "none of this job's GPUs"


def test_usage_is_lazy_and_waits_for_a_running_job(fake: FakeRunner, monkeypatch: pytest.MonkeyPatch) -> None:
    fake.on(SSTAT, stdout="")
    alloc = StandIn(fake, state="PENDING")
    table = usage_of(alloc)  # type: ignore[arg-type]
    assert table.samples == () and "PENDING" in (table.note or "") and not fake.called(SSTAT)
    alloc.state = "RUNNING"
    sampler = sampler_for(alloc)  # type: ignore[arg-type]
    sampler.interval = 0.01
    assert "sampling started" in (usage_of(alloc).note or "")  # type: ignore[arg-type]
    _until(lambda: fake.called(SSTAT))
    assert sampler_for(alloc) is sampler  # type: ignore[arg-type]
    sampler.stop()
    _until(lambda: not sampler.alive)
    allocation_usage._samplers.pop(id(alloc), None)
