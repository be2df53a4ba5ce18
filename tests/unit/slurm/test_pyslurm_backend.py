"""The pyslurm backend (SLURMLAB_BACKEND=pyslurm) against a stand-in built from pyslurm 25.11.2's source.

pyslurm cannot be built here (it needs Slurm 25.11); pyslurm_standin.py is its API, read from PySlurm/pyslurm
v25.11.2 (the files are named there), answering from job records that a real Slurm printed.
"""

from __future__ import annotations

import ast
import json
import os
import pwd
import sys
from dataclasses import replace
from datetime import datetime, timezone
from pathlib import Path

import pyslurm_standin
import pytest
from fake_slurm import JOB, VERSION
from pyslurm_standin import (
    JOB_ATTRIBUTES,
    MODULE_ATTRIBUTES,
    SLURMCTLD_COMMUNICATIONS_CONNECTION_ERROR,
    Controller,
    SlurmJobInfo,
    info_from_scontrol_json,
)

from slurmlab.core.slurm.squeue_brief import parse_squeue_brief
from slurmlab.errors import ControllerDownError, SlurmError
from slurmlab.slurm import pyslurm_backend, queries
from slurmlab.slurm.runner import Runner, set_runner
from slurmlab.testing import FakeRunner

DATA = Path(__file__).resolve().parents[2] / "data" / "slurm"
RUNNING, PENDING = 1, 0  # enum job_states (slurm.h)


@pytest.fixture
def standin(monkeypatch: pytest.MonkeyPatch) -> Controller:
    """pyslurm is the stand-in, talking to an empty controller; the user asked for it; no SLURM_CONF."""
    ctl = Controller()
    monkeypatch.setattr(pyslurm_standin, "controller", ctl)
    monkeypatch.setitem(sys.modules, "pyslurm", pyslurm_standin.module())
    monkeypatch.setenv("SLURMLAB_BACKEND", "pyslurm")
    monkeypatch.delenv("SLURM_CONF", raising=False)
    monkeypatch.setattr(pyslurm_backend, "_imported_with", [], raising=False)
    return ctl


def test_a_running_job_on_node1_holding_gpus_reads_with_its_node_gpus_and_times(standin: Controller) -> None:
    now = 1_796_088_494
    standin.now = lambda: now
    standin.jobs.append(
        SlurmJobInfo(
            job_id=101,
            job_state=RUNNING,
            name=b"train",
            user_id=os.getuid(),
            start_time=now - 60,
            end_time=now - 60 + 1800,
            time_limit=30,
            num_nodes=1,
            nodes=b"node1",
            partition=b"gpu",
            tres_per_node=b"gres/gpu:h100:2",
        )
    )
    brief = queries.brief_states(["101"], Runner())["101"]
    assert (brief.state, brief.reason, brief.nodelist, brief.nodes) == ("RUNNING", None, "node1", ("node1",))
    assert [(g.name, g.type, g.count) for g in brief.tres_per_node] == [("gpu", "h100", 2)]
    assert (brief.time_limit, brief.time_used, brief.time_left) == (1800, 60, 1740)
    assert brief.start_time == datetime.fromtimestamp(now - 60, timezone.utc)
    assert brief.end_time == datetime.fromtimestamp(now + 1740, timezone.utc)
    assert (brief.user, brief.partition, brief.num_nodes) == (pwd.getpwuid(os.getuid()).pw_name, "gpu", 1)
    assert (brief.display_id, brief.array_job_id, brief.array_task, brief.name) == (
        "101",
        None,
        None,
        "train",
    )
    # one job: what pyslurm's Job.load costs (the job, and the steps of a job that is not pending)
    assert standin.rpcs == ["slurm_load_job", "slurm_get_job_steps"]


@pytest.mark.parametrize("version", ["24.11", "26.05"])
def test_every_recorded_job_reads_as_squeue_printed_it(standin: Controller, version: str) -> None:
    # one moment of a real sandbox: the job records (scontrol --json) and squeue's brief lines of the same jobs;
    # running, pending, held, finished, a job on node[1-2] with a GPU on each, shards, an array's task 0 and
    # its pending tasks with a %3 limit
    folder = DATA / version
    records = json.loads((folder / "s05_scontrol_json_show_job_d.json").read_text())["jobs"]
    standin.jobs.extend(info_from_scontrol_json(r) for r in records)
    printed = {
        b.job_id: b for b in parse_squeue_brief((folder / "s21_squeue_brief.txt").read_text(), timezone.utc)
    }
    # when squeue ran: a running job's start plus the time squeue says it had used
    running = next(b for b in printed.values() if b.state == "RUNNING")
    assert running.start_time is not None and running.time_used is not None
    squeue_ran = int(running.start_time.timestamp()) + running.time_used
    standin.now = lambda: squeue_ran
    ids = [str(i) for i in printed]
    together = pyslurm_backend.brief_states(ids)
    rpcs_together = list(standin.rpcs)
    one_by_one = {}
    for jid in ids:
        one_by_one.update(pyslurm_backend.brief_states([jid]))
    names = {r["job_id"]: r["name"] for r in records}
    for answer in (together, one_by_one):
        assert set(answer) == set(ids)
        for job_id, from_squeue in printed.items():
            brief = answer[str(job_id)]
            assert brief.name == names[job_id]  # squeue's brief form leaves the name out
            assert replace(brief, name="") == from_squeue, job_id
    assert rpcs_together == ["slurm_load_jobs"]  # several ids: one RPC, as squeue -j A,B makes


