"""Issue 28 point 3 against a real Slurm: the seed article's allocation and step, typed as they are into the magics.

``%salloc -N 2 --ntasks-per-node=4 --cpus-per-task=12 --gpus-per-node=4``, then ``%srun --mpi=pmi2
--ntasks-per-node=4 --cpus-per-task=12 --gpus-per-task=1 --cpu-bind=cores …``. On a sandbox whose nodes claim
more CPUs than the machine has, slurmd cannot pin 4 tasks x 12 CPUs (seen on 22.05: "failed to distribute tasks
… this should never happen", "Unable to layout tasks on given cpus", exit 193): the step must then say why under
Slurm's words, and the same line with ``--cpu-bind=none`` must run. Where the machine has the CPUs the step runs.
"""

from __future__ import annotations

import os
from collections.abc import Iterator
from typing import Any

import pytest

pytestmark = pytest.mark.sandbox

ALLOC = "-N 2 --ntasks-per-node=4 --cpus-per-task=12 --gpus-per-node=4 -t 5"
STEP = "--ntasks-per-node=4 --cpus-per-task=12 --gpus-per-task=1"


class _Kernel:
    """The parent execute request ipykernel hands the shell, with the cellId JupyterLab puts in its metadata."""

    def get_parent(self, channel: str = "shell") -> dict[str, Any]:
        return {"header": {"msg_id": "article-step"}, "metadata": {"cellId": "article-step"}}


@pytest.fixture
def nb(slurm_sandbox: Any, monkeypatch: pytest.MonkeyPatch) -> Iterator[Any]:
    """An IPython shell with slurmlab loaded and a fresh session; its allocations are cancelled afterwards."""
    from IPython.testing.globalipapp import get_ipython

    from slurmlab.magics.session import Session

    if slurm_sandbox.profile_name != "dgx-h100":
        pytest.skip("the article's request (4 GPUs and 48 CPUs per node) is sized for the dgx-h100 profile")
    shell = get_ipython()
    shell.run_line_magic("load_ext", "slurmlab")
    monkeypatch.setattr(shell, "kernel", _Kernel(), raising=False)
    old, session = Session.of(shell), Session(shell)
    try:
        yield shell
    finally:
        for alloc in session.allocations:
            try:
                alloc.cancel()
            except Exception:  # already ended
                pass
        old.install(shell)
        shell.run_line_magic("unload_ext", "slurmlab")


def _mpi(sandbox: Any) -> str:
    listed = sandbox.runner().run(["srun", "--mpi=list"], check=False)
    return "--mpi=pmi2" if "pmi2" in (listed.stdout + listed.stderr).split() else "--mpi=none"


def _every_task_ran(lines: list[str]) -> bool:
    """Each task printed the step's task count (srun outside a batch script picks the node count itself)."""
    return bool(lines) and lines[0].isdigit() and lines == [lines[0]] * int(lines[0]) and int(lines[0]) >= 4


def test_the_articles_step_runs_or_says_why_not_and_how_to_run_it(
    nb: Any, slurm_sandbox: Any, capsys: pytest.CaptureFixture[str]
) -> None:
    alloc = nb.run_line_magic("salloc", ALLOC)
    alloc.wait("RUNNING", timeout=120)
    mpi = _mpi(slurm_sandbox)
    capsys.readouterr()
    nb.run_line_magic("srun", f"--jobid {alloc.job_id} {mpi} {STEP} --cpu-bind=cores printenv SLURM_NTASKS")
    out = capsys.readouterr()
    lines = out.out.splitlines()
    machine = os.cpu_count() or 1
    if "step exited with code" not in out.err:
        assert _every_task_ran(lines), out
        return
    # it failed: Slurm's own words stay, and the next line says why and what to type instead
    assert "layout tasks on given cpus" in out.err.lower(), out.err
    assert machine < 48, f"a machine with {machine} CPUs can pin 4 x 12: the step should have run ({out.err})"
    hint = next((line for line in out.err.splitlines() if line.startswith("-> ")), "")
    assert "claims more CPUs" in hint and "--cpu-bind=none" in hint and "sandbox" in hint, out.err
    # the hint's next step works: the same line without the pinning runs every task
    nb.run_line_magic("srun", f"--jobid {alloc.job_id} {mpi} {STEP} --cpu-bind=none printenv SLURM_NTASKS")
    again = capsys.readouterr()
    assert "step exited with code" not in again.err and _every_task_ran(again.out.splitlines()), again


def test_sandbox_up_says_its_nodes_claim_cpus_the_machine_lacks(slurm_sandbox: Any) -> None:
    claimed = slurm_sandbox.profile.cpu.cpus
    machine = os.cpu_count() or 1
    said = [n for n in slurm_sandbox.notes if "CPUs" in n and "--cpu-bind=none" in n]
    if machine >= claimed:
        assert said == [], slurm_sandbox.notes
        return
    assert said and f"claims {claimed} CPUs" in said[0] and f"this machine has {machine}" in said[0], (
        slurm_sandbox.notes
    )
