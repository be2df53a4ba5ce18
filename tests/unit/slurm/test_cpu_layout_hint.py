"""A step slurmd could not pin to CPUs gets the reason and the line that runs (issue 28 point 3).

The stderr is what srun printed in the dgx-h100 sandbox on Slurm 22.05.8 (2-CPU machine) for the seed article's
``srun --mpi=pmi2 --ntasks-per-node=4 --cpus-per-task=12 --gpus-per-task=1 --cpu-bind=cores``, exit 193.
"""

from __future__ import annotations

from slurmlab.sandbox.machine import simulated_cpus_note
from slurmlab.slurm.failures import CPU_LAYOUT_HINT, classify_failure, refusal_hint

SRUN_22_05 = [
    "srun: error: JobId=1 failed to distribute tasks (bind_type:cores,mask_cpu,one_thread) - this should never happen",
    "srun: error: JobId=1 failed to distribute tasks (bind_type:cores,mask_cpu,one_thread) - this should never happen",
    "srun: error: Task launch for StepId=1.0 failed on node node2: Unable to layout tasks on given cpus",
    "srun: error: Task launch for StepId=1.0 failed on node node1: Unable to layout tasks on given cpus",
    "srun: error: Application launch failed: Unable to layout tasks on given cpus",
    "srun: Job step aborted",
]
# the same step with --ntasks-per-node=4 --cpus-per-task=1: only the launch lines
SRUN_LAYOUT_ONLY = [
    "srun: error: Task launch for StepId=1.4 failed on node node1: Unable to layout tasks on given cpus",
    "srun: error: Application launch failed: Unable to layout tasks on given cpus",
    "srun: Job step aborted",
]


def test_a_step_slurmd_could_not_pin_says_why_and_what_runs() -> None:
    for stderr in (SRUN_22_05, SRUN_LAYOUT_ONLY):
        hint = refusal_hint("\n".join(stderr))
        assert hint == CPU_LAYOUT_HINT
        assert "claims more CPUs" in hint and "sandbox" in hint and "--cpu-bind=none" in hint
    err = classify_failure(["srun"], 193, "\n".join(SRUN_22_05))
    assert err.hint == CPU_LAYOUT_HINT and "this should never happen" in str(err.stderr)


def test_sandbox_up_notes_cpus_the_machine_lacks_and_only_then() -> None:
    note = simulated_cpus_note(112, 2)
    assert note is not None and "claims 112 CPUs" in note and "this machine has 2" in note
    assert "more than 2 tasks on a node or more than 2 --cpus-per-task" in note and "--cpu-bind=none" in note
    assert simulated_cpus_note(112, 112) is None and simulated_cpus_note(8, 64) is None
    assert simulated_cpus_note(112, None) is None
