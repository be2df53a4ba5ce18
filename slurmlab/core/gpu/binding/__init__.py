"""The binding of an allocation, judged: what a step's tasks really got beside what the controller recorded, one
row per task and GPU with every name of that GPU, and the known traps flagged.

:mod:`.evidence` reads the tasks' reports and the controller's records, :mod:`.identity` resolves each visible
device to the node's GPU, :mod:`.table` holds the judged table and its figure, :mod:`.traps` finds the traps and
:mod:`.judge` puts them together (:func:`explain`). Pure data, no I/O.
"""

from __future__ import annotations

from slurmlab.core.gpu.binding.evidence import (
    NodeRecord,
    TaskReport,
    TaskReportsError,
    gpu_bind_value,
    node_records,
    parse_task_reports,
)
from slurmlab.core.gpu.binding.identity import (
    GpuName,
    NodeNames,
    SeenGpu,
    idx_to_gpu_map,
    listed_gpu_uuids,
    names_from_hardware,
    names_from_tasks,
    resolve_visible,
)
from slurmlab.core.gpu.binding.judge import explain
from slurmlab.core.gpu.binding.table import (
    HONOURED,
    NOT_HONOURED,
    NOT_REQUESTED,
    UNKNOWN,
    BindingFigureArgs,
    BindingTable,
    GpuRow,
    TaskBinding,
    Trap,
)
from slurmlab.core.gpu.binding.traps import FAR_SOCKET, NO_NVLINK, PER_TASK_GPUS, SPLIT_NUMA, find_traps

__all__ = [
    "FAR_SOCKET",
    "HONOURED",
    "NOT_HONOURED",
    "NOT_REQUESTED",
    "NO_NVLINK",
    "PER_TASK_GPUS",
    "SPLIT_NUMA",
    "UNKNOWN",
    "BindingFigureArgs",
    "BindingTable",
    "GpuName",
    "GpuRow",
    "NodeNames",
    "NodeRecord",
    "SeenGpu",
    "TaskBinding",
    "TaskReport",
    "TaskReportsError",
    "Trap",
    "explain",
    "find_traps",
    "gpu_bind_value",
    "idx_to_gpu_map",
    "listed_gpu_uuids",
    "names_from_hardware",
    "names_from_tasks",
    "node_records",
    "parse_task_reports",
    "resolve_visible",
]
