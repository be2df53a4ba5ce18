"""``slurmlab doctor --job`` on a job the user's QOS GPU cap holds (issue 25, point 8), replayed from what a real
Slurm 22.05 printed (``22.05/limits``, scene ``k``): it names the same limit and what lifts it as ``alloc.why()``,
and lists the same changes — only those no limit would hold (QOS debug), never the shorter time or fewer GPUs
that ``sbatch --test-only`` alone would start."""

from __future__ import annotations

from slurmlab.core.diagnosis.findings import Verdict
from slurmlab.slurm.doctor import doctor
from slurmlab.testing import FakeRunner
from tests.unit.core.diagnosis.limit_scenes import LIMITS, scene_job, scene_names, scene_running


def test_the_doctor_names_the_limit_and_offers_only_what_lifts_it() -> None:
    with FakeRunner() as fake:
        # the recording's process knew the version already (why() had asked it, scene q, just before)
        fake.replay(f"{LIMITS}/q01_sinfo_version.txt", *(f"{LIMITS}/{n}" for n in scene_names("k")))
        report = doctor(fake, job=scene_job("k"))
    found = {f.check: f for f in report.findings}
    limit = found["job.limit"]
    assert limit.verdict is Verdict.WARN
    assert limit.evidence == "QOS normal limit MaxTRESPU: 4 GPU(s) in use of 4 GPU(s) allowed"
    assert f"end your job {scene_running('k')}" in limit.fix and "QOS debug instead of normal" in limit.fix
    alternatives = found["job.alternatives"]
    assert alternatives.evidence.endswith("best: QOS debug instead of normal")
    assert "--qos=debug" in alternatives.fix
    offered = [d for d in alternatives.details if not d.startswith(("(not sooner)", "sooner means"))]
    assert len(offered) == 1 and offered[0].startswith("QOS debug instead of normal: would start")
    held = [d for d in alternatives.details if "not offered: it would wait for QOS normal MaxTRESPU" in d]
    assert any(d.startswith("(not sooner) -t ") for d in held)
    assert [a[:2] for a in fake.history].count(["sbatch", "--test-only"]) == 1
