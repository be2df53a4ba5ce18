"""The JSON the sidebar reads, written once: one TypedDict per answer and per part of an answer.

The server builds its payloads as these types (mypy checks every key it writes), and
``extensions/slurmlab-lab/src/api.ts`` declares the same shapes as TypeScript interfaces;
``TS_INTERFACES`` pairs them, and a test holds the two to each other field by field, both ways.
A field that may be missing is ``NotRequired`` here and ``name?:`` there; ``X | None`` here is
``X | null`` there.

Routes (under ``<base_url>/slurmlab/api/``) and what they answer::

    GET  clusters            ClustersAnswer    the clusters this server can show
    GET  status              StatusAnswer
    GET  queue?scope=S       QueueAnswer       S = mine | all
    GET  nodes               NodesAnswer
    GET  jobs/ID             JobDetailAnswer
    POST jobs/ID/cancel      CancelAnswer
    POST jobs/ID/hold        JobActionAnswer   scontrol uhold of a pending job of the server's user
    POST jobs/ID/release     JobActionAnswer   scontrol release of a held job of the server's user
    GET  recent              RecentJobsAnswer  my jobs of the last day, from Slurm accounting (slurmlab.server.recent)
    GET  session             SessionAnswer     the job this server runs in, if any (slurmlab.server.session)
    GET  kernels             KernelsAnswer     this server's kernels on GPU nodes (slurmlab.server.kernels)
    any error                ErrorAnswer       with the HTTP status

Every route but ``clusters`` takes ``cluster=ID`` (an id of ``clusters``; none: the server's own
Slurm); an id the server does not know is a 400 that names the known ones.

Every GET answer is stamped with when Slurm last confirmed it (:class:`Stamped`; the handlers add
it, see ``write_entry``). Times are ISO 8601 strings, durations whole seconds (``_s``).
Time left and time pending are not sent: the client counts down to ``ends_at`` and up from
``submit_time`` itself, so the answer stays the same (and keeps its ETag) from one second to the next.
"""

from __future__ import annotations

from typing import Any, Literal, NotRequired, TypedDict

__all__ = [
    "TS_INTERFACES",
    "CancelAnswer",
    "ClusterView",
    "ClustersAnswer",
    "ErrorAnswer",
    "GpuSlot",
    "JobActionAnswer",
    "JobDetailAnswer",
    "JobGpu",
    "JobView",
    "KernelGpu",
    "KernelJobView",
    "KernelSpecView",
    "KernelsAnswer",
    "LinkView",
    "NodeView",
    "NodesAnswer",
    "ProblemView",
    "QueueAnswer",
    "RecentJob",
    "RecentJobsAnswer",
    "SessionAnswer",
    "Stamped",
    "StatusAnswer",
]


class JobGpu(TypedDict):
    """One GPU of a job on one node (``index`` is the node's GPU index; ``count`` shards or MPS share)."""

    node: str
    index: int | None
    type: str | None
    kind: str  # gpu | shard | mps
    count: int | None


class JobView(TypedDict):
    job_id: str
    display_id: str
    name: str
    user: str | None  # from squeue's uid of the job, never from its record
    mine: bool  # owned by the uid the server runs as
    state: str
    reason: str | None  # as Slurm spells it
    reason_words: str | None  # the reason in plain words (slurmlab.core.slurm.reasons)
    reason_hint: str | None  # what would help, when something would
    partition: str | None
    nodes: str | None  # hostlist
    time_limit_s: int | None
    submit_time: str | None  # the client counts "pending for" up from it
    start_time: str | None
    expected_start: str | None  # Slurm's expected start of a pending job, once it has one
    ends_at: str | None  # when the time limit ends a job holding nodes
    gpus: list[JobGpu]
    gres: str | None  # what was asked for, as text


class GpuSlot(TypedDict):
    """One configured GPU (or MIG instance) of a node and who uses it."""

    index: int
    type: str | None
    mig: bool
    jobs: list[str]
    shards_used: int
    shards_total: int
    whole: bool


class NodeView(TypedDict):
    name: str
    state: str
    partitions: list[str]
    cpus: int | None
    alloc_cpus: int | None
    gres: str | None
    reason: str | None
    gpus: list[GpuSlot]


class ProblemView(TypedDict):
    """A record Slurm printed that could not be read: listed, never dropped."""

    kind: str  # job | node
    record: str | None
    message: str


class Stamped(TypedDict):
    as_of: NotRequired[str]
    age_s: NotRequired[float]


class QueueAnswer(Stamped):
    scope: Literal["mine", "all"]
    user: str
    jobs: list[JobView]
    problems: list[ProblemView]


class NodesAnswer(Stamped):
    nodes: list[NodeView]
    problems: list[ProblemView]


class LinkView(TypedDict):
    """The SSH link to a cluster on another machine (:mod:`slurmlab.server.remote`)."""

    url: str  # ssh://user@login.example
    # up; connecting (never up yet); down (since ``since``, reconnecting); needs_login (a password, a one-time
    # code or the host key needs the person: connected from a notebook with %slurm use, the server shares it)
    state: Literal["up", "connecting", "down", "needs_login"]
    since: float | None  # when it was found down (seconds since the epoch); None while up
    message: str | None  # the state in words, with what to do next


