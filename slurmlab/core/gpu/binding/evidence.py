"""The evidence a binding is judged on: what each task of a step saw (:class:`TaskReport`, read from the probe
step's output by :func:`parse_task_reports`) and what the controller recorded per node (:class:`NodeRecord`, from
``scontrol show job -d`` by :func:`node_records`).

A task's report is one short JSON line; the devices it saw (its ``nvidia-smi -L`` lines and the PCI bus id of each
GPU UUID) follow as one line each under :data:`TASK_DEVICE_PREFIX`, because srun may cut a line longer than 1 KiB
with another task's output, and a node's ``-L`` with MIG devices is longer than that."""

from __future__ import annotations

import json
from collections.abc import Sequence
from dataclasses import dataclass

from slurmlab.core.gpu.devices import parse_cpu_list
from slurmlab.core.slurm.models import Job
from slurmlab.errors import ParseError

__all__ = [
    "TASK_DEVICE_PREFIX",
    "TASK_REPORT_PREFIX",
    "NodeRecord",
    "TaskReport",
    "gpu_bind_value",
    "node_records",
    "parse_task_reports",
]

# each task of the probe step prints this, then its report as one JSON line
TASK_REPORT_PREFIX = "SLURMLAB_TASK "
# then one line per device fact: {"rank": r, "L": "<an nvidia-smi -L line>"} or {"rank": r, "pci": [uuid, bus id]}
TASK_DEVICE_PREFIX = "SLURMLAB_TASK_DEV "


@dataclass(frozen=True)
class TaskReport:
    """What one task of a step saw."""

    rank: int
    node: str
    step_gpus: tuple[int, ...] | None  # SLURM_STEP_GPUS (else SLURM_JOB_GPUS): Slurm's global IDX on the node
    visible: tuple[str, ...] | None  # CUDA_VISIBLE_DEVICES tokens (numbers or GPU-/MIG- UUIDs)
    affinity: frozenset[int] | None  # os.sched_getaffinity of the task
    host_cpus: int | None = None
    # the task's own `nvidia-smi -L` (the devices its cgroup lets it see; None: nvidia-smi did not answer there)
    smi_list: str | None = None
    pci: tuple[
        tuple[str, str], ...
    ] = ()  # (GPU UUID, PCI bus id) from `nvidia-smi --query-gpu=uuid,pci.bus_id`


@dataclass(frozen=True)
class NodeRecord:
    """What the controller recorded for the job on one node (``scontrol show job -d``)."""

    node: str
    gpu_idx: tuple[int, ...]
    cpu_ids: frozenset[int] | None
    shard_gpus: tuple[int, ...] = ()  # GPUs holding the job's shards / MPS share (either Slurm form)


def _idx_list(text: str | None, what: str) -> tuple[int, ...] | None:
    if text is None or text == "":
        return None
    try:
        return tuple(sorted(parse_cpu_list(text, what=what)))
    except ParseError:
        raise ParseError(what, text, hint="expected GPU indices such as 0,1 or 0-3") from None


def parse_task_reports(lines: Sequence[str]) -> list[TaskReport]:
    """The ``SLURMLAB_TASK {json}`` lines of the probe step, with each task's device lines (other lines are Slurm's
    chatter and are ignored)."""
    out = []
    listing, pci = _device_lines(lines)
    for line in lines:
        if not line.startswith(TASK_REPORT_PREFIX):
            continue
        try:
            data = json.loads(line[len(TASK_REPORT_PREFIX) :])
            env = data["env"]
            rank = int(env["SLURM_PROCID"])
            node = str(env["SLURMD_NODENAME"])
        except (ValueError, KeyError, TypeError):
            raise ParseError(
                "task report of the binding probe",
                line[:300],
                hint="expected JSON with env.SLURM_PROCID and env.SLURMD_NODENAME",
            ) from None
        gpus = _idx_list(env.get("SLURM_STEP_GPUS") or env.get("SLURM_JOB_GPUS"), "SLURM_STEP_GPUS")
        cvd = env.get("CUDA_VISIBLE_DEVICES")
        visible = (
            tuple(t.strip() for t in cvd.split(",") if t.strip()) if isinstance(cvd, str) and cvd else None
        )
        aff = data.get("affinity")
        if aff is not None and not (isinstance(aff, list) and all(isinstance(c, int) for c in aff)):
            raise ParseError("task CPU affinity", repr(aff)[:200], hint="a list of CPU ids")
        host = data.get("host_cpus")
        out.append(
            TaskReport(
                rank,
                node,
                gpus,
                visible,
                frozenset(aff) if aff is not None else None,
                host if isinstance(host, int) else None,
                "\n".join(listing[rank]) if rank in listing else None,
                tuple(pci.get(rank, ())),
            )
        )
    return sorted(out, key=lambda t: t.rank)


def _device_lines(lines: Sequence[str]) -> tuple[dict[int, list[str]], dict[int, list[tuple[str, str]]]]:
    """Per task rank: its ``nvidia-smi -L`` lines and its (UUID, PCI bus id) pairs, in the order printed."""
    listing: dict[int, list[str]] = {}
    pci: dict[int, list[tuple[str, str]]] = {}
    for line in lines:
        if not line.startswith(TASK_DEVICE_PREFIX):
            continue
        try:
            data = json.loads(line[len(TASK_DEVICE_PREFIX) :])
            rank = int(data["rank"])
        except (ValueError, KeyError, TypeError):
            raise ParseError(
                "device line of the binding probe",
                line[:300],
                hint='expected JSON {"rank": N, "L": "..."} or {"rank": N, "pci": [uuid, bus id]}',
            ) from None
        if isinstance(data.get("L"), str):
            listing.setdefault(rank, []).append(data["L"])
        pair = data.get("pci")
        if isinstance(pair, list) and len(pair) == 2 and all(isinstance(x, str) for x in pair):
            pci.setdefault(rank, []).append((pair[0].strip(), pair[1].strip()))
    return listing, pci


def node_records(job: Job) -> list[NodeRecord]:
    """Per node, what the controller recorded for ``job`` (its ``gpu_allocs``: GRES IDX, CPU_IDs, shards)."""
    out = []
    for a in job.gpu_allocs:
        cpu_ids = parse_cpu_list(a.cpu_ids, what=f"CPU_IDs of {a.node}") if a.cpu_ids else None
        # GresAlloc.shares reads 22.05's shard:…(IDX:3) and 24.11+'s shard:…(0/4,…,4/4) alike
        shards = sorted({i for name in ("shard", "mps") for i in a.shares(name)})
        out.append(NodeRecord(a.node, tuple(a.gpu_indices), cpu_ids, tuple(shards)))
    return out


def gpu_bind_value(tres_bind: str | None) -> str | None:
    """``gres/gpu:closest`` (as the job records it) -> ``closest``; None when GPUs are not bound."""
    if not tres_bind:
        return None
    for part in tres_bind.split(";"):
        part = part.strip()
        if part.startswith("gres/gpu:"):
            return part[len("gres/gpu:") :] or None
        if part.startswith("gpu:"):
            return part[len("gpu:") :] or None
    return None
