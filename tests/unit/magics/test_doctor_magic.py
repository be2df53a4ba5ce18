"""``%slurm doctor``: the report as a table in the notebook, ``--json`` as text, bad input as one-line errors;
on a FakeRunner answering with what a real 22.05 sandbox printed."""

from __future__ import annotations

import json
from collections.abc import Iterator
from typing import Any

import pytest
from IPython.core.error import UsageError

from slurmlab.core.diagnosis.findings import Report
from slurmlab.slurm.runner import set_runner
from tests.unit.core.diagnosis.fake_cluster import cluster


@pytest.fixture
def doc_ip(ip: Any) -> Iterator[Any]:
    fake = cluster()
    old = set_runner(fake)
    try:
        yield ip
    finally:
        set_runner(old)
        fake.close()


def test_doctor_returns_a_report_that_draws_a_table(doc_ip: Any) -> None:
    report = doc_ip.run_line_magic("slurm", "doctor --job 16")
    assert isinstance(report, Report)
    html = report._repr_html_()
    assert html.startswith("<table class='slurmlab-Doctor'>") and "job 16" in html and "%salloc" in html
    assert [f.check for f in report.findings][:3] == ["controller", "config.gres", "job.pending"]


def test_doctor_json_is_text_a_script_can_load(doc_ip: Any) -> None:
    out = doc_ip.run_line_magic("slurm", "doctor --json --node node2")
    doc = json.loads(str(out))
    assert doc["worst"] == "FAIL" and repr(out) == str(out)


def test_doctor_takes_variables_from_the_namespace(doc_ip: Any) -> None:
    doc_ip.user_ns["job"] = 17
    report = doc_ip.run_line_magic("slurm", "doctor --job {job}")
    assert any(f.check == "job.held" for f in report.findings) and report.exit_code() == 1


@pytest.mark.parametrize(
    "line, said",
    [
        ("doctor --job 'x;y'", "--job"),
        ("doctor --frobnicate", "does not take"),
        ("doctor --job", "--job"),
    ],
)
def test_bad_doctor_lines_are_usage_errors(doc_ip: Any, line: str, said: str) -> None:
    with pytest.raises(UsageError) as err:
        doc_ip.run_line_magic("slurm", line)
    assert said in str(err.value)
