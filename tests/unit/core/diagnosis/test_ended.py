"""How a job ended, judged from real sacct recordings of 22.05, 24.11 and 26.05 (scripts/record_sacct.py) and the
scontrol fallback, with the advice as the request's own %salloc line changed."""

from __future__ import annotations

import ast
import json
import shlex
from dataclasses import replace
from pathlib import Path

import pytest

from slurmlab.core.diagnosis.ended import explain_end, records_from_job, with_option
from slurmlab.core.slurm.parse_text import parse_scontrol_jobs
from slurmlab.core.slurm.sacct import SacctRecord, parse_sacct

DATA = Path(__file__).resolve().parents[3] / "data" / "slurm"
VERSIONS = sorted(p.parent.parent.name for p in DATA.glob("*/sacct/a01_sacct_jobs.txt"))
ME = 0  # the recordings ran as root
ARGV = ("-N1", "--gpus=1", "--mem=200M", "-t", "1")


def jobs(version: str) -> tuple[dict[str, str], dict[str, list[SacctRecord]]]:
    folder = DATA / version / "sacct"
    ids = ast.literal_eval((folder / "commands.txt").read_text().splitlines()[0].split("jobs ", 1)[1])
    by_id: dict[str, list[SacctRecord]] = {}
    for r in parse_sacct((folder / "a01_sacct_jobs.txt").read_text()):
        by_id.setdefault(r.job_id, []).append(r)
    return ids, by_id


@pytest.mark.parametrize("version", VERSIONS)
def test_a_job_that_reached_its_limit_is_timeout_with_a_longer_t(version: str) -> None:
    ids, by_id = jobs(version)
    end = explain_end(by_id[ids["timeout"]], me=ME, argv=ARGV)
    assert end.state == "TIMEOUT" and "limit 00:01:00" in end.headline
    (advice,) = end.advice
    line = advice.split(": ", 1)[1]
    assert line.startswith("%salloc ") and shlex.split(line)[-2:] == ["-t", "2"]
    assert "--gpus=1" in line and line.count("-t") == 1  # the request kept, only its time changed
    assert end.efficiency.startswith(f"Efficiency of job {ids['timeout']}:")


@pytest.mark.parametrize("version", VERSIONS)
def test_a_real_mem_overrun_is_out_of_memory_with_a_larger_mem(version: str) -> None:
    ids, by_id = jobs(version)
    end = explain_end(by_id[ids["oom"]], me=ME, argv=ARGV)
    assert end.state == "OUT_OF_MEMORY" and end.slurm_state == "FAILED"
    assert "step 0 (eat) used" in end.headline and "of 200 MiB requested" in end.headline
    assert any("memory watchdog" in d for d in end.details)  # said to be inferred: Slurm's word was FAILED
    (advice,) = end.advice
    mem = [a for a in shlex.split(advice.split(": ", 1)[1]) if a.startswith("--mem")]
    assert len(mem) == 1 and mem[0] != "--mem=200M"
    size = mem[0].split("=")[1]
    assert (int(size[:-1]) * (1024 if size.endswith("G") else 1)) > 600  # more than the peak it reached
    killed = next(s for s in end.steps if s.name == "eat")
    assert killed.signal == 9 and killed.max_rss_mb is not None and killed.max_rss_mb > 200


@pytest.mark.parametrize("version", VERSIONS)
def test_cancelled_by_you_or_by_name(version: str) -> None:
    ids, by_id = jobs(version)
    mine = explain_end(by_id[ids["cancelme"]], me=ME)
    assert mine.state == "CANCELLED" and mine.cancelled_by == "you" and "cancelled by you" in mine.headline
    theirs = explain_end(by_id[ids["cancelme"]], me=4242, names={0: "root"})
    assert theirs.cancelled_by == "root" and "by root" in theirs.line()
    assert explain_end(by_id[ids["cancelme"]], me=4242).cancelled_by == "uid 0"


@pytest.mark.parametrize("version", VERSIONS)
def test_exit_codes_per_step(version: str) -> None:
    ids, by_id = jobs(version)
    alloc = explain_end(by_id[ids["alloc"]], me=ME)
    codes = {s.name: s.code for s in alloc.steps}
    assert codes["hello"] == 0 and codes["four"] == 4
    assert "step 1 (four): FAILED, exit code 4" in alloc.text()
    fail = explain_end(by_id[ids["fail"]], me=ME)
    assert fail.state == "FAILED" and "exit code 3" in fail.headline and fail.advice
    done = explain_end(by_id[ids["done"]], me=ME)
    assert done.state == "COMPLETED" and done.advice == () and "exit code 0" in done.line()


