"""The scaled plan in Slurm's JSON layouts, built from records a real Slurm printed (tests/data/slurm/<version>).

Each job, node or sinfo entry is a copy of a recorded one of the same kind (a running one-node GPU job, a
multi-node job, a shard job, a pending job; a node) with only the fields that differ between jobs replaced, in
the template's own shape: a number stays a plain int on 22.05 and ``{set, infinite, number}`` from 23.11, a
state stays a string or becomes a list as the recording has it.
"""

from __future__ import annotations

import copy
from typing import Any

from benchmarks.scale_plan import (
    CPUS_PER_NODE,
    GPU_TYPE,
    GPUS_PER_NODE,
    MEM_PER_CPU,
    SHARDS_PER_GPU,
    Job,
    Node,
    Plan,
)
from slurmlab.core.slurm.hostlist import compress
from slurmlab.core.slurm.ranges import render_index_list

JSONDict = dict[str, Any]


def num(template: object, value: float) -> object:
    """``value`` in the template's number shape."""
    if isinstance(template, dict) and "number" in template:
        return {**template, "set": True, "infinite": False, "number": value}
    return value


def state(template: object, value: str) -> object:
    if isinstance(template, list):
        return [value.upper()]
    return value.lower() if isinstance(template, str) and template.islower() else value


def job_templates(jobs: list[JSONDict]) -> dict[str, JSONDict]:
    """The recorded job of each kind (the sandbox's workload has them all)."""

    def first(pred: Any) -> JSONDict:
        return next(j for j in jobs if pred(j))

    def running(j: JSONDict) -> bool:
        st = j["job_state"]
        return "RUNNING" in (st if isinstance(st, list) else [st])

    return {
        "gpu": first(
            lambda j: (
                running(j)
                and len(j.get("gres_detail") or []) == 1
                and str(j["gres_detail"][0]).startswith("gpu:")
            )
        ),
        "multi": first(lambda j: running(j) and len(j.get("gres_detail") or []) > 1),
        "shard": first(lambda j: running(j) and str((j.get("gres_detail") or [""])[0]).startswith("shard:")),
        "pending": first(lambda j: not running(j) and "PENDING" in str(j["job_state"])),
    }


def gres_detail(job: Job, p_shard_gpu: int | None, gpus: tuple[int, ...], count: int, old: bool) -> str:
    if job.kind == "shard":
        if old:
            return f"shard:{GPU_TYPE}:{count}(IDX:{p_shard_gpu})"
        per_gpu = ",".join(
            f"{count if g == p_shard_gpu else 0}/{SHARDS_PER_GPU}" for g in range(GPUS_PER_NODE)
        )
        return f"shard:{GPU_TYPE}:{count}({per_gpu})"
    return f"gpu:{GPU_TYPE}:{len(gpus)}(IDX:{render_index_list(gpus)})"


def _tres(job: Job, cpus: int) -> str:
    return f"cpu={cpus},mem={cpus * MEM_PER_CPU}M,node={job.node_count},billing={cpus}"


