"""NVLink: the facts per GPU model and generation, the kind of fabric a node has, and each link's state.

:mod:`.models` is the table of NVLink facts (standard library only: the sandbox's stand-in ``nvidia-smi`` copies it),
:mod:`.fabric` judges the fabric (direct links or NVSwitch) and its bandwidth, :mod:`.state` reads each link's state
from ``nvidia-smi nvlink -s``. Pure data, no I/O.
"""

from __future__ import annotations

from slurmlab.core.gpu.nvlink.fabric import FabricKind, NvlinkFabric, nvlink_fabric
from slurmlab.core.gpu.nvlink.models import (
    NVLINK_GENERATIONS,
    NVLINK_MODELS,
    NvlinkGeneration,
    NvlinkModel,
    nvlink_generation_for_model,
    nvlink_model_for,
)
from slurmlab.core.gpu.nvlink.state import SLOW_TOLERANCE, GpuLinkState, link_state_lines, link_states

__all__ = [
    "NVLINK_GENERATIONS",
    "NVLINK_MODELS",
    "SLOW_TOLERANCE",
    "FabricKind",
    "GpuLinkState",
    "NvlinkFabric",
    "NvlinkGeneration",
    "NvlinkModel",
    "link_state_lines",
    "link_states",
    "nvlink_fabric",
    "nvlink_generation_for_model",
    "nvlink_model_for",
]
