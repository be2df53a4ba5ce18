"""The scaled plan in Slurm's text layouts, each record a recorded one with its varying fields replaced.

``scontrol show job -d`` / ``show node -d`` / ``show partition`` records come from tests/data/slurm/<version>;
only ``Key=value`` words that differ between jobs or nodes are rewritten (the user-text fields stay as
recorded), and a job's per-node detail lines (``Nodes=… CPU_IDs=… GRES=…``) are written one per node in the
recorded line's shape. The brief ``squeue`` lines use the poller's own format (BRIEF_FORMAT).
"""

from __future__ import annotations

import re

from benchmarks.scale_json import gres_detail, gres_used, node_state
from benchmarks.scale_plan import CPUS_PER_NODE, GPU_TYPE, MEM_PER_CPU, PARTITION, Job, Plan
from slurmlab.core.slurm.hostlist import compress

_DETAIL = re.compile(r"^\s+Nodes=\S+ CPU_IDs=.*$", re.M)


def records(text: str) -> list[str]:
    """A ``scontrol show`` output cut into its records (blank-line separated), each without the blank line."""
    return [r for r in re.split(r"\n\s*\n", text) if r.strip()]


def sub(record: str, key: str, value: str) -> str:
    """``record`` with the first ``Key=word`` set to ``value`` (keys are whole words: ``NodeList`` ≠ ``Nodes``)."""
    return re.sub(
        rf"(^|\s){re.escape(key)}=\S*", lambda m: f"{m.group(1)}{key}={value}", record, count=1, flags=re.M
    )


def job_templates(text: str) -> dict[str, str]:
    recs = records(text)

    def first(pred: object) -> str:
        return next(r for r in recs if pred(r))  # type: ignore[operator]

    running = [r for r in recs if "JobState=RUNNING" in r]
    return {
        "gpu": next(r for r in running if len(_DETAIL.findall(r)) == 1 and "GRES=gpu:" in r),
        "multi": next(r for r in running if len(_DETAIL.findall(r)) > 1),
        "shard": next(r for r in running if "GRES=shard:" in r),
        "pending": first(lambda r: "JobState=PENDING" in r and "ArrayJobId" not in r),
    }


def _cpu_ids(first: int, n: int) -> str:
    return str(first) if n == 1 else f"{first}-{first + n - 1}"


def job_text(job: Job, plan: Plan, templates: dict[str, str], old: bool) -> str:
    running = job.state == "RUNNING"
    r = templates[job.kind if running else "pending"]
    names = [plan.node_name(p.node) for p in job.placements]
    r = re.sub(r"^JobId=\S+ JobName=.*$", f"JobId={job.job_id} JobName={job.name}", r, count=1, flags=re.M)
    r = sub(r, "UserId", f"{job.user}({job.uid})")
    r = sub(r, "GroupId", f"{job.user}({job.uid})")
    r = sub(r, "JobState", job.state)
    r = sub(r, "Reason", job.reason)
    r = sub(r, "NodeList", compress(names) if names else "")
    r = sub(r, "NumCPUs", str(job.cpus))
    tres = f"cpu={job.cpus},mem={job.cpus * MEM_PER_CPU}M,node={job.node_count},billing={job.cpus}"
    for key in ("ReqTRES", "TRES"):
        r = sub(r, key, tres)
    if running:
        r = sub(r, "BatchHost", names[0])
        r = sub(r, "NumNodes", str(job.node_count))
        r = sub(r, "AllocTRES", tres)
        what = "shard" if job.kind == "shard" else "gpu"
        total = job.count * job.node_count
        r = re.sub(r"JOB_GRES=\S+", f"JOB_GRES={what}:{GPU_TYPE}:{total}", r, count=1)
        detail_t = _DETAIL.findall(r)[0]
        lines = []
        for p in job.placements:
            line = sub(detail_t, "Nodes", plan.node_name(p.node))
            line = sub(line, "CPU_IDs", _cpu_ids(p.cpu_first, p.cpus))
            line = sub(line, "Mem", str(p.cpus * MEM_PER_CPU))
            lines.append(sub(line, "GRES", gres_detail(job, p.shard_gpu, p.gpus, p.shards, old)))
        spans = [m.span() for m in _DETAIL.finditer(r)]
        r = r[: spans[0][0]] + "\n".join(lines) + r[spans[-1][1] :]
    else:
        r = sub(r, "NumNodes", f"{job.node_count}-{job.node_count}")
    r = re.sub(
        r"(^|\s)TresPer(?:Job|Node)=\S+", lambda m: m.group(1) + _tres_per(job, old), r, count=1, flags=re.M
    )
    return re.sub(r"(Std(?:Err|Out)=\S*/)\d+(\.out)", rf"\g<1>{job.job_id}\2", r)


