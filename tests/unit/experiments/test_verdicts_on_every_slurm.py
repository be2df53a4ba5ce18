"""I7 and the binding explanation give a verdict for every GPU job Slurm recorded, on every version and form.

Real ``scontrol show job -d`` output (text, and JSON from 23.02 on) of each Slurm: the golden files of
``tests/data/slurm/<version>/`` (a dgx-h100 sandbox, whose gres.conf is rendered from the profile as the
sandbox writes it) and, where ../shared is present, the shared fixtures (with their own gres.conf). A job's shards count as its GPU in
either of Slurm's forms. Where the node's gres.conf gives a GPU no ``Cores=`` the verdict is a SKIP that says so.
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest

from slurmlab.core.gpu.binding import HONOURED, NOT_HONOURED, UNKNOWN, TaskReport, explain
from slurmlab.core.gpu.binding import node_records as _records
from slurmlab.core.gpu.devices import Gpu, parse_cpu_list
from slurmlab.core.gpu.topology import Topology
from slurmlab.core.slurm.models import Job
from slurmlab.core.slurm.parse_json import load_json, parse_jobs_json, parse_nodes_json
from slurmlab.core.slurm.parse_text import parse_scontrol_jobs
from slurmlab.experiments.gres_conf import gpu_cores_from_gres_conf
from slurmlab.experiments.isolation_result import FAIL, INFO, PASS, SKIP
from slurmlab.experiments.slurm_view import grant_from_job, shard_gpus_of, slurm_i7
from slurmlab.sandbox.profile import load_profile
from slurmlab.sandbox.render import RenderContext, render_gres_conf
from tests.shared_paths import shared_fixtures_dir

GOLDEN = Path(__file__).resolve().parents[2] / "data" / "slurm"


@dataclass(frozen=True)
class Capture:
    label: str
    jobs_file: Path
    nodes_file: Path | None  # JSON node records: cores per socket / threads for CPU_IDs
    gres_conf: str

    def jobs(self) -> list[Job]:
        text = self.jobs_file.read_text()
        if self.jobs_file.suffix != ".json":
            return parse_scontrol_jobs(text)
        nodes = parse_nodes_json(load_json(self.nodes_file.read_text())) if self.nodes_file else None
        return parse_jobs_json(load_json(text), nodes=nodes)


def _sandbox_gres_conf(version: str) -> str:
    major, minor = (int(x) for x in version.split(".")[:2])
    ctx = RenderContext("/srv/sandbox", "vm", "user", 1, (2, 3), "/x", (major, minor), "/srv/sandbox/dev")
    return render_gres_conf(load_profile("dgx-h100"), ctx)


def _captures() -> list[Capture]:
    out = []
    for vdir in sorted(p for p in GOLDEN.glob("*") if p.is_dir()):
        conf = _sandbox_gres_conf(vdir.name)
        text, js = vdir / "s06_scontrol_show_job_d.txt", vdir / "s05_scontrol_json_show_job_d.json"
        nodes = vdir / "s07_scontrol_json_show_node.json"
        if text.is_file():
            out.append(Capture(f"{vdir.name}-text", text, None, conf))
        if js.is_file():
            out.append(Capture(f"{vdir.name}-json", js, nodes if nodes.is_file() else None, conf))
    shared = shared_fixtures_dir()
    for vdir in sorted((shared / "slurm").glob("*")) if shared else []:
        if not (vdir / "gres.conf").is_file():
            continue
        conf = (vdir / "gres.conf").read_text()
        text, js = vdir / "s06_scontrol_show_job_d.txt", vdir / "s05_scontrol_show_job_d.json"
        nodes = vdir / "s07_scontrol_show_node.json"
        if text.is_file():
            out.append(Capture(f"shared-{vdir.name}-text", text, None, conf))
        if js.is_file():
            out.append(Capture(f"shared-{vdir.name}-json", js, nodes if nodes.is_file() else None, conf))
    return out


CAPTURES = _captures()


def _gpu_jobs(jobs: list[Job]) -> list[Job]:
    return [j for j in jobs if any(a.gpu_indices for a in j.gpu_allocs) or shard_gpus_of(j)]


def _cores(conf: str, node: str) -> dict[str, str | None]:
    return {str(k): v for k, v in gpu_cores_from_gres_conf(conf, node).items()}


def _i7(job: Job, conf: str) -> Any:
    reports = [
        {
            "label": "0",
            "node": a.node,
            "cpu_affinity": [0],
            "gres_conf": {"path": "gres.conf", "cores": _cores(conf, a.node)},
        }
        for a in job.gpu_allocs
    ]
    return slurm_i7(job, reports, grant_from_job(job))


def _binding(job: Job, conf: str) -> Any:
    """The table for one task per node, as in a sandbox (2 real CPUs, so judged on Slurm's CPU_IDs)."""
    topologies = {}
    for a in job.gpu_allocs:
        gpus = tuple(
            Gpu(i, f"GPU{i}", parse_cpu_list(c) if c else None)
            for i, c in sorted(gpu_cores_from_gres_conf(conf, a.node).items())
        )
        topologies[a.node] = Topology(gpus)
    tasks = [
        TaskReport(r, a.node, a.gpu_indices or None, None, frozenset({0}), 2)
        for r, a in enumerate(job.gpu_allocs)
    ]
    return explain(tasks, topologies, _records(job), tres_bind="gres/gpu:closest", enforce_binding=True)


def _judgeable(job: Job, conf: str) -> set[str]:
    """The nodes where gres.conf ties every GPU the job holds to cores (elsewhere "unknown" is right)."""
    shards = shard_gpus_of(job)
    return {
        a.node
        for a in job.gpu_allocs
        if all(_cores(conf, a.node).get(str(i)) for i in (a.gpu_indices or shards.get(a.node, ())))
    }


@pytest.mark.parametrize("cap", CAPTURES, ids=[c.label for c in CAPTURES])
def test_every_gpu_job_gets_an_i7_and_binding_verdict(cap: Capture) -> None:
    jobs = _gpu_jobs(cap.jobs())
    assert jobs, f"no GPU job in {cap.jobs_file}"
    judged = 0
    for job in jobs:
        i7, table = _i7(job, cap.gres_conf), _binding(job, cap.gres_conf)
        nodes = _judgeable(job, cap.gres_conf)
        if not nodes:
            assert i7.status == SKIP and "no Cores=" in i7.reason, (job.job_id, i7)
        else:
            assert i7.status in (PASS, FAIL, INFO), (cap.label, job.job_id, i7.reason)
        for row in table.rows:
            if row.node in nodes:
                judged += 1
                assert row.closest in (HONOURED, NOT_HONOURED), (cap.label, job.job_id, row.why)
                assert row.enforce in (HONOURED, NOT_HONOURED), (cap.label, job.job_id, row.why)
            else:
                assert (row.closest, row.enforce) == (UNKNOWN, UNKNOWN), (cap.label, job.job_id, row)
                assert all("are unknown" in w for w in row.why), row.why
    assert judged, f"every GPU job of {cap.jobs_file} sits on GPUs without Cores="


def _verdicts(cap: Capture) -> dict[int, tuple[str, tuple[tuple[str, str, str], ...]]]:
    out = {}
    for job in _gpu_jobs(cap.jobs()):
        table = _binding(job, cap.gres_conf)
        out[job.job_id] = (
            _i7(job, cap.gres_conf).status,
            tuple((r.node, r.closest, r.enforce) for r in table.rows),
        )
    return out


_PAIRS = [
    (t, j)
    for t in CAPTURES
    for j in CAPTURES
    if t.label.endswith("-text") and j.label == t.label[: -len("text")] + "json"
]


@pytest.mark.parametrize("text,js", _PAIRS, ids=[t.label[: -len("-text")] for t, _ in _PAIRS])
def test_json_jobs_get_the_same_verdicts_as_the_text_form(text: Capture, js: Capture) -> None:
    assert _verdicts(js) == _verdicts(text)


_GOLDEN_CAPS = [c for c in CAPTURES if not c.label.startswith("shared-")]


@pytest.mark.parametrize("cap", _GOLDEN_CAPS, ids=[c.label for c in _GOLDEN_CAPS])
def test_shards_are_judged_on_their_gpu_in_every_form(cap: Capture) -> None:
    # the same shard job (shard4, 4 shards of GPU 1 on node1) recorded by every version, text and JSON:
    # 22.05 writes (IDX:1), 24.11 and later per-GPU counts (0/4,4/4,0/4,...)
    (job,) = [j for j in cap.jobs() if j.name == "shard4"]
    assert shard_gpus_of(job) == {"node1": [1]}, cap.label
    (rec,) = _records(job)
    assert rec.shard_gpus == (1,) and rec.cpu_ids == frozenset({1})
    assert _binding(job, cap.gres_conf).rows[0].gpus == (1,)


def test_every_golden_version_is_judged() -> None:
    assert {c.label for c in _GOLDEN_CAPS} >= {
        "22.05-text",
        "24.11-text",
        "24.11-json",
        "26.05-text",
        "26.05-json",
    }


def test_shards_are_judged_on_their_gpu_in_both_forms() -> None:
    # extra: the same shard job recorded by 22.05 (IDX:3) and 24.11 (0/4,0/4,0/4,4/4) in the shared fixtures
    shard_caps = [c for c in CAPTURES if c.label.startswith("shared-") and c.label.endswith("-text")]
    if not shard_caps:
        pytest.skip("no shared fixtures here (extra test of the real-cluster capture)")
    for cap in shard_caps:
        (job,) = [j for j in cap.jobs() if j.name == "shard4"]
        assert shard_gpus_of(job) == {"node1": [3]}, cap.label
        (rec,) = _records(job)
        assert rec.shard_gpus == (3,) and rec.cpu_ids == frozenset({26})
        assert _binding(job, cap.gres_conf).rows[0].gpus == (3,)
