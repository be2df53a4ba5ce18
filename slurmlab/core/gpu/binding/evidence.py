"""The evidence a binding is judged on: what each task of a step saw (:class:`TaskReport`, read from the probe
step's output by :func:`parse_task_reports`) and what the controller recorded per node (:class:`NodeRecord`, from
``scontrol show job -d`` by :func:`node_records`).

A task's report, with the devices it saw (its ``nvidia-smi -L`` lines and the PCI bus id of each GPU UUID), is one
framed JSON line (:mod:`slurmlab.core.framing`), put back together from srun's labelled pieces: srun cuts a line
longer than 1 KiB (a task's CPU mask on a 224-CPU node, a node's ``-L`` with MIG devices) and mixes its pieces with
the other tasks' output."""

from __future__ import annotations

import json
from collections.abc import Sequence
from dataclasses import dataclass

from slurmlab.core.framing import reports_by_task
from slurmlab.core.gpu.devices import parse_cpu_list
from slurmlab.core.slurm.models import Job
from slurmlab.errors import ParseError

__all__ = [
    "NodeRecord",
    "TaskReport",
    "TaskReportsError",
    "gpu_bind_value",
    "node_records",
    "parse_task_reports",
]


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


class TaskReportsError(ParseError):
    """The probe step's task reports did not all arrive whole: every task named, with what arrived from it."""

    def __init__(self, message: str, *, hint: str | None = None) -> None:
        super().__init__("the task reports of the binding probe", message, hint=hint)
        # ParseError quotes 200 characters of the text; this message names each task and is said whole
        self.args = (message if not hint else f"{message}\n  -> {hint}",)
        self.message = message


def parse_task_reports(
    lines: Sequence[str], tasks: int | None = None, *, stderr: Sequence[str] = ()
) -> list[TaskReport]:
    """Each task's report from the probe step's ``srun --label`` output (:mod:`slurmlab.core.framing`), in task
    order. ``tasks``: the step's task count, each of which must report (None: every task that printed must).

    A task's rank is srun's label, which no task can print for another; a report whose ``SLURM_PROCID`` names
    another task is refused, as is one whose content does not parse (:class:`~slurmlab.errors.ParseError`)."""
    found = reports_by_task(
        lines,
        tasks,
        stderr=stderr,
        what="the binding probe step",
        hint="run the probe again; if the same task fails, check its node (python3, nvidia-smi)",
        error=TaskReportsError,
    )
    return [_task_report(rank, data) for rank, data in found.items()]


def _task_report(rank: int, data: dict[str, object]) -> TaskReport:
    """One task's decoded report, checked: srun's label is its rank, and the report must say the same."""
    what = f"task {rank}'s report of the binding probe"
    env = data.get("env")
    said = env.get("SLURM_PROCID") if isinstance(env, dict) else None
    node = env.get("SLURMD_NODENAME") if isinstance(env, dict) else None
    if not isinstance(env, dict) or not isinstance(said, str | int) or not isinstance(node, str):
        raise ParseError(
            what, json.dumps(data)[:300], hint="expected JSON with env.SLURM_PROCID and env.SLURMD_NODENAME"
        )
    if str(said).strip() != str(rank):
        raise ParseError(
            what,
            f"SLURM_PROCID={said}",
            hint=f"srun labelled it task {rank}: a task that reports for another is not believed",
        )
    gpus = _idx_list(_text(env, "SLURM_STEP_GPUS") or _text(env, "SLURM_JOB_GPUS"), "SLURM_STEP_GPUS")
    cvd = _text(env, "CUDA_VISIBLE_DEVICES")
    visible = tuple(t.strip() for t in cvd.split(",") if t.strip()) if cvd else None
    aff = data.get("affinity")
    if aff is not None and not (isinstance(aff, list) and all(isinstance(c, int) for c in aff)):
        raise ParseError("task CPU affinity", repr(aff)[:200], hint="a list of CPU ids")
    host = data.get("host_cpus")
    listed = data.get("L")
    listing = [x for x in listed if isinstance(x, str)] if isinstance(listed, list) else []
    pairs = data.get("pci")
    pci = [
        (pair[0].strip(), pair[1].strip())
        for pair in (pairs if isinstance(pairs, list) else ())
        if isinstance(pair, list) and len(pair) == 2 and isinstance(pair[0], str) and isinstance(pair[1], str)
    ]
    return TaskReport(
        rank,
        node,
        gpus,
        visible,
        frozenset(aff) if aff is not None else None,
        host if isinstance(host, int) else None,
        "\n".join(listing) if listing else None,
        tuple(pci),
    )


def _text(env: dict[object, object], key: str) -> str | None:
    """A variable of the task's environment: a string, or None when unset; anything else is a ParseError."""
    value = env.get(key)
    if value is None or isinstance(value, str):
        return value
    raise ParseError(f"{key} of the binding probe's task", repr(value)[:200], hint="a string or null")


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