@pytest.mark.parametrize("version", VERSIONS)
def test_the_report_is_text_html_and_json(version: str) -> None:
    ids, by_id = jobs(version)
    end = explain_end(by_id[ids["timeout"]], me=ME, argv=ARGV)
    html = end._repr_html_()
    assert (
        "class='slurmlab-ended'" in html
        and "data-state='TIMEOUT'" in html
        and "slurmlab-ended-advice" in html
    )
    doc = json.loads(end.to_json())
    assert doc["state"] == "TIMEOUT" and doc["source"] == "sacct" and doc["advice"] == list(end.advice)
    assert end.text().startswith(f"Job {ids['timeout']} reached its time limit")


@pytest.mark.parametrize("version", VERSIONS)
@pytest.mark.parametrize("name", ["timeout", "cancelme", "oom"])
def test_scontrol_fallback_when_accounting_is_off(version: str, name: str) -> None:
    (job,) = parse_scontrol_jobs((DATA / version / "sacct" / f"a03_scontrol_show_job_{name}.txt").read_text())
    end = explain_end(records_from_job(job), me=ME, argv=ARGV, source="scontrol", note="sacct would say more")
    assert end.source == "scontrol" and end.note and end.efficiency == ""
    assert end.slurm_state == job.state and end.state == {"timeout": "TIMEOUT", "cancelme": "CANCELLED"}.get(
        name, job.state
    )


def test_with_option_replaces_every_spelling() -> None:
    assert with_option(["-t", "5", "--gpus=1", "--time=7", "-t9"], ("-t", "--time"), "20") == [
        "--gpus=1",
        "-t",
        "20",
    ]
    assert with_option(["--mem-per-gpu", "4G", "-n2"], ("--mem", "--mem-per-gpu"), "8G") == [
        "-n2",
        "--mem=8G",
    ]
    assert with_option([], ("-t", "--time"), "3") == ["-t", "3"]


def test_memory_advice_keeps_the_per_gpu_form() -> None:
    ids, by_id = jobs(VERSIONS[0])
    records = [
        replace(r, alloc_tres={**r.alloc_tres, "gres/gpu": "2"}) if r.is_job else r for r in by_id[ids["oom"]]
    ]
    end = explain_end(records, me=ME, argv=("--gpus=2", "--mem-per-gpu=100M"))
    assert "--mem-per-gpu=" in end.advice[0] and "--mem=" not in end.advice[0]


def test_no_records_is_a_value_error() -> None:
    with pytest.raises(ValueError):
        explain_end([], me=ME)


BASE = (
    "40|1000|alice|research|gpu|normal|{state}|{exit}|00:10:00|01:00:00|2026-12-01T10:00:00|2026-12-01T10:00:00|"
    "2026-12-01T10:10:00|node[1-2]|8|billing=8,cpu=8,gres/gpu=2,mem=16G,node=2|16G||00:20:00||train\n"
    "40.0|||research|||{step}|{step_exit}|00:10:00||2026-12-01T10:00:00|2026-12-01T10:00:00|2026-12-01T10:10:00|"
    "node[1-2]|8|cpu=8,gres/gpu=2,mem=16G,node=2||9000M|00:20:00||python\n"
    "40.extern|||research|||COMPLETED|0:0|00:10:00||2026-12-01T10:00:00|2026-12-01T10:00:00|2026-12-01T10:10:00|"
    "node[1-2]|8|cpu=8,gres/gpu=2,mem=16G,node=2||1M|00:00:00||extern"
)


@pytest.mark.parametrize(
    ("state", "step", "want", "advice"),
    [
        ("OUT_OF_MEMORY", "OUT_OF_MEMORY", "OUT_OF_MEMORY", "--mem-per-gpu="),  # cgroups: Slurm's own word
        ("NODE_FAIL", "CANCELLED", "NODE_FAIL", "--requeue"),
        ("PREEMPTED", "CANCELLED", "PREEMPTED", "--requeue"),
        ("BOOT_FAIL", "CANCELLED", "BOOT_FAIL", None),
    ],
)
def test_slurms_own_end_states_and_their_advice(state: str, step: str, want: str, advice: str | None) -> None:
    records = parse_sacct(BASE.format(state=state, exit="0:0", step=step, step_exit="0:9"))
    end = explain_end(records, me=1000, argv=["-N2", "--gpus-per-node=1", "--mem-per-gpu=8G", "-t", "60"])
    assert end.state == want and end.slurm_state == state and f"({want}" in end.headline
    assert [s.step for s in end.steps] == ["0"]  # the extern step is Slurm's, not the user's
    assert (advice in end.advice[0]) if advice else end.advice == ()
    assert not any("watchdog" in d for d in end.details)  # Slurm said it: nothing inferred


def test_a_running_job_has_not_ended() -> None:
    end = explain_end(
        parse_sacct(BASE.format(state="RUNNING", exit="0:0", step="RUNNING", step_exit="0:0")), me=1
    )
    assert not end.over and "has not ended yet" in end.headline and end.efficiency == ""