def _tres_per(job: Job, old: bool) -> str:
    """``TresPerJob=gres/gpu:3`` or, for per-node requests, ``TresPerNode=gres/gpu:h100:8`` (22.05: ``gres:``)."""
    gres = f"gres{':' if old else '/'}{'shard' if job.kind == 'shard' else 'gpu'}"
    if job.kind == "multi":
        return f"TresPerNode={gres}:{GPU_TYPE}:{job.count}"
    return f"TresPer{'Node' if job.kind == 'shard' else 'Job'}={gres}:{job.count}"


def jobs_text(plan: Plan, recorded: str, old: bool) -> str:
    templates = job_templates(recorded)
    return "".join(job_text(j, plan, templates, old) + "\n   \n" for j in plan.jobs)


def nodes_text(plan: Plan, recorded: str, old: bool) -> str:
    t = records(recorded)[0]
    out = []
    for n in plan.nodes:
        used = n.cpus_used
        r = sub(t, "NodeName", plan.node_name(n.index))
        r = sub(r, "CPUAlloc", str(used))
        r = sub(r, "GresUsed", gres_used(n, old))
        r = sub(r, "AllocMem", str(used * MEM_PER_CPU))
        r = sub(r, "State", node_state(n))
        r = sub(r, "AllocTRES", f"cpu={used},mem={used * MEM_PER_CPU}M" if used else "")
        out.append(r + "\n   \n\n")
    return "".join(out)


def partition_text(plan: Plan, recorded: str) -> str:
    n = len(plan.nodes)
    r = records(recorded)[0]
    r = sub(r, "Nodes", compress(plan.node_name(x.index) for x in plan.nodes))
    r = sub(r, "TotalCPUs", str(n * CPUS_PER_NODE))
    r = sub(r, "TotalNodes", str(n))
    r = sub(r, "TRES", f"cpu={n * CPUS_PER_NODE},mem={n * 2000}G,node={n},billing={n * CPUS_PER_NODE}")
    return r + "\n\n"


def brief_line(job: Job, plan: Plan, old: bool) -> str:
    """One line of ``squeue -h -t all -o BRIEF_FORMAT`` (%i|%A|%F|%K|%T|%r|%S|%e|%l|%L|%M|%D|%N|%P|%u|%b)."""
    running = job.state == "RUNNING"
    names = compress(plan.node_name(p.node) for p in job.placements) if running else ""
    start, end = ("2026-12-01T01:27:40", "2026-12-01T02:27:40") if running else ("N/A", "N/A")
    sep = ":" if old else "/"
    what = "shard" if job.kind == "shard" else "gpu"
    per_node = (
        f"gres{sep}{what}:{GPU_TYPE}:{job.count}"
        if job.kind == "multi"
        else f"gres{sep}{what}:{job.count}"
        if job.kind == "shard"
        else "N/A"
    )
    left, used = ("59:26", "0:34") if running else ("1:00:00", "0:00")
    return (
        f"{job.job_id}|{job.job_id}|{job.job_id}|N/A|{job.state}|{job.reason}|{start}|{end}|1:00:00|{left}|"
        f"{used}|{job.node_count}|{names}|{PARTITION}|{job.user}|{per_node}"
    )