class ClusterView(TypedDict):
    """A cluster the server can show: its own Slurm, a slurmlab sandbox of this user on this machine, or a
    cluster over SSH that the server's settings name (``link``)."""

    id: str  # what ``cluster=`` takes
    name: str | None  # ClusterName of its slurm.conf, when readable
    sandbox: str | None  # the hardware profile, when it is a slurmlab sandbox
    label: str  # what the sidebar calls it: "sandbox h200-mig"
    conf: str | None  # the slurm.conf its commands read (None: Slurm's default or configless)
    own: bool  # the Slurm of the server's own environment (SLURM_CONF)
    link: NotRequired[LinkView]  # only for a cluster over SSH


class ClustersAnswer(Stamped):
    clusters: list[ClusterView]
    default: str  # the id a route without ``cluster=`` shows


class StatusAnswer(Stamped):
    cluster: ClusterView | None  # the cluster this answer is about
    reachable: bool
    version: str | None
    poll_interval_s: float  # how often the server asks Slurm for the viewer's own jobs
    cluster_poll_interval_s: float  # how often for the whole cluster (every node, every job)
    user: str
    error: str | None
    error_kind: str | None
    # while slow answers or a rate limit stretch the polls: who slows the updates and how often they come
    slow: str | None


class JobDetailAnswer(JobView, Stamped):
    detail: dict[str, Any]  # the whole model (Job.to_dict), for the curious


class CancelAnswer(TypedDict):
    job_id: str
    cancelled: bool
    user: str


class JobActionAnswer(TypedDict):
    job_id: str
    action: str  # "hold" or "release"
    done: bool
    user: str


class RecentJob(TypedDict):
    """One of the server user's recent jobs, as Slurm accounting remembers it (``sacct``)."""

    job_id: str
    name: str
    state: str  # Slurm's word
    state_words: str  # in plain words (slurmlab.core.diagnosis.fairshare.state_in_words)
    exit_code: int | None
    signal: int | None
    elapsed_s: int | None
    time_limit_s: int | None
    gpus: int
    start_time: str | None
    end_time: str | None
    efficiency: str | None  # the seff-like line, once the job has run


class RecentJobsAnswer(Stamped):
    user: str
    since_hours: float
    accounting: bool  # false: accounting is off (or unreachable); ``message`` says how to turn it on
    message: str | None
    jobs: list[RecentJob]


class SessionAnswer(Stamped):
    """The job this Jupyter server runs in (JupyterHub's batchspawner, Open OnDemand): the sidebar's first row."""

    job_id: str | None  # None: the server runs outside any job (or Slurm did not confirm the one it names)
    job: JobView | None  # read once; the sidebar prefers the job's row of the latest own-jobs listing
    problem: str | None  # why a job the environment names is not taken as this session's
    words: str  # what becomes of it: never cancelled by slurmlab, ends when the server is stopped


class KernelGpu(TypedDict):
    node: str
    indices: list[int]  # the node's GPU indices the kernel's job holds


class KernelJobView(TypedDict):
    """One kernel started by slurmlab's provisioner and the job it runs in (its provisioner's status)."""

    kernel_id: str
    kernel_name: str  # the kernel spec's name
    notebook: str | None  # the notebook it was started for (jupyter_server's session name)
    phase: str  # checking | pending | starting | running | ended | released | refused
    job_id: str | None
    message: str  # the provisioner's sentence (why it waits, how it ended)
    reason: str | None  # Slurm's own pending reason or end state
    why: str  # the reason in plain words
    expected_start: str | None
    nodes: list[str]
    gpus: list[KernelGpu]
    step: str | None  # J.S of the kernel's step
    request: str  # the request in words
    ends_at: str | None  # when the time limit ends the job (running only); the client counts down


class KernelSpecView(TypedDict):
    name: str
    display_name: str


class KernelsAnswer(Stamped):
    kernels: list[KernelJobView]
    specs: list[KernelSpecView]  # installed kernel specs that start a kernel on a GPU node
    words: str  # the kernel owns its job: shutting it down releases it


class ErrorAnswer(TypedDict):
    message: str
    reason: str | None


# TypeScript interface in api.ts -> the TypedDict it mirrors
TS_INTERFACES: dict[str, type] = {
    "IJobGpu": JobGpu,
    "IJob": JobView,
    "IJobDetail": JobDetailAnswer,
    "IGpuSlot": GpuSlot,
    "INode": NodeView,
    "IProblem": ProblemView,
    "IStamped": Stamped,
    "IQueue": QueueAnswer,
    "INodes": NodesAnswer,
    "IStatus": StatusAnswer,
    "ICluster": ClusterView,
    "IClusters": ClustersAnswer,
    "ILink": LinkView,
    "ICancelled": CancelAnswer,
    "IJobAction": JobActionAnswer,
    "IErrorBody": ErrorAnswer,
    "IRecentJob": RecentJob,
    "IRecentJobs": RecentJobsAnswer,
    "ISession": SessionAnswer,
    "IKernelGpu": KernelGpu,
    "IKernelJob": KernelJobView,
    "IKernelSpec": KernelSpecView,
    "IKernels": KernelsAnswer,
}
