"""The sacct parser on real recordings of 22.05, 24.11 and 26.05 (scripts/record_sacct.py) and on hostile text."""

from __future__ import annotations

import ast
import random
import time
from pathlib import Path

import pytest

from slurmlab.core.slurm.sacct import SACCT_FIELDS, SacctRecord, parse_sacct
from slurmlab.core.slurm.states import JOB_STATES
from slurmlab.errors import ParseError
from slurmlab.slurm.accounting_queries import sacct_argv

DATA = Path(__file__).resolve().parents[3] / "data" / "slurm"
VERSIONS = sorted(p.parent.parent.name for p in DATA.glob("*/sacct/a01_sacct_jobs.txt"))


def recording(version: str) -> tuple[dict[str, str], dict[str, list[SacctRecord]]]:
    """(job name -> id as the workload named them, id -> records) of one version's recording."""
    folder = DATA / version / "sacct"
    header = (folder / "commands.txt").read_text().splitlines()[0]
    ids: dict[str, str] = ast.literal_eval(header.split("jobs ", 1)[1])
    by_id: dict[str, list[SacctRecord]] = {}
    for r in parse_sacct((folder / "a01_sacct_jobs.txt").read_text()):
        by_id.setdefault(r.job_id, []).append(r)
    return ids, by_id


def own(records: list[SacctRecord]) -> SacctRecord:
    (job,) = [r for r in records if r.is_job]
    return job


def steps(records: list[SacctRecord]) -> dict[str, SacctRecord]:
    return {r.step: r for r in records if r.step is not None}


def test_the_recordings_of_every_version_are_present() -> None:
    assert VERSIONS, "no sacct recording: run scripts/record_sacct.py"


@pytest.mark.parametrize("version", VERSIONS)
def test_every_job_of_the_workload_is_read_with_its_steps(version: str) -> None:
    ids, by_id = recording(version)
    assert set(by_id) == set(ids.values())
    for records in by_id.values():
        job = own(records)
        assert job.state in JOB_STATES and job.user and job.uid is not None
        assert job.time_limit == (60 if job.job_id == ids["timeout"] else 300)
        assert job.start is not None and job.end is not None and job.end >= job.start
        assert job.elapsed == int((job.end - job.start).total_seconds())
        assert all(s.user == "" and s.time_limit is None for s in records if not s.is_job)


@pytest.mark.parametrize("version", VERSIONS)
def test_states_exit_codes_and_who_cancelled(version: str) -> None:
    ids, by_id = recording(version)
    assert (own(by_id[ids["done"]]).state, own(by_id[ids["done"]]).exit.ok) == ("COMPLETED", True)  # type: ignore[union-attr]
    fail = own(by_id[ids["fail"]])
    assert fail.state == "FAILED" and (fail.exit.code, fail.exit.signal) == (3, 0)  # type: ignore[union-attr]
    assert own(by_id[ids["timeout"]]).state == "TIMEOUT"
    cancel = own(by_id[ids["cancelme"]])
    assert cancel.state == "CANCELLED" and cancel.cancelled_by == cancel.uid
    per_step = {s.name: (s.state, s.exit.code) for s in steps(by_id[ids["steps"]]).values()}  # type: ignore[union-attr]
    assert per_step["ok"] == ("COMPLETED", 0) and per_step["bad"] == ("FAILED", 2)
    alloc = steps(by_id[ids["alloc"]])
    assert {s.name: s.exit.code for s in alloc.values() if s.name in ("hello", "four")} == {
        "hello": 0,
        "four": 4,
    }  # type: ignore[union-attr]


@pytest.mark.parametrize("version", VERSIONS)
def test_memory_gpus_and_cpu_time(version: str) -> None:
    ids, by_id = recording(version)
    oom = by_id[ids["oom"]]
    assert own(oom).req_mem_mb == 200
    eat = next(s for s in oom if s.name == "eat")
    assert eat.max_rss_mb is not None and eat.max_rss_mb > 400  # 600 MiB touched before the kill
    gpu = own(by_id[ids["gpu"]])
    assert gpu.gpus == 1 and gpu.tres is not None and gpu.tres.gpus == 1 and gpu.cpus == 1
    assert own(by_id[ids["done"]]).gpus == 0
    assert all(r.total_cpu is not None and r.total_cpu >= 0 for rs in by_id.values() for r in rs)


@pytest.mark.parametrize("version", VERSIONS)
def test_a_name_with_a_bar_and_a_newline_stays_the_name(version: str) -> None:
    ids, by_id = recording(version)
    name = next(n for n in ids if "|" in n)
    job = own(by_id[ids[name]])
    assert job.name == name and job.state == "COMPLETED" and job.partition


def test_the_argv_asks_for_the_fields_in_the_parsers_order() -> None:
    argv = sacct_argv("-j", "12")
    assert argv[:3] == ["sacct", "--parsable2", "--noheader"]
    assert argv[3] == "--format=" + ",".join(SACCT_FIELDS) and argv[-2:] == ["-j", "12"]
    assert SACCT_FIELDS[-1] == "JobName"  # the free-text field last: a '|' in it cannot shift the others


