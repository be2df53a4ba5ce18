"""What a slurmlab sandbox cannot show as a real cluster would, said the same way wherever a result needs it.

The sandbox's nodes are processes on one machine with stand-in GPU files: no device cgroup, no MIG hardware, one
host name. Outputs that a reader could take for a real cluster's (the binding table, the isolation report, the
stand-in nvidia-smi) carry these notes next to the result; the workshop notebooks quote them.
"""

from __future__ import annotations

__all__ = ["HOST_NAME", "MIG_NAMES", "NO_DEVICE_CGROUP", "SANDBOX_ENV", "sandbox_notes"]

# set in every task of a sandbox (by its TaskProlog) to the sandbox's folder
SANDBOX_ENV = "SLURMLAB_SANDBOX"

NO_DEVICE_CGROUP = (
    "sandbox: no device cgroup, so GPUs are not renumbered as on a real cluster under "
    "ConstrainDevices: CUDA_VISIBLE_DEVICES holds the node's indices (e.g. 0,3) where a real "
    "cluster shows 0,1"
)
HOST_NAME = (
    "sandbox: every node is this machine, so a step's host name is the machine's, not the node's "
    "(SLURMD_NODENAME names the node)"
)
MIG_NAMES = (
    "sandbox: no MIG hardware, so CUDA_VISIBLE_DEVICES holds Slurm's index of a MIG slice where a real "
    "cluster holds its MIG-<uuid>"
)


def sandbox_notes(*, mig: bool = False) -> tuple[str, ...]:
    """The notes for a result gathered on a sandbox (with the MIG one where MIG slices are involved)."""
    return (NO_DEVICE_CGROUP, HOST_NAME, *((MIG_NAMES,) if mig else ()))
