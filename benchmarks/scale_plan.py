"""Who runs where on the scaled cluster: a deterministic plan of nodes, GPUs and jobs (no Slurm text yet).

:func:`plan` places jobs first-fit on ``nodes`` nodes of 8 GPUs (32 shards: 4 per GPU) and 112 CPUs, so
every running job's GPU indices agree with its nodes' ``gres_used``: a GPU is taken whole (``gpu``) or cut in
shards, never both, exactly as Slurm allocates. What does not fit (or is held back to keep a realistic
pending share) is PENDING with a real reason. :mod:`scale_render` turns the plan into Slurm's own layouts.
"""

from __future__ import annotations

import random
from dataclasses import dataclass, field

GPUS_PER_NODE = 8
SHARDS_PER_GPU = 4
CPUS_PER_NODE = 112
MEM_PER_CPU = 1000  # MB, the sandbox's DefMemPerCPU
GPU_TYPE = "h100"
PARTITION = "gpu"
FIRST_JOB_ID = 1001
USERS = ("alice", "bob", "chen", "dana", "emeka", "farah", "goran", "hana", "ivan", "jules", "kofi", "lena")
PENDING_REASONS = ("Resources", "Priority", "Priority", "JobHeldUser", "QOSMaxGRESPerUser", "Dependency")
# GPUs per single-node job: mostly 1, 2, 4 and 8 as on real clusters, every count from 1 to 8 present
GPU_COUNTS = (1, 1, 1, 1, 2, 2, 2, 3, 4, 4, 4, 5, 6, 7, 8, 8)


@dataclass
class Placement:
    """One node of a running job: its GPU indices (whole GPUs) or the one GPU its shards sit on."""

    node: int
    gpus: tuple[int, ...] = ()
    shard_gpu: int | None = None
    shards: int = 0
    cpu_first: int = 0
    cpus: int = 0


@dataclass
class Job:
    job_id: int
    name: str
    user: str
    uid: int
    kind: str  # "gpu" (one node), "multi" (several nodes, GPUs per node), "shard"
    state: str
    reason: str
    count: int  # GPUs (per node for "multi") or shards
    node_count: int
    cpus: int
    placements: list[Placement] = field(default_factory=list)


@dataclass
class Node:
    index: int
    gpu_free: list[bool] = field(default_factory=lambda: [True] * GPUS_PER_NODE)
    shards_used: list[int] = field(default_factory=lambda: [0] * GPUS_PER_NODE)
    shard_gpus: set[int] = field(default_factory=set)
    cpus_used: int = 0

    def free_gpus(self) -> list[int]:
        return [g for g in range(GPUS_PER_NODE) if self.gpu_free[g] and g not in self.shard_gpus]

    def take_cpus(self, n: int) -> int:
        first = self.cpus_used
        self.cpus_used += n
        return first


@dataclass
class Plan:
    nodes: list[Node]
    jobs: list[Job]
    width: int  # digits of a node name: node0001

    def node_name(self, index: int) -> str:
        return f"node{index + 1:0{self.width}d}"


def _fit_gpus(node: Node, count: int, cpus: int) -> list[int] | None:
    free = node.free_gpus()
    if len(free) < count or node.cpus_used + cpus > CPUS_PER_NODE:
        return None
    return free[:count]


def _fit_shard(node: Node, count: int) -> int | None:
    for g in sorted(node.shard_gpus):
        if node.shards_used[g] + count <= SHARDS_PER_GPU:
            return g
    free = node.free_gpus()
    return free[0] if free and node.cpus_used < CPUS_PER_NODE else None


class _Placer:
    """First fit from a moving cursor, looking at a bounded window so planning stays linear in jobs."""

    WINDOW = 24

    def __init__(self, nodes: list[Node]) -> None:
        self.nodes = nodes
        self.cursor = 0

    def _window(self) -> list[Node]:
        n = len(self.nodes)
        return [self.nodes[(self.cursor + k) % n] for k in range(min(self.WINDOW, n))]

    def single(self, job: Job) -> bool:
        for node in self._window():
            if job.kind == "shard":
                g = _fit_shard(node, job.count)
                if g is None:
                    continue
                node.shard_gpus.add(g)
                node.shards_used[g] += job.count
                job.placements = [Placement(node.index, (), g, job.count, node.take_cpus(job.cpus), job.cpus)]
            else:
                gpus = _fit_gpus(node, job.count, job.cpus)
                if gpus is None:
                    continue
                for g in gpus:
                    node.gpu_free[g] = False
                job.placements = [
                    Placement(node.index, tuple(gpus), None, 0, node.take_cpus(job.cpus), job.cpus)
                ]
            self.cursor = node.index
            return True
        self.cursor = (self.cursor + self.WINDOW) % len(self.nodes)
        return False

    def multi(self, job: Job) -> bool:
        per_node_cpus = job.cpus // job.node_count
        chosen: list[tuple[Node, list[int]]] = []
        for node in self._window():
            gpus = _fit_gpus(node, job.count, per_node_cpus)
            if gpus is not None:
                chosen.append((node, gpus))
                if len(chosen) == job.node_count:
                    break
        if len(chosen) < job.node_count:
            self.cursor = (self.cursor + self.WINDOW) % len(self.nodes)
            return False
        for node, gpus in chosen:
            for g in gpus:
                node.gpu_free[g] = False
            job.placements.append(
                Placement(node.index, tuple(gpus), None, 0, node.take_cpus(per_node_cpus), per_node_cpus)
            )
        self.cursor = chosen[-1][0].index
        return True


def _new_job(rng: random.Random, i: int) -> Job:
    user_no = min(int(rng.expovariate(0.35)), len(USERS) - 1)  # a few heavy users, a long tail
    roll = rng.random()
    if roll < 0.12:
        kind, count, node_count = "shard", rng.randint(1, SHARDS_PER_GPU), 1
    elif roll < 0.22:
        kind, count, node_count = "multi", rng.choice((1, 2, 4, 8, 8)), rng.randint(2, 4)
    else:
        kind, count, node_count = "gpu", rng.choice(GPU_COUNTS), 1
    cpus = (1 if kind == "shard" else 4 * count) * node_count
    return Job(
        job_id=FIRST_JOB_ID + i,
        name=f"{kind}-{rng.choice(('train', 'eval', 'nb', 'sweep'))}-{i}",
        user=USERS[user_no],
        uid=1001 + user_no,
        kind=kind,
        state="PENDING",
        reason=rng.choice(PENDING_REASONS),
        count=count,
        node_count=node_count,
        cpus=cpus,
    )


def plan(nodes: int, jobs: int, seed: int = 14) -> Plan:
    """Place ``jobs`` jobs on ``nodes`` nodes: about 60 % asked to run, as many as fit do; the rest pend."""
    rng = random.Random(seed)
    cluster = [Node(i) for i in range(nodes)]
    placer = _Placer(cluster)
    out: list[Job] = []
    for i in range(jobs):
        job = _new_job(rng, i)
        wants_to_run = rng.random() < 0.6 and job.reason != "JobHeldUser"
        placed = wants_to_run and (placer.multi(job) if job.kind == "multi" else placer.single(job))
        if placed:
            job.state, job.reason = "RUNNING", "None"
        elif wants_to_run:
            job.reason = "Resources"
        out.append(job)
    return Plan(cluster, out, max(4, len(str(nodes))))
