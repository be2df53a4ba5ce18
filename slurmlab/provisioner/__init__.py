"""A Jupyter kernel provisioner that starts kernels as a step inside a Slurm allocation.

- :mod:`.request`: the kernel spec's request and one kernel's changes to it (pure);
- :mod:`.connection`: how the server and the node agree on ports and key (pure);
- :mod:`.status`: the provisioner's public status (pure);
- :mod:`.provisioner`: :class:`SlurmProvisioner`, registered as the ``slurmlab-provisioner`` entry point of
  ``jupyter_client.kernel_provisioners``;
- :mod:`.kernelspec`: the kernel spec that names it (``slurmlab kernel install``);
- :mod:`.node`: the launcher run on the node (standard library only).

This ``__init__`` is the one place that hands out their public names; the provisioner (jupyter_client, traitlets)
is imported only when asked for.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from slurmlab.provisioner.connection import NodeStep, kernel_file, read_kernel_file, read_node_step
from slurmlab.provisioner.kernelspec import PROVISIONER_NAME, install_kernel_spec, kernel_spec
from slurmlab.provisioner.request import (
    NOTEBOOK_KEY,
    OVERRIDE_VARIABLE,
    KernelRequest,
    notebook_override,
    request_from_config,
    request_override,
)
from slurmlab.provisioner.status import KernelJobStatus

if TYPE_CHECKING:
    from slurmlab.provisioner.provisioner import KernelStartRefused, SlurmProvisioner

__all__ = [
    "NOTEBOOK_KEY",
    "OVERRIDE_VARIABLE",
    "PROVISIONER_NAME",
    "KernelJobStatus",
    "KernelRequest",
    "KernelStartRefused",
    "NodeStep",
    "SlurmProvisioner",
    "install_kernel_spec",
    "kernel_file",
    "kernel_spec",
    "notebook_override",
    "read_kernel_file",
    "read_node_step",
    "request_from_config",
    "request_override",
]

_LAZY = {"SlurmProvisioner", "KernelStartRefused"}


def __getattr__(name: str) -> Any:
    if name in _LAZY:
        from slurmlab.provisioner import provisioner

        return getattr(provisioner, name)
    raise AttributeError(f"module 'slurmlab.provisioner' has no attribute {name!r}")
