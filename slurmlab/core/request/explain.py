"""A GPU request in plain words, for teaching: what the user gets and how it is shared and bound.

explain(parse_request(["-N", "2", "--gpus-per-node=2", "--gpu-bind=closest",
                       "--gres-flags=enforce-binding"]))
# '2 nodes, 2 GPUs per node (4 in total); each task bound to the GPUs nearest its CPUs;
#  CPUs restricted to the cores next to those GPUs'
"""

from __future__ import annotations

from fractions import Fraction

from slurmlab.core.gpu.mig import MIG_PROFILE_TABLES, parse_profile_name
from slurmlab.core.request.request import GpuBind, GpuCount, GpuRequest, GresSpec
from slurmlab.errors import ParseError

__all__ = ["describe_gpu_type", "explain"]


def _plural(n: int, word: str, many: str | None = None) -> str:
    return f"{n} {word if n == 1 else (many or word + 's')}"


def _frac(part: int, whole: int) -> str:
    f = Fraction(part, whole)
    return "all" if f == 1 else f"{f.numerator}/{f.denominator}"


def describe_gpu_type(gpu_type: str) -> str | None:
    """For a MIG profile type (``1g.18gb``): its share of the SMs and of the memory; None for other types.

    The memory share is left out where GPU models disagree on it (``1g.10gb`` is 2/8 of an A100-40GB but
    1/8 of an H100-80GB).
    """
    try:
        _, compute, _, _ = parse_profile_name(gpu_type)
    except ParseError:
        return None
    shares = {
        (Fraction(p.compute_slices, t.compute_slices), Fraction(p.memory_slices, t.memory_slices))
        for t in MIG_PROFILE_TABLES.values()
        for p in t.profiles
        if p.name == gpu_type
    }
    if len(shares) == 1:
        sm, mem = next(iter(shares))
        return (
            f"{_frac(sm.numerator, sm.denominator)} of the SMs and "
            f"{_frac(mem.numerator, mem.denominator)} of the memory"
        )
    return f"{_frac(compute, 7)} of the SMs; its memory share depends on the GPU model"


def _gpus(count: int, gpu_type: str | None, scope: str = "") -> str:
    """``2 h100 GPUs per node`` or ``one MIG slice 1g.18gb per node (1/7 of the SMs and 1/8 of the memory)``."""
    where = f" {scope}" if scope else ""
    mig = describe_gpu_type(gpu_type) if gpu_type else None
    if mig is not None:
        many = "" if count == 1 else "s"
        each = "" if count == 1 else "each "
        return f"{'one' if count == 1 else count} MIG slice{many} {gpu_type}{where} ({each}{mig})"
    noun = _plural(count, f"{gpu_type} GPU" if gpu_type else "GPU")
    return noun + where


def _fixed_nodes(req: GpuRequest) -> int | None:
    if req.nodes is None:
        return None
    return req.nodes.min if req.nodes.max in (None, req.nodes.min) else None


def _gpu_phrases(req: GpuRequest) -> list[str]:
    out: list[str] = []
    nodes = _fixed_nodes(req)
    # on one node (or Slurm's default of as few as fit) "per node" and "in total" say nothing
    several = req.nodes is not None and nodes != 1
    if req.gpus is not None:
        out.append(_gpus(req.gpus.count, req.gpus.type, "in total" if several else ""))
    per_node: list[GpuCount] = []
    if req.gpus_per_node is not None:
        per_node.append(req.gpus_per_node)
    per_node += [GpuCount(s.amount, s.type) for s in req.gpu_gres]
    for c in per_node:
        text = _gpus(c.count, c.type, "per node" if several else "")
        if nodes is not None and nodes > 1 and req.gpus is None:
            text += f" ({c.count * nodes} in total)"
        out.append(text)
    if req.gpus_per_task is not None:
        text = _gpus(req.gpus_per_task.count, req.gpus_per_task.type, "per task")
        if req.ntasks is not None and req.gpus is None and req.ntasks > 1:
            text += f" ({req.gpus_per_task.count * req.ntasks} in total)"
        out.append(text)
    if req.gpus_per_socket is not None:
        out.append(_gpus(req.gpus_per_socket.count, req.gpus_per_socket.type, "per socket"))
    for spec in req.shared_gres:
        out.append(_shared_phrase(spec))
    for spec in req.gres:
        if not spec.is_gpu and not spec.is_shared and spec.name != "none":
            kind = f"{spec.type} {spec.name}" if spec.type else spec.name
            out.append(f"{spec.amount} {kind}" + (" per node" if several else ""))
    return out


