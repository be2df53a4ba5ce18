"""Public test helpers: the pytest plugin (sandbox fixtures), and a FakeRunner replaying recorded outputs.

:class:`FakeRunner` is a :class:`~slurmlab.slurm.runner.Runner` that answers every command with what a real
Slurm printed for it (the golden files of ``scripts/record-golden.py``), so code above the runner is tested
in milliseconds without a cluster::

    from slurmlab.slurm import queries
    from slurmlab.testing import FakeRunner

    fake = FakeRunner()
    fake.replay("22.05/00_sinfo_version.txt")          # sinfo --version -> "slurm 22.05.8"
    assert queries.slurm_version(fake)[:2] == (22, 5)
    assert fake.history == [["sinfo", "--version"]]

The pytest plugin gives the ``fake_runner`` fixture: a FakeRunner that is the process-wide runner for
one test (``slurmlab.slurm.runner.get_runner()``), closed afterwards.
"""

from slurmlab.testing.briefs import job_brief
from slurmlab.testing.fake_runner import (
    ANY,
    FakeRunner,
    Reply,
    Script,
    UnscriptedCommand,
    golden,
    golden_dir,
    recorded,
)

__all__ = [
    "ANY",
    "FakeRunner",
    "Reply",
    "Script",
    "UnscriptedCommand",
    "golden",
    "golden_dir",
    "job_brief",
    "recorded",
]