def test_a_purged_job_is_absent_and_a_down_controller_says_so_with_the_next_step(standin: Controller) -> None:
    assert queries.brief_states(["77"], Runner()) == {}
    standin.fail_with = SLURMCTLD_COMMUNICATIONS_CONNECTION_ERROR
    for ids in (["77"], ["77", "78"]):
        with pytest.raises(ControllerDownError) as down:
            queries.brief_states(ids, Runner())
        assert "Unable to contact slurm controller" in str(down.value) and down.value.hint


def test_a_name_that_is_not_utf8_or_forges_a_record_changes_nothing_else(standin: Controller) -> None:
    standin.jobs += [
        SlurmJobInfo(job_id=5, job_state=PENDING, name=b"bad\xff", state_reason="Resources", num_nodes=1),
        SlurmJobInfo(
            job_id=6,
            job_state=RUNNING,
            name=b"a\nJobId=5 JobName=x",
            nodes=b"node1",
            num_nodes=1,
            start_time=1,
            end_time=2,
        ),
    ]
    for ids in (["5"], ["5", "6"]):
        got = queries.brief_states(ids, Runner())
        assert (got["5"].name, got["5"].state, got["5"].reason) == ("", "PENDING", "Resources")
    assert (got["6"].name, got["6"].nodes) == ("a\nJobId=5 JobName=x", ("node1",))


def test_pyslurm_answers_only_for_the_slurm_it_was_imported_with(
    standin: Controller, fake: FakeRunner, monkeypatch: pytest.MonkeyPatch
) -> None:
    standin.jobs.append(SlurmJobInfo(job_id=int(JOB), job_state=RUNNING, nodes=b"elsewhere"))
    fake.replay(f"{VERSION}/l06_squeue_brief_running.txt")
    # a replaying runner (as a sandbox's runner) names its own slurm.conf: squeue answers, pyslurm is not asked
    assert queries.brief_states([JOB], fake)[JOB].nodes == ("node1",)
    assert standin.rpcs == [] and fake.calls == 1
    # None: the process-wide runner, here a plain one (an earlier test of the same worker may have left another)
    before = set_runner(Runner())
    try:
        assert pyslurm_backend.serves(Runner()) and pyslurm_backend.serves(None)
    finally:
        set_runner(before)
    assert not pyslurm_backend.serves(Runner(slurm_conf="/srv/sandbox/etc/slurm.conf"))
    assert not pyslurm_backend.serves(Runner(cluster="other"))
    monkeypatch.setenv("SLURM_CONF", "/etc/other/slurm.conf")  # after the import: libslurm keeps its first
    assert not pyslurm_backend.serves(Runner())


def test_a_pyslurm_without_an_attribute_read_fails_loudly_naming_the_checked_version(
    standin: Controller, monkeypatch: pytest.MonkeyPatch
) -> None:
    standin.jobs.append(SlurmJobInfo(job_id=9, job_state=RUNNING, nodes=b"node1"))
    monkeypatch.delattr(pyslurm_standin.Job, "allocated_nodes")  # as a release that renamed it would be
    with pytest.raises(SlurmError) as info:
        queries.brief_states(["9"], Runner())
    assert "allocated_nodes" in str(info.value) and "pyslurm 25.11.2" in (info.value.hint or "")


def _reads(tree: ast.AST, of: str) -> set[str]:
    """Attributes read of the name ``of`` in the backend's source: ``of.x`` and ``getattr(of, "x", ...)``."""
    out = set()
    for node in ast.walk(tree):
        if isinstance(node, ast.Attribute) and isinstance(node.value, ast.Name) and node.value.id == of:
            out.add(node.attr)
        if (
            isinstance(node, ast.Call)
            and isinstance(node.func, ast.Name)
            and node.func.id == "getattr"
            and isinstance(node.args[0], ast.Name)
            and node.args[0].id == of
            and isinstance(node.args[1], ast.Constant)
        ):
            out.add(str(node.args[1].value))
    return out


def test_the_backend_reads_only_what_pyslurm_25_11_has() -> None:
    tree = ast.parse(Path(pyslurm_backend.__file__).read_text())
    assert _reads(tree, "job") <= JOB_ATTRIBUTES
    assert _reads(tree, "pyslurm") <= MODULE_ATTRIBUTES
    declared = {n for n in vars(getattr(pyslurm_backend, "PyslurmJob", object)) if not n.startswith("_")}
    assert _reads(tree, "job") <= declared <= JOB_ATTRIBUTES


def test_the_standin_has_nothing_pyslurm_lacks() -> None:
    assert {n for n in dir(pyslurm_standin.Job) if not n.startswith("_")} <= JOB_ATTRIBUTES
    assert {
        n for n in vars(pyslurm_standin.module()) if not n.startswith("__") or n == "__version__"
    } <= MODULE_ATTRIBUTES
    job = pyslurm_standin.Job(1)
    with pytest.raises(AttributeError, match="no attribute 'nodes'"):
        _ = job.nodes
    with pytest.raises(AttributeError):
        job.nodes = "node1"  # type: ignore[attr-defined]  # __slots__, as the cdef class


def test_the_standins_state_names_are_slurmlabs() -> None:
    # the stand-in keeps slurm.h's enum order (a state number indexes it), which core's sets cannot give; what it
    # names must still be what slurmlab reads, or a state added on one side only would go unnoticed
    from slurmlab.core.slurm import states

    assert set(pyslurm_standin.BASE_STATES) == states.BASE_STATES
    assert {name for name, _ in pyslurm_standin.STATE_FLAGS} <= states.STATE_FLAGS