LINE = (
    "12|1000|alice|research|debug|normal|{state}|{exit}|00:01:05|{limit}|2026-12-01T11:00:00|"
    "2026-12-01T11:00:01|2026-12-01T11:01:06|{nodes}|2|billing=2,cpu=2,gres/gpu=1,mem=2000M,node=2|"
    "2000M|{rss}|{cpu}|gres/gpuutil=42|{name}"
)


def line(**over: str) -> str:
    base = {
        "state": "COMPLETED",
        "exit": "0:0",
        "limit": "00:05:00",
        "nodes": "node[1-2]",
        "rss": "",
        "cpu": "01:02.500",
        "name": "x",
    }
    return LINE.format(**{**base, **over})


def test_fields_are_read_by_the_shared_helpers() -> None:
    (r,) = parse_sacct(line(state="CANCELLED by 1000", exit="0:15", limit="UNLIMITED", rss="1048576K"))
    assert (r.state, r.cancelled_by, r.exit.signal) == ("CANCELLED", 1000, 15)  # type: ignore[union-attr]
    assert r.time_limit is None and r.elapsed == 65 and r.nodes == ("node1", "node2")
    assert r.max_rss_mb == 1024 and r.total_cpu == pytest.approx(62.5) and r.gpu_util_percent == 42
    assert parse_sacct(line(cpu="1-02:03:04"))[0].total_cpu == 93784
    assert parse_sacct(line(nodes="None assigned"))[0].nodes == ()
    # seen on 22.05: slurmdbd's first record of a just-started job, QOS Unknown and ReqMem "16?"
    early = line().replace("|normal|", "|Unknown|").replace("|2000M|", "|16?|")
    assert parse_sacct(early)[0].req_mem_mb is None and parse_sacct(early)[0].qos == "Unknown"
    assert parse_sacct("") == [] and parse_sacct("\n") == []
    assert r.to_dict()["elapsed_text"] == "00:01:05"


@pytest.mark.parametrize(
    "bad",
    [
        line(state="cancelled"),
        line(state="RUNNING by x"),
        line(exit="zero"),
        line(limit="1:2:3:4:5"),
        line(nodes="node[1-"),
        line(rss="lots"),
        line(cpu="1.5.5"),
        line().replace("billing=2", "billing"),
        line().replace("2026-12-01T11:00:00", "yesterday"),
        line().replace("|2|", "|two|"),
        "x" * 5000,
        "12|only|three",
        "１２|" + "|" * 20,
    ],
)
def test_garbage_raises_parse_error_naming_the_record(bad: str) -> None:
    with pytest.raises(ParseError) as err:
        parse_sacct(bad)
    assert "cannot parse" in str(err.value)


def test_a_name_that_forges_a_record_on_its_next_line_only_fools_its_owner() -> None:
    text = line(name="evil\n" + line(state="COMPLETED").replace("12|1000|alice", "99|0|root"))
    records = parse_sacct(text)
    # the forged line is a record of its own, but it cannot change job 12's fields
    assert records[0].job_id == "12" and records[0].user == "alice" and records[0].name == "evil"


def test_hostile_sizes_parse_in_bounded_time() -> None:
    big = "\n".join(line(name="n|" * 200) for _ in range(2000)) + "\n" + "y" * 200_000
    start = time.process_time()
    records = parse_sacct(big)
    assert len(records) == 2000 and records[-1].name.endswith("y" * 10)
    # not a timing assertion on speed, only a guard against a quadratic blow-up
    assert time.process_time() - start < 20


def _mutations(text: str, rng: random.Random, n: int) -> list[str]:
    """Corrupted copies of a recording: bytes flipped, lines cut, fields doubled or dropped, hostile characters."""
    out = []
    junk = [
        "|",
        "\n",
        "",
        "-",
        ":",
        "=",
        ",",
        "\x00",
        "٣",
        "9" * 30,
        "None assigned",
        "UNLIMITED",
        "by",
        "?",
        "[",
        "]",
    ]
    for _ in range(n):
        chars = list(text)
        for _ in range(rng.randint(1, 6)):
            i = rng.randrange(len(chars))
            op = rng.randrange(3)
            if op == 0:
                chars[i] = rng.choice(junk)
            elif op == 1:
                del chars[i : i + rng.randint(1, 40)]
            else:
                chars.insert(i, rng.choice(junk))
        out.append("".join(chars))
    return out


@pytest.mark.parametrize("version", VERSIONS)
def test_corrupted_recordings_raise_only_parse_error_and_the_judgement_never_crashes(version: str) -> None:
    from slurmlab.core.diagnosis.efficiency import efficiencies
    from slurmlab.core.diagnosis.ended import explain_end

    rng = random.Random(f"sacct-{version}")  # the same corruptions on every run
    text = (DATA / version / "sacct" / "a01_sacct_jobs.txt").read_text()
    read = 0
    for bad in _mutations(text, rng, 300):
        try:
            records = parse_sacct(bad)
        except ParseError:
            continue
        read += 1
        efficiencies(records)
        for jid in {r.job_id for r in records}:
            explain_end([r for r in records if r.job_id == jid], me=0, argv=["-t", "5"]).text()
    assert read  # some corruptions still parse, and then the judgement takes them
