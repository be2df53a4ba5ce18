"""``%slurm doctor`` and ``slurmlab.doctor`` against a real Slurm, through an IPython shell as a notebook (lesson 08)
drives them: a held job and a drained node."""

from __future__ import annotations

import getpass
import json
from collections.abc import Iterator
from typing import Any

import pytest

import slurmlab
from slurmlab.core.diagnosis.findings import Report, Verdict

pytestmark = pytest.mark.sandbox


@pytest.fixture
def shell(slurm_sandbox: Any) -> Iterator[Any]:
    from IPython.testing.globalipapp import get_ipython

    ip = get_ipython()
    ip.run_line_magic("load_ext", "slurmlab")
    runner = slurm_sandbox.runner()
    job = runner.run(
        [
            "sbatch",
            "--parsable",
            "--hold",
            "-o",
            "/dev/null",
            "--chdir=/tmp",
            "--gpus=1",
            "-t",
            "5",
            "--wrap",
            "sleep 60",
        ]
    ).stdout.strip()
    node = slurm_sandbox.nodes[0]
    runner.run(["scontrol", "update", f"nodename={node}", "state=drain", "reason=lesson 08"])
    ip.user_ns.update(job=job, node=node)
    try:
        yield ip
    finally:
        runner.run(["scontrol", "update", f"nodename={node}", "state=resume"], check=False)
        runner.run(["scancel", "--user", getpass.getuser()], check=False)
        ip.run_line_magic("unload_ext", "slurmlab")  # the shell is shared with the tests after this one


def test_the_magic_shows_a_report_of_the_held_job_and_the_drained_node(shell: Any) -> None:
    report = shell.run_line_magic("slurm", "doctor --job {job} --node {node}")
    assert isinstance(report, Report) and report.exit_code() == 1
    checks = {(f.check, f.subject): f for f in report.findings}
    job, node = shell.user_ns["job"], shell.user_ns["node"]
    assert checks[("job.held", f"job {job}")].verdict is Verdict.FAIL
    drained = checks[("node", f"node {node}")]
    assert drained.verdict is Verdict.FAIL and "lesson 08" in drained.evidence
    assert f"job {job}" in report._repr_html_() and "lesson 08" in report._repr_html_()
    doc = json.loads(str(shell.run_line_magic("slurm", "doctor --json --job {job}")))
    assert doc["worst"] == "FAIL" and any(f["check"] == "job.held" for f in doc["findings"])


def test_the_library_function_is_the_same_report(shell: Any) -> None:
    job, node = shell.user_ns["job"], shell.user_ns["node"]
    report = slurmlab.doctor(job=job, node=node)
    assert [f.check for f in report.findings if f.verdict is Verdict.FAIL] == ["job.held", "node"]
