"""The project's own golden files of Slurm 24.11 and 26.05 (scripts/record-golden.py) parse, with no ../shared."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from slurmlab.core.slurm.parse_json import (
    json_meta,
    parse_jobs_json,
    parse_nodes_json,
    parse_partitions_json,
    parse_steps_json,
)
from slurmlab.core.slurm.parse_text import (
    parse_scontrol_jobs,
    parse_scontrol_nodes,
    parse_scontrol_partitions,
)
from slurmlab.core.slurm.squeue_brief import parse_squeue_brief

DATA = Path(__file__).resolve().parents[3] / "data" / "slurm"
VERSIONS = ["24.11", "26.05"]
_PARSERS = {
    "job": parse_jobs_json,
    "squeue": parse_jobs_json,
    "node": parse_nodes_json,
    "partition": parse_partitions_json,
    "steps": parse_steps_json,
}


def _json_files() -> list[Path]:
    return sorted(p for v in VERSIONS for p in (DATA / v).glob("*.json"))


@pytest.mark.parametrize("path", _json_files(), ids=lambda p: f"{p.parent.name}/{p.name}")
def test_every_recorded_json_parses_without_problems(path: Path) -> None:
    doc = json.loads(path.read_text())
    parser = next(f for key, f in _PARSERS.items() if key in path.name)
    problems: list = []  # type: ignore[type-arg]
    records = parser(doc, problems=problems)
    # 24.11 answers `scontrol --json show job` with an empty list (exit 0) while slurmctld is down
    assert (records or "controller_down" in path.name) and not problems
    assert json_meta(doc).version and json_meta(doc).version.startswith(path.parent.name)


@pytest.mark.parametrize("version", VERSIONS)
def test_gpu_indices_shards_and_mig_types(version: str) -> None:
    jobs = {
        j.name: j
        for j in parse_jobs_json(
            json.loads((DATA / version / "s05_scontrol_json_show_job_d.json").read_text())
        )
    }
    assert len(jobs["gpus2"].gpu_allocs[0].gpu_indices) == 2
    gpn2 = jobs["gpn2"]
    assert len(gpn2.gpu_allocs) == 2 and all(len(a.gpu_indices) == 1 for a in gpn2.gpu_allocs)
    assert gpn2.gres_binding_enforced
    assert sum(jobs["shard4"].gpu_allocs[0].shares().values()) == 4
    mig = {
        j.name: j
        for j in parse_jobs_json(
            json.loads((DATA / version / "x05_scontrol_json_show_job_d.json").read_text())
        )
    }
    assert set(mig["migjob"].gpu_allocs[0].gpu_types) == {"1g.18gb"}
    assert len(mig["migjob"].gpu_allocs[0].gpu_indices) == 2
    assert set(mig["mig3g"].gpu_allocs[0].gpu_types) == {"3g.71gb"}


def _job_json_files() -> list[Path]:
    return sorted(p for v in VERSIONS for p in (DATA / v).glob("s05_scontrol_json*_show_job_d.json"))


@pytest.mark.parametrize("path", _job_json_files(), ids=lambda p: f"{p.parent.name}/{p.name}")
def test_every_json_layout_keeps_the_cpus_and_memory_per_node_the_text_gives(path: Path) -> None:
    """Each node's CPU_IDs and memory (``job_resources``, read with the node records, which v0.0.40 needs past
    socket 0) are the text's ``Nodes=… CPU_IDs=… Mem=…``, for a job with GRES there or without; a job with
    no GRES has no GresAlloc."""
    folder = path.parent
    nodes = parse_scontrol_nodes((folder / "s08_scontrol_show_node_d.txt").read_text())
    text = {j.job_id: j for j in parse_scontrol_jobs((folder / "s06_scontrol_show_job_d.txt").read_text())}
    as_json = {j.job_id: j for j in parse_jobs_json(json.loads(path.read_text()), nodes=nodes)}
    assert as_json.keys() == text.keys()
    assert {k: j.node_resources for k, j in as_json.items()} == {k: j.node_resources for k, j in text.items()}
    no_gres = [j for j in as_json.values() if j.nodes and not j.gpu_allocs]
    assert no_gres and all(len(j.node_resources) == len(j.nodes) for j in no_gres)


@pytest.mark.parametrize("version", VERSIONS)
def test_default_partition_is_where_slurm_says_it(version: str) -> None:
    folder = DATA / version
    starred = [p[:-1] for p in (folder / "s20_sinfo_partitions.txt").read_text().split() if p.endswith("*")]
    text = parse_scontrol_partitions((folder / "s16_scontrol_show_partition.txt").read_text())
    assert starred == [p.name for p in text if p.default]
    assert [
        p.name
        for p in parse_partitions_json(
            json.loads((folder / "s09_scontrol_json_show_partition.json").read_text())
        )
    ] == [p.name for p in text]


@pytest.mark.parametrize("version", VERSIONS)
def test_owners_and_brief_states_agree_with_the_json(version: str) -> None:
    folder = DATA / version
    jobs = parse_jobs_json(json.loads((folder / "s05_scontrol_json_show_job_d.json").read_text()))
    owners = dict(line.split("|") for line in (folder / "s22_squeue_owners.txt").read_text().split())
    assert owners and all(owners[str(j.job_id)] == "0" for j in jobs if str(j.job_id) in owners)
    brief = {b.job_id: b for b in parse_squeue_brief((folder / "s21_squeue_brief.txt").read_text())}
    states = {j.job_id: j.state for j in jobs}
    assert brief and all(b.state == states[jid] for jid, b in brief.items() if jid in states)


@pytest.mark.parametrize("version", VERSIONS)
def test_refusals_are_recorded_in_slurms_words(version: str) -> None:
    uid = (DATA / version / "e13_salloc_uid.stderr").read_text()
    assert "unrecognized option" in uid and "--uid" in uid
    both = (DATA / version / "e14_salloc_gres_and_gpus_per_node.stderr").read_text()
    if version >= "26.05":
        assert "mutually exclusive" in both
