"""The Slurm side of a kernel that runs as a step of an allocation (:mod:`slurmlab.provisioner`): the step's
command, its signals, and the address of its node. Every command through the runner, as an argv list.
"""

from __future__ import annotations

import re
import signal
from collections.abc import Sequence

from slurmlab.core.slurm.jobid import check_job_id
from slurmlab.errors import SlurmError
from slurmlab.slurm.runner import Runner, get_runner
from slurmlab.slurm.steps import step_argv

__all__ = ["kernel_step_argv", "node_address", "signal_step"]

_NODE_ADDR = re.compile(r"(?:^|\s)NodeAddr=(\S+)")
_NODE_NAME = re.compile(r"[A-Za-z0-9][A-Za-z0-9._-]{0,127}")
_STEP = re.compile(r"\d+\.\d+")


def kernel_step_argv(
    job_id: str, cpus: int | None, command: Sequence[str], *, chdir: str | None = None
) -> list[str]:
    """``srun --jobid=J -N1 -n1 [-c CPUS] --mem=0 --kill-on-bad-exit=1 [--chdir=DIR] COMMAND``: one task, the
    kernel, on the job's first node, with the job's CPUs there (``cpus``) and all its GPUs (a step gets every GPU
    of the job unless it asks otherwise), in ``chdir`` (the notebook's folder, as a local kernel's). ``--mem=0`` shares the job's memory with the steps the kernel itself starts (see
    :meth:`slurmlab.slurm.allocation.Allocation.step_options`). Not ``--overlap``: Slurm 22.05 gives an overlapping
    step no GPUs of a job that asked ``--gpus=N``."""
    extra = ["--nodes=1", "--ntasks=1", "--mem=0", "--kill-on-bad-exit=1"]
    if cpus:
        extra.insert(2, f"--cpus-per-task={cpus}")
    if chdir:
        extra.append(f"--chdir={chdir}")
    return step_argv(check_job_id(job_id), extra, [str(c) for c in command], label=False, overlap=False)


def signal_step(step: str, signum: int, runner: Runner | None = None) -> None:
    """``scancel --signal=NAME J.S``: the signal reaches the step's tasks on the node (the kernel), not srun.
    (A SIGINT to srun itself only makes srun print the tasks' state; a second within a second ends the step.)"""
    if _STEP.fullmatch(step) is None:
        raise SlurmError(f"not a job step: {step!r}", argv=("scancel",))
    name = signal.Signals(signum).name.removeprefix("SIG")
    (runner or get_runner()).run(["scancel", f"--signal={name}", step])


def node_address(node: str, runner: Runner | None = None) -> str:
    """The address Slurm reaches ``node`` by (its ``NodeAddr``): where the server connects to the kernel."""
    if _NODE_NAME.fullmatch(node) is None:
        raise SlurmError(f"not a node name: {node[:60]!r}", argv=("scontrol",))
    result = (runner or get_runner()).run(["scontrol", "show", "node", node, "--oneliner"])
    found = _NODE_ADDR.search(result.stdout)
    if found is None:
        raise SlurmError(
            f"scontrol did not say the address of node {node}",
            argv=result.argv,
            hint="set the kernel's address yourself: c.SlurmProvisioner.kernel_address in the kernel spec's config",
        )
    return found.group(1)