def _shared_phrase(spec: GresSpec) -> str:
    on = f" {spec.type}" if spec.type else ""
    if spec.name == "shard":
        return (
            f"{_plural(spec.amount, 'shard')} of one{on} GPU: time-sliced with other jobs, "
            "no memory isolation"
        )
    return (
        f"MPS share {spec.amount} of one{on} GPU (with the usual 100 per GPU, {spec.amount}% of its "
        "threads): other users' processes are time-sliced"
    )


def _bind_phrase(bind: GpuBind) -> str:
    value = bind.value or ""
    if bind.kind == "closest":
        text = "each task bound to the GPUs nearest its CPUs"
    elif bind.kind == "none":
        text = "no GPU binding: every task sees all of the job's GPUs on its node"
    elif bind.kind == "map_gpu":
        text = f"task i bound to GPU number i of the list {value}"
    elif bind.kind == "mask_gpu":
        text = f"task i bound to the GPUs in mask i of {value}"
    elif bind.kind == "single":
        text = f"each task bound to a single GPU near it, {_plural(int(value), 'task')} per GPU"
    else:  # per_task
        text = f"each task gets its own {_plural(int(value), 'GPU')}"
    return text + (" (Slurm prints the binding)" if bind.verbose else "")


_FLAG_PHRASES = {
    "enforce-binding": "CPUs restricted to the cores next to those GPUs (gres.conf Cores=)",
    "disable-binding": "CPUs may come from anywhere on the node, far from the GPUs",
    "one-task-per-sharing": "no two tasks share one shared GPU",
    "multiple-tasks-per-sharing": "several tasks may use the same shared GPU",
    "allow-task-sharing": "each task can also reach the GPUs of the other tasks on its node",
}


def explain(request: GpuRequest) -> str:
    """One or two short sentences: resources first, then binding, CPUs, memory and placement."""
    req = request
    head: list[str] = []
    if req.nodes is not None:
        head.append(f"{req.nodes.render()} nodes" if req.nodes.max else _plural(req.nodes.min, "node"))
    if req.ntasks is not None:
        head.append(_plural(req.ntasks, "task"))
    if req.ntasks_per_node is not None:
        head.append(f"{_plural(req.ntasks_per_node, 'task')} per node")
    gpu = _gpu_phrases(req)
    head += gpu if gpu else ["no GPUs"]
    tail: list[str] = []
    if req.gpu_bind is not None:
        tail.append(_bind_phrase(req.gpu_bind))
    tail += [_FLAG_PHRASES[f] for f in req.gres_flags]
    cpus: list[str] = []
    if req.cpus_per_task is not None:
        cpus.append(f"{_plural(req.cpus_per_task, 'CPU')} per task")
    if req.cpus_per_gpu is not None:
        cpus.append(f"{_plural(req.cpus_per_gpu, 'CPU')} per GPU")
    for name, mem in (("per node", req.mem), ("per GPU", req.mem_per_gpu), ("per CPU", req.mem_per_cpu)):
        if mem is not None:
            cpus.append(mem.human() if mem.kib == 0 else f"{mem.human()} memory {name}")
    if cpus:
        tail.append(", ".join(cpus))
    if req.cpu_bind is not None:
        tail.append(f"tasks' CPUs bound by {req.cpu_bind}")
    if req.gpu_freq is not None:
        tail.append(f"GPU clocks set to {req.gpu_freq}")
    if req.exclusive is not None:
        tail.append(
            "whole nodes, shared with no other job" + (f" ({req.exclusive})" if req.exclusive else "")
        )
    if req.mpi is not None:
        tail.append(f"MPI steps get {req.mpi.upper() if req.mpi.startswith('pmi') else req.mpi}")
    where: list[str] = []
    if req.partition is not None:
        where.append(f"in partition {req.partition}")
    if req.constraint is not None:
        where.append(f"on nodes with {req.constraint}")
    if req.nodelist is not None:
        where.append(f"on {req.nodelist}")
    if req.exclude is not None:
        where.append(f"not on {req.exclude}")
    if req.time is not None:
        where.append(f"for {req.time.human()}" if not req.time.infinite else "with no time limit")
    text = ", ".join(head)
    if tail:
        text += "; " + "; ".join(tail)
    if where:
        text += "; " + ", ".join(where)
    return text
