"""``slurmlab doctor``: the JSON shape, the exit codes and the text, on a FakeRunner answering with what a real
22.05 sandbox printed (tests/unit/core/diagnosis/data)."""

from __future__ import annotations

import json
from collections.abc import Iterator
from typing import Any

import pytest

from slurmlab.cli import main
from slurmlab.slurm.runner import set_runner
from slurmlab.testing import FakeRunner
from tests.unit.core.diagnosis.fake_cluster import cluster


@pytest.fixture
def use() -> Iterator[Any]:
    made: list[FakeRunner] = []
    old: list[Any] = []

    def install(fake: FakeRunner) -> FakeRunner:
        made.append(fake)
        old.append(set_runner(fake))
        return fake

    yield install
    for o in old[:1]:
        set_runner(o)
    for f in made:
        f.close()


def _json(capsys: pytest.CaptureFixture[str], *argv: str) -> tuple[int, dict[str, Any]]:
    rc = main(["doctor", *argv, "--json"])
    return rc, json.loads(capsys.readouterr().out)


def test_a_pending_job_names_its_blockers_and_a_sooner_change(
    use: Any, capsys: pytest.CaptureFixture[str]
) -> None:
    fake = use(cluster())
    rc, doc = _json(capsys, "--job", "16")
    assert rc == 0 and doc["worst"] == "WARN"  # a job waiting for GPUs is advice, not a failure
    by = {f["check"]: f for f in doc["findings"]}
    assert set(by) >= {"controller", "config.gres", "job.pending", "job.blockers", "job.alternatives", "node"}
    for f in doc["findings"]:
        assert set(f) == {"check", "title", "verdict", "subject", "evidence", "fix", "details"}
    assert by["job.pending"]["details"][0].endswith(" on node1 (squeue --start)"), by["job.pending"]
    assert any(d.startswith("job 14 ") for d in by["job.blockers"]["details"])
    assert any(d.startswith("job 15 ") for d in by["job.blockers"]["details"])
    alt = by["job.alternatives"]
    assert alt["verdict"] == "WARN" and "--gpus=4" in alt["fix"] and alt["fix"].startswith("`%scancel 16`")
    # every variant was asked of Slurm, never submitted
    asked = [a for a in fake.history if a[0] == "sbatch"]
    assert asked and all(a[1] == "--test-only" and a[-1] == "--wrap=true" for a in asked)
    # node2 is drained in the job's partition: a warning with its reason
    assert any(f["check"] == "node" and "fan failure" in f["evidence"] for f in doc["findings"])


def test_a_held_job_fails_with_exit_code_1(use: Any, capsys: pytest.CaptureFixture[str]) -> None:
    use(cluster())
    rc, doc = _json(capsys, "--job", "17")
    assert rc == 1 and doc["worst"] == "FAIL"
    held = next(f for f in doc["findings"] if f["check"] == "job.held")
    assert "scontrol release 17" in held["fix"]


def test_a_drained_node_fails_and_a_healthy_one_passes(use: Any, capsys: pytest.CaptureFixture[str]) -> None:
    use(cluster())
    rc, doc = _json(capsys, "--node", "node2")
    assert rc == 1 and doc["findings"][-1]["subject"] == "node node2"
    rc, doc = _json(capsys, "--node", "node1")
    assert rc == 0 and doc["findings"][-1]["verdict"] == "OK"
    rc, doc = _json(capsys, "--node", "nodeX")
    assert rc == 1 and "no node of that name" in doc["findings"][-1]["evidence"]


def test_a_down_controller_fails_once_and_the_rest_skip(use: Any, capsys: pytest.CaptureFixture[str]) -> None:
    fake = use(cluster(controller_up=False))
    rc, doc = _json(capsys, "--job", "16")
    assert rc == 1
    verdicts = [(f["check"], f["verdict"]) for f in doc["findings"]]
    assert verdicts == [("controller", "FAIL"), ("config.gres", "SKIP"), ("job", "SKIP"), ("node", "SKIP")]
    assert all("controller down" in f["evidence"] for f in doc["findings"][1:])
    assert [a[:2] for a in fake.history] == [["scontrol", "ping"]]


def test_text_output_is_a_table_of_verdicts(use: Any, capsys: pytest.CaptureFixture[str]) -> None:
    use(cluster())
    assert main(["doctor"]) == 0
    out = capsys.readouterr().out.splitlines()
    assert out[0].startswith("OK    controller reachable")
    assert any(line.startswith("WARN  node state [node node2]: MIXED+DRAIN: fan failure") for line in out)


@pytest.mark.parametrize("bad", ["16;rm -rf /", "-1", "x", "1" * 40])
def test_a_bad_job_id_is_one_line_and_exit_2(bad: str, use: Any, capsys: pytest.CaptureFixture[str]) -> None:
    fake = use(cluster())
    assert main(["doctor", f"--job={bad}"]) == 2
    err = capsys.readouterr().err
    assert err.startswith("slurmlab: error:") and "Traceback" not in err
    assert fake.history == []
