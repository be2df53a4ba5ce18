"""slurmlab.teach.gpu_cap where the accounting database does not answer (recorded: slurmdbd stopped, Slurm 22.05):
the cap is unknown, said in words, and a lesson goes on as on a cluster without caps, instead of failing its
first cell. (The cap read from a live database: tests/integration/sandbox/test_accounting.py.)"""

from __future__ import annotations

from slurmlab.slurm.gpu_cap import gpu_cap
from slurmlab.testing import FakeRunner
from tests.unit.core.diagnosis.limit_scenes import LIMITS, scene_names


def test_a_database_that_does_not_answer_leaves_the_cap_unknown_and_says_why() -> None:
    fake = FakeRunner()
    fake.replay(*(f"{LIMITS}/{n}" for n in scene_names("d") if n.startswith("d07")))
    try:
        cap = gpu_cap(fake, user="root")
    finally:
        fake.close()
    assert cap.gpus is None and cap.allows(64)
    assert cap.why_none.startswith("unknown: sacctmgr could not read the limits"), cap.why_none
    assert "no GPU cap (unknown: " in str(cap)
