"""What the rest of slurmlab asks Slurm, each as an argv list through the one runner.

Every query is a pair (argv, parser) (:mod:`slurmlab.slurm.query`), so the sync and async APIs share one
definition. The JSON or text form is chosen from the Slurm version (detected once per configuration):
``scontrol --json`` exists from 23.02; on 22.05 the ``scontrol show … -d`` text is the only place that
names a job's GPU indices. The queries live in modules named after what they ask; this module is where
callers import them from.

API::

    slurm_version(runner) -> tuple[int, ...]            ping(runner) -> dict            (controller)
    brief_states(ids, runner) -> {job_id: JobBrief}     (the poller's cheap call)       (job_queries)
    job_detail(job_id, runner) -> Job                   (scontrol show job -d)
    list_jobs(runner, *, user=None, all_users=False, active_only=True) -> JobList
    cancel_job(job_id, runner)         job_ids_by_name(name, runner) -> [str]
    hold_job(job_id, runner)           release_job(job_id, runner)      (scontrol hold/release)
    my_tagged_jobs(prefix, runner) -> [Job]
    job_owner_uid(job_id, runner) -> int                (squeue %U: the uid alone)       (owners)
    job_owners(runner) -> {job_id: uid}                 (squeue %A|%U: every job's uid)
    check_mine(job_id, runner)                          current_uid(), current_user()    (identity)
    list_nodes(runner) -> [Node]       list_partitions(runner) -> [Partition]           (node_queries)
    node_states(runner), node_states_of(nodes, runner)  inventory(runner) -> ClusterInventory
    a<name>(...)  asyncio twins of the listing queries

Who owns a job is never read from a record that holds free text: a job name or comment is
whatever its submitter typed (``y UserId=root(0)``), so ownership comes from ``squeue``'s
``%U`` field alone, compared with this process's effective uid. A listing in which some
records cannot be read still answers with the others; the bad ones travel in
``JobList.problems`` so that every caller can say so instead of failing or hiding them.
"""

from __future__ import annotations

from slurmlab.slurm.controller import SCONTROL_JSON_SINCE, aslurm_version, ping, slurm_version
from slurmlab.slurm.identity import current_uid, current_user, user_name
from slurmlab.slurm.job_queries import (
    ACTIVE_STATES,
    alist_jobs,
    brief_states,
    cancel_job,
    hold_job,
    job_detail,
    job_ids_by_name,
    list_jobs,
    my_tagged_jobs,
    release_job,
)
from slurmlab.slurm.node_queries import (
    alist_nodes,
    build_inventory,
    default_partition,
    inventory,
    list_nodes,
    list_partitions,
    node_states,
    node_states_of,
)
from slurmlab.slurm.owners import (
    acheck_mine,
    ajob_owner_uid,
    ajob_owners,
    check_mine,
    job_owner_uid,
    job_owners,
)
from slurmlab.slurm.query import JobList, Listing

__all__ = [
    "ACTIVE_STATES",
    "SCONTROL_JSON_SINCE",
    "JobList",
    "Listing",
    "acheck_mine",
    "ajob_owner_uid",
    "ajob_owners",
    "alist_jobs",
    "alist_nodes",
    "aslurm_version",
    "brief_states",
    "build_inventory",
    "cancel_job",
    "check_mine",
    "current_uid",
    "current_user",
    "default_partition",
    "hold_job",
    "inventory",
    "job_detail",
    "job_ids_by_name",
    "job_owner_uid",
    "job_owners",
    "list_jobs",
    "list_nodes",
    "list_partitions",
    "my_tagged_jobs",
    "node_states",
    "node_states_of",
    "ping",
    "release_job",
    "slurm_version",
    "user_name",
]
