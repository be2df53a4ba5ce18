"""The %sacct/%sshare tables: hostile job names stay one escaped cell; text, HTML and JSON carry the same jobs."""

from __future__ import annotations

import json
from datetime import datetime

from slurmlab.core.slurm.sacct import parse_sacct
from slurmlab.widgets.accounting_tables import job_table, state_text, steps_table

T = datetime(2026, 12, 1, 10, 0).strftime("%Y-%m-%dT%H:%M:%S")


def _job(job_id: str, name: str, state: str = "COMPLETED", exit_code: str = "0:0") -> str:
    return (
        f"{job_id}|1000|alice|research|debug|normal|{state}|{exit_code}|00:01:00|00:10:00|{T}|{T}|{T}|node1|2|"
        f"billing=2,cpu=2,gres/gpu=1,mem=2000M,node=1|2000M||00:30.000||{name}"
    )


def test_a_hostile_name_is_one_escaped_cell_in_html_and_one_line_in_text() -> None:
    name = "<img src=x onerror=alert(1)>|x\n\tevil"
    records = parse_sacct(_job("5", name) + "\n")
    table = job_table(records, title="jobs")
    html = table._repr_html_()
    assert "<img" not in html and "&lt;img" in html
    text = table.text()
    assert len(text.splitlines()) == 3 + len(table.notes)  # title, header, one row
    row = table.rows[0]
    assert "\n" not in row["name"] and len(row["name"]) <= 30
    # the JSON keeps the name as Slurm gave it, for a program to read
    assert json.loads(table.json())["jobs"][0]["name"] == records[0].name


def test_states_read_in_words_with_slurms_word_first() -> None:
    (timeout,) = parse_sacct(_job("6", "t", "TIMEOUT", "0:15") + "\n")
    assert state_text(timeout) == "TIMEOUT: stopped at its time limit"
    (cancelled,) = parse_sacct(_job("7", "c", "CANCELLED by 1000", "0:15") + "\n")
    assert state_text(cancelled, "alice") == "CANCELLED: cancelled by alice"


def test_one_job_table_has_its_steps_and_the_efficiency_line() -> None:
    step = (
        f"8.batch|||research|||COMPLETED|0:0|00:01:00||{T}|{T}|{T}|node1|2|cpu=2,mem=2000M,node=1||"
        "512000K|00:30.000||batch"
    )
    records = parse_sacct(_job("8", "run") + "\n" + step + "\n")
    table = steps_table(records, "8", names={})
    assert [r["step"] for r in table.rows] == ["(job)", "batch"]
    assert table.rows[1]["max_rss"] == "500 MiB"
    assert table.notes[0].startswith("Efficiency of job 8: 1 GPU held")
    assert "peak memory 500 MiB of 2000 MiB" in table.text()
    assert json.loads(table.json())["efficiency"]["peak_rss_mb"] == 500


def test_an_empty_listing_says_so() -> None:
    table = job_table([], title="jobs of alice")
    assert "(no jobs)" in table.text() and "(no jobs)" in table.html()


def test_the_number_after_the_colon_is_named_a_signal_only_when_it_is_one() -> None:
    def step(n: str, exit_code: str) -> str:
        return (
            f"9.{n}|||research|||CANCELLED|{exit_code}|00:01:00||{T}|{T}|{T}|node1|2|cpu=2,mem=2000M,node=1||"
            f"512000K|00:30.000||s{n}"
        )

    lines = [
        _job("9", "run", "CANCELLED by 1000", "0:0"),
        step("0", "0:9"),
        step("1", "0:65"),
        step("2", "0:125"),
    ]
    table = steps_table(parse_sacct("\n".join(lines) + "\n"), "9", names={})
    exits = {r["step"]: r["exit"] for r in table.rows}
    assert exits["(job)"] == "0" and exits["0"] == "0, signal 9 (SIGKILL)"
    # Linux signals stop at 64: a larger number is a status of Slurm's own (slurm.h: SIG_OOM 253 -> 0:125)
    assert exits["1"] == "0, Slurm status 65 (not a signal)" and "signal 65" not in table.text()
    assert exits["2"].startswith("0, out of memory")
    assert any("Linux signals are 1-64" in note for note in table.notes)
