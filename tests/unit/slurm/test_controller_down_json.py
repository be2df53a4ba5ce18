"""Slurm 24.11+ ``scontrol --json show job`` with slurmctld stopped exits 0 with ``"jobs": []`` and no error
(recorded from the sandbox: l24_*); it must read as a down controller, never as "you have no jobs"."""

from __future__ import annotations

import json

import pytest
from fake_slurm import golden_path

from slurmlab.errors import ControllerDownError
from slurmlab.slurm.job_queries import _read_jobs
from slurmlab.slurm.runner import RunResult

ARGV = ("scontrol", "--json", "show", "job", "-d")


def _result(text: str) -> RunResult:
    return RunResult(ARGV, 0, text, "", 0.01)


@pytest.mark.parametrize("version", ["24.11", "26.05"])
def test_the_recorded_silent_answer_is_a_down_controller(version: str) -> None:
    text = golden_path(version, "l24_scontrol_json_show_job_d_controller_down.json").read_text()
    with pytest.raises(ControllerDownError, match="did not answer") as info:
        _read_jobs(_result(text), True)
    assert "scontrol ping" in str(info.value)


@pytest.mark.parametrize("version", ["24.11", "26.05"])
def test_an_empty_queue_from_a_live_controller_is_no_jobs(version: str) -> None:
    # the same answer from a live controller carries its last update time
    doc = json.loads(golden_path(version, "s05_scontrol_json_show_job_d.json").read_text())
    assert doc["jobs"] and doc["last_update"]["number"] > 0
    doc["jobs"] = []
    assert list(_read_jobs(_result(json.dumps(doc)), True)) == []
