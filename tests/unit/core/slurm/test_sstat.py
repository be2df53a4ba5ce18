"""``sstat`` output as recorded from sandboxes with accounting on 22.05, 24.11 and 26.05
(``tests/data/slurm/record_sstat.py``), then hostile and corrupted lines."""

from __future__ import annotations

from dataclasses import replace

import pytest

from slurmlab.core.gpu.usage import cpu_samples
from slurmlab.core.slurm.sstat import cpu_seconds, job_not_running, parse_sstat, sstat_problem
from slurmlab.errors import ParseError
from slurmlab.testing.recordings import golden_dir

VERSIONS = [
    v
    for v in ("22.05", "24.11", "26.05")
    if (golden_dir() / v / "sstat" / "u01_sstat_busy_step.txt").is_file()
]


def _text(version: str, name: str) -> str:
    return (golden_dir() / version / "sstat" / name).read_text()


def test_recordings_of_every_version_are_there() -> None:
    assert VERSIONS == ["22.05", "24.11", "26.05"]


@pytest.mark.parametrize("version", VERSIONS)
def test_a_busy_two_task_step_reads_as_its_cpu_time_and_memory(version: str) -> None:
    line = _text(version, "u01_sstat_busy_step.txt").strip()
    [rec] = parse_sstat(line)
    fields = line.split("|")
    assert rec.step_id == fields[0] and rec.step == fields[0].split(".")[1]
    assert rec.tasks == int(fields[1]) == 2 and rec.nodes == (fields[2],)
    # the TRES total is both tasks together: about twice one task's mean, never less than it
    assert rec.total_cpu_s >= rec.ave_cpu_s > 0
    assert rec.max_rss_mb is not None and rec.ave_rss_mb is not None and 0 < rec.ave_rss_mb <= rec.max_rss_mb
    assert rec.to_dict()["tasks"] == 2


@pytest.mark.parametrize("version", VERSIONS)
def test_two_readings_apart_give_a_busy_steps_cpu_utilisation(version: str) -> None:
    first = parse_sstat(_text(version, "u01_sstat_busy_step.txt"))
    later = parse_sstat(_text(version, "u02_sstat_busy_step_later.txt"))
    [sample] = cpu_samples(first, later, 100.0, 104.0)
    gained = later[0].total_cpu_s - first[0].total_cpu_s
    assert gained > 0 and sample.util == pytest.approx(100 * gained / 4, abs=0.1)
    assert sample.series == f"step {later[0].step_id}" and sample.t == 104.0
    assert cpu_samples(first, later, 104.0, 104.0) == []  # no wall time: no utilisation


@pytest.mark.parametrize("version", VERSIONS)
def test_no_step_and_unknown_job_are_empty_with_plain_words(version: str) -> None:
    assert parse_sstat(_text(version, "u00_sstat_no_step.txt")) == []
    said = sstat_problem(_text(version, "u00_sstat_no_step.stderr"))
    assert said is not None and said.startswith("the job has no running step")
    assert parse_sstat(_text(version, "u04_sstat_unknown_job.txt")) == []
    said = sstat_problem(_text(version, "u04_sstat_unknown_job.stderr"))
    assert said is not None and "999999" in said and "no running step" in said
    # a running job without a step goes on being sampled; one sstat cannot find any more has ended
    assert not job_not_running(_text(version, "u00_sstat_no_step.stderr"))
    assert job_not_running(_text(version, "u04_sstat_unknown_job.stderr"))
    assert sstat_problem("") is None
    assert sstat_problem("sstat: error: something new\n") == "sstat: sstat: error: something new"


@pytest.mark.parametrize(
    "text, seconds", [("00:00:07", 7), ("01:02.345", 62.345), ("1-02:03:04", 93784), ("00:00.001", 0.001)]
)
def test_cpu_times_in_every_form_sstat_prints(text: str, seconds: float) -> None:
    assert cpu_seconds(text) == pytest.approx(seconds)


GOOD = "7.0|2|node[1-2]|00:00:03|00:00:03|cpu=00:00:07,mem=26920K|13460K|1G"


def test_a_hostlist_and_sizes_with_units() -> None:
    [rec] = parse_sstat(GOOD + "\n\n")
    assert rec.nodes == ("node1", "node2") and rec.max_rss_mb == 1024
    # without the TRES cpu entry the total is the mean of one task times the tasks
    [rec] = parse_sstat("7.batch|3|n1|00:00:04|00:00:03|energy=0|0|0")
    assert rec.step == "batch" and rec.total_cpu_s == 12 and rec.max_rss_mb == 0


@pytest.mark.parametrize(
    "line, what",
    [
        ("7.0|2|node1|00:00:03", "sstat line"),  # fields missing
        (GOOD + "|extra", "sstat line"),  # one too many
        (GOOD.replace("7.0", "7;rm -rf /"), "sstat step id"),  # not a step id
        (GOOD.replace("7.0", "7"), "sstat step id"),  # the job, no step
        (GOOD.replace("|2|", "|-2|"), "sstat task count"),
        (GOOD.replace("|2|", "|٢|"), "sstat task count"),  # another script's digit
        (GOOD.replace("|00:00:03|00", "|garbage|00"), "CPU time"),
        (GOOD.replace("cpu=00:00:07", "cpu=1e999"), "CPU time"),
        (GOOD.replace("13460K", "nanK"), "memory size"),
        (GOOD.replace("node[1-2]", "node[2-"), "hostlist"),
        ("x" * 30_000, "sstat line"),
    ],
)
def test_hostile_lines_are_a_parse_error_naming_what(line: str, what: str) -> None:
    with pytest.raises(ParseError) as info:
        parse_sstat(GOOD + "\n" + line)
    assert info.value.what.startswith(what) or what in str(info.value)


def test_a_step_without_a_reading_yet_is_listed_with_its_cpu_unknown_and_gives_no_utilisation() -> None:
    """24.11 right after a step starts: AveCPU is Slurm's NO_VAL64 milliseconds (213503982334 days), the rest
    empty. The old reader took it as 1.8e16 s of CPU, and the usage table said 2.6e19 % for one busy task."""
    starting = parse_sstat(_text("24.11", "u05_sstat_step_starting.txt"))
    assert [(r.step_id, r.tasks) for r in starting] == [("1.0", 0), ("1.0", 1)]  # listed, not hidden
    assert all(r.total_cpu_s is None and r.ave_cpu_s is None and r.max_rss_mb is None for r in starting)
    busy = parse_sstat(_text("24.11", "u01_sstat_busy_step.txt"))
    assert busy[0].total_cpu_s is not None and busy[0].total_cpu_s > 0
    unknown = [replace(busy[0], total_cpu_s=None, ave_cpu_s=None)]
    # no utilisation from a pair with an unknown reading on either side; two real ones give one
    assert cpu_samples(unknown, busy, 100.0, 101.0) == [] and cpu_samples(busy, unknown, 100.0, 101.0) == []
    assert len(cpu_samples(busy, busy, 100.0, 101.0)) == 1
