"""The project's own Slurm 22.05 recordings (scripts/record-golden.py) parse, with no ../shared: the text forms
22.05 has instead of ``scontrol --json``, agreeing with its ``squeue --json`` and the cheap squeue forms."""

from __future__ import annotations

import json
from datetime import timezone
from pathlib import Path

from slurmlab.core.slurm.models import Job
from slurmlab.core.slurm.parse_json import parse_jobs_json
from slurmlab.core.slurm.parse_text import (
    parse_scontrol_jobs,
    parse_scontrol_nodes,
    parse_scontrol_partitions,
)
from slurmlab.core.slurm.squeue_brief import parse_squeue_brief

DATA = Path(__file__).resolve().parents[3] / "data" / "slurm" / "22.05"


def _text_jobs(name: str) -> dict[int, Job]:
    problems: list = []  # type: ignore[type-arg]
    jobs = parse_scontrol_jobs((DATA / name).read_text(), tz=timezone.utc, problems=problems)
    assert jobs and not problems
    return {j.job_id: j for j in jobs}


def test_text_jobs_agree_with_squeue_json() -> None:
    text = _text_jobs("s06_scontrol_show_job_d.txt")
    # the node records give v0.0.38's cores past socket 0 their CPU ids
    nodes = parse_scontrol_nodes((DATA / "s08_scontrol_show_node_d.txt").read_text())
    as_json = {
        j.job_id: j for j in parse_jobs_json(json.loads((DATA / "s01_squeue.json").read_text()), nodes=nodes)
    }
    assert text.keys() == as_json.keys()
    for jid, tj in text.items():
        jj = as_json[jid]
        assert (tj.state, tj.reason, tj.nodes, tj.time_limit) == (
            jj.state,
            jj.reason,
            jj.nodes,
            jj.time_limit,
        ), jid
        assert [a.items for a in tj.gpu_allocs] == [a.items for a in jj.gpu_allocs], jid
        assert tj.node_resources == jj.node_resources, jid


def test_every_node_block_keeps_its_cpus_and_memory_gres_or_not() -> None:
    """A job whose node block names no GRES (``GRES=``: donejob and failjob asked none, cancelme's GPU went with
    its end) has its CPU_IDs and memory per node all the same, and no GresAlloc: gpu_allocs are GPUs only."""
    jobs = {j.name: j for j in _text_jobs("s06_scontrol_show_job_d.txt").values()}
    held = [j for j in jobs.values() if j.nodes]
    no_gres = [jobs[name] for name in ("donejob", "cancelme", "failjob")]
    assert [(j.gpu_allocs, [r.node for r in j.node_resources]) for j in no_gres] == [((), ["node1"])] * 3
    assert all([r.node for r in j.node_resources] == list(j.nodes) for j in held)
    assert all(r.cpu_ids and r.mem_mb for j in held for r in j.node_resources)
    gpn2 = jobs["gpn2"]
    assert [(r.node, r.cpu_ids) for r in gpn2.node_resources] == [
        (a.node, a.cpu_ids) for a in gpn2.gpu_allocs
    ]


def test_gpu_indices_and_shards_from_the_text_form() -> None:
    jobs = {j.name: j for j in _text_jobs("s06_scontrol_show_job_d.txt").values()}
    assert len(jobs["gpus2"].gpu_allocs[0].gpu_indices) == 2
    assert len(jobs["gpn2"].gpu_allocs) == 2 and jobs["gpn2"].gres_binding_enforced
    assert sum(jobs["shard4"].gpu_allocs[0].shares().values()) == 4
    mig = {j.name: j for j in _text_jobs("x06_scontrol_show_job_d.txt").values()}
    assert set(mig["migjob"].gpu_allocs[0].gpu_types) == {"1g.18gb"}


def test_nodes_partitions_and_the_default_partition() -> None:
    problems: list = []  # type: ignore[type-arg]
    nodes = parse_scontrol_nodes((DATA / "s08_scontrol_show_node_d.txt").read_text(), problems=problems)
    assert [n.name for n in nodes] == ["node1", "node2"] and not problems
    assert all(n.gpu_types() == {"h100": 8} for n in nodes)
    parts = parse_scontrol_partitions((DATA / "s16_scontrol_show_partition.txt").read_text())
    starred = [p[:-1] for p in (DATA / "s20_sinfo_partitions.txt").read_text().split() if p.endswith("*")]
    assert starred == [p.name for p in parts if p.default]


def test_brief_states_and_owners_agree_with_the_text_form() -> None:
    text = _text_jobs("s06_scontrol_show_job_d.txt")
    brief = {b.job_id: b for b in parse_squeue_brief((DATA / "s21_squeue_brief.txt").read_text())}
    assert brief and all(b.state == text[jid].state for jid, b in brief.items() if jid in text)
    owners = dict(line.split("|") for line in (DATA / "s22_squeue_owners.txt").read_text().split())
    assert owners and set(owners.values()) == {"0"}


def test_the_recorded_life_of_one_allocation() -> None:
    states = [
        parse_squeue_brief((DATA / f"{p}_squeue_brief_{s}.txt").read_text())[0]
        for p, s in (("l02", "pending"), ("l06", "running"), ("l12", "cancelled"))
    ]
    assert [(b.job_id, b.state) for b in states] == [(19, "PENDING"), (19, "RUNNING"), (19, "CANCELLED")]
    assert states[0].reason == "Resources"
    running = _text_jobs("l06_scontrol_show_job_d_running.txt")[19]
    assert running.comment.startswith("slurmlab:") and len(running.gpu_allocs[0].gpu_indices) == 2