def _resources(tmpl: Any, job: Job, plan: Plan) -> object:
    """``job_resources`` in the template's layout, with the job's real nodes and CPUs."""
    if not isinstance(tmpl, dict) or not job.placements:
        return tmpl if job.placements else None
    names = [plan.node_name(p.node) for p in job.placements]
    res = dict(tmpl)
    if isinstance(tmpl.get("nodes"), dict):  # 23.11+: nodes.allocation[], sockets -> cores with a status
        alloc_t = tmpl["nodes"]["allocation"][0]
        allocation = []
        for i, p in enumerate(job.placements):
            per_socket = CPUS_PER_NODE // 2
            sockets = [
                {
                    "index": s,
                    "cores": [
                        {
                            "index": c,
                            "status": [
                                "ALLOCATED"
                                if p.cpu_first <= s * per_socket + c < p.cpu_first + p.cpus
                                else "UNALLOCATED"
                            ],
                        }
                        for c in range(per_socket)
                    ],
                }
                for s in range(2)
            ]
            allocation.append(
                {
                    **alloc_t,
                    "index": i,
                    "name": names[i],
                    "cpus": {"count": p.cpus, "used": 0},
                    "memory": {"used": 0, "allocated": p.cpus * MEM_PER_CPU},
                    "sockets": sockets,
                }
            )
        res["nodes"] = {
            **tmpl["nodes"],
            "count": len(names),
            "list": compress(names),
            "allocation": allocation,
        }
        return res
    alloc_t = tmpl["allocated_nodes"][0]  # 22.05: allocated_nodes[] with sockets {"0": {"cores": {"3": ...}}}
    nodes = []
    for i, p in enumerate(job.placements):
        per_socket = CPUS_PER_NODE // 2
        old_sockets: dict[str, dict[str, dict[str, str]]] = {}
        for cpu in range(p.cpu_first, p.cpu_first + p.cpus):
            old_sockets.setdefault(str(cpu // per_socket), {"cores": {}})["cores"][str(cpu % per_socket)] = (
                "allocated"
            )
        nodes.append(
            {
                **alloc_t,
                "sockets": old_sockets,
                "nodename": names[i],
                "memory_allocated": p.cpus * MEM_PER_CPU,
            }
        )
    res.update(
        nodes=compress(names), allocated_cores=job.cpus, allocated_hosts=len(names), allocated_nodes=nodes
    )
    return res


def job_json(job: Job, plan: Plan, templates: dict[str, JSONDict]) -> JSONDict:
    running = job.state == "RUNNING"
    t = templates[job.kind if running else "pending"]
    old = not isinstance(t["job_state"], list)
    out = dict(t)
    names = [plan.node_name(p.node) for p in job.placements]
    sep = ":" if old else "/"
    gres = f"gres{sep}{'shard' if job.kind == 'shard' else 'gpu'}"
    per_node = job.kind == "multi" or job.kind == "shard"
    out.update(
        job_id=job.job_id,
        name=job.name,
        user_name=job.user,
        user_id=job.uid,
        group_name=job.user,
        group_id=job.uid,
        job_state=state(t["job_state"], job.state),
        state_reason=job.reason,
        nodes=compress(names) if names else "",
        batch_host=names[0] if names else "",
        node_count=num(t["node_count"], job.node_count),
        cpus=num(t["cpus"], job.cpus),
        tasks=num(t["tasks"], job.node_count),
        gres_detail=[gres_detail(job, p.shard_gpu, p.gpus, p.shards, old) for p in job.placements],
        tres_per_job="" if per_node else f"{gres}:{job.count}",
        tres_per_node=(f"{gres}:{GPU_TYPE}:{job.count}" if job.kind == "multi" else f"{gres}:{job.count}")
        if per_node
        else "",
        tres_req_str=_tres(job, job.cpus),
        tres_alloc_str=_tres(job, job.cpus) if running else "",
        job_resources=_resources(t.get("job_resources"), job, plan),
    )
    if isinstance(t.get("array_job_id"), dict) or "array_job_id" in t:
        out["array_job_id"] = num(t["array_job_id"], 0)
    return out


def jobs_doc(plan: Plan, recorded: JSONDict) -> JSONDict:
    templates = job_templates(recorded["jobs"])
    return {**recorded, "jobs": [job_json(j, plan, templates) for j in plan.jobs]}


def gres_used(node: Node, old: bool) -> str:
    gpus = [g for g in range(GPUS_PER_NODE) if not node.gpu_free[g]]
    gpu = f"gpu:{GPU_TYPE}:{len(gpus)}(IDX:{render_index_list(gpus) if gpus else 'N/A'})"
    shards = sum(node.shards_used)
    if old:
        with_shards = sorted(g for g in node.shard_gpus if node.shards_used[g])
        idx = render_index_list(with_shards) if with_shards else "N/A"
        return f"{gpu},shard:{GPU_TYPE}:{shards}(IDX:{idx}),mps:0"
    per_gpu = ",".join(f"{node.shards_used[g]}/{SHARDS_PER_GPU}" for g in range(GPUS_PER_NODE))
    return f"{gpu},shard:{GPU_TYPE}:{shards}({per_gpu})"


def node_state(node: Node) -> str:
    if node.cpus_used == 0 and all(node.gpu_free):
        return "IDLE"
    return "ALLOCATED" if not any(node.gpu_free) or node.cpus_used >= CPUS_PER_NODE else "MIXED"


def node_json(node: Node, plan: Plan, t: JSONDict) -> JSONDict:
    old = not isinstance(t["state"], list)
    out = dict(t)
    used = node.cpus_used
    out.update(
        name=plan.node_name(node.index),
        gres_used=gres_used(node, old),
        state=state(t["state"], node_state(node)),
        alloc_cpus=used,
        alloc_memory=used * MEM_PER_CPU,
        tres_used=f"cpu={used},mem={used * MEM_PER_CPU}M",
    )
    out["alloc_idle_cpus" if "alloc_idle_cpus" in t else "idle_cpus"] = CPUS_PER_NODE - used
    if "state_flags" in t:
        out["state_flags"] = []
    return out


def nodes_doc(plan: Plan, recorded: JSONDict, key: str = "nodes") -> JSONDict:
    t = recorded[key][0]
    return {**recorded, key: [node_json(n, plan, t) for n in plan.nodes]}


def sinfo_doc(plan: Plan, recorded: JSONDict) -> JSONDict:
    """``sinfo --json``: 22.05 lists nodes; 23.11+ one ``sinfo[]`` entry per node and partition."""
    if "sinfo" not in recorded:
        return nodes_doc(plan, recorded)
    t = recorded["sinfo"][0]
    everything = compress(plan.node_name(n.index) for n in plan.nodes)
    partition = copy.deepcopy(t["partition"])
    partition["nodes"].update(configured=everything, total=len(plan.nodes))
    entries = []
    for n in plan.nodes:
        used = n.cpus_used
        entries.append(
            {
                **t,
                "node": {"state": [node_state(n)]},
                "nodes": {
                    **t["nodes"],
                    "nodes": [plan.node_name(n.index)],
                    "allocated": int(used > 0),
                    "idle": int(used == 0),
                },
                "cpus": {**t["cpus"], "allocated": used, "idle": CPUS_PER_NODE - used},
                "gres": {**t["gres"], "used": gres_used(n, False)},
                "partition": partition,
            }
        )
    return {**recorded, "sinfo": entries}


def partitions_doc(plan: Plan, recorded: JSONDict) -> JSONDict:
    t = copy.deepcopy(recorded["partitions"][0])
    n = len(plan.nodes)
    t["nodes"].update(configured=compress(plan.node_name(x.index) for x in plan.nodes), total=n)
    t["cpus"]["total"] = n * CPUS_PER_NODE
    t["tres"]["configured"] = f"cpu={n * CPUS_PER_NODE},mem={n * 2000}G,node={n},billing={n * CPUS_PER_NODE}"
    return {**recorded, "partitions": [t]}
