"""MIG (Multi-Instance GPU): layouts on the slice grid, the instances they hold, the profile tables per GPU model and
the room left per profile.

:mod:`.layout` holds :class:`MigLayout` and the profile names, :mod:`.instances` the GPU and compute instances,
:mod:`.tables` the profile tables per model, :mod:`.placement` the inference of placements and the room left. Pure
data, no I/O.
"""

from __future__ import annotations

from slurmlab.core.gpu.mig.instances import ComputeInstance, GpuInstance, GpuMig, mig_slice_label
from slurmlab.core.gpu.mig.layout import MigLayout, is_mig_type, mig_memory_gb, parse_profile_name
from slurmlab.core.gpu.mig.placement import (
    MigCatalogue,
    ProfileRoom,
    infer_placements,
    layouts_with_room,
    room_left,
    room_sentence,
)
from slurmlab.core.gpu.mig.tables import (
    MIG_PROFILE_TABLES,
    MigProfile,
    MigProfileTable,
    TableChoice,
    choose_table,
    table_for_model,
    table_for_profile_names,
    tables_for_profile_names,
)

__all__ = [
    "MIG_PROFILE_TABLES",
    "ComputeInstance",
    "GpuInstance",
    "GpuMig",
    "MigCatalogue",
    "MigLayout",
    "MigProfile",
    "MigProfileTable",
    "ProfileRoom",
    "TableChoice",
    "choose_table",
    "infer_placements",
    "is_mig_type",
    "layouts_with_room",
    "mig_memory_gb",
    "mig_slice_label",
    "parse_profile_name",
    "room_left",
    "room_sentence",
    "table_for_model",
    "table_for_profile_names",
    "tables_for_profile_names",
]
