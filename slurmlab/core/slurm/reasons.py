"""Slurm's pending reasons (``squeue %r``, ``Reason=`` in ``scontrol show job``) in plain words.

One table for every view: the allocation panel, ``%squeue`` and the lab sidebar all show
:func:`explain_reason`'s words and hint, never a reason as Slurm spells it alone.

The names are Slurm's own (``job_state_reason_string`` in ``src/common/job_state_reason.c`` since 24.05,
``job_reason_string`` in ``src/common/slurm_protocol_defs.c`` before), 22.05 to 26.05. About 150 of them are
limits of a QOS or an association, named by one pattern (``QOSMaxGRESPerUser``, ``AssocGrpCPURunMinutesLimit``,
``MaxMemoryPerAccount`` …): those are read by :func:`_limit`, the rest are written out in :data:`_REASONS`.
"""

from __future__ import annotations

import re
from dataclasses import dataclass

__all__ = ["ReasonExplained", "explain_reason", "limit_parts", "plain_reason"]


@dataclass(frozen=True)
class ReasonExplained:
    code: str  # Slurm's word for it, e.g. "Resources" (a ReqNodeNotAvail list is cut to its word)
    words: str  # what it means, in words a workshop attendee understands
    hint: str = ""  # what would help ("" when waiting is all there is to do)
    never: bool = False  # the job will not start as asked: waiting does not help

    @property
    def known(self) -> bool:
        """Whether slurmlab knows this reason (an unknown one keeps Slurm's word as its words)."""
        return self.words != self.code


_LIMITS = "`sacctmgr show qos` and `sacctmgr show assoc user=$USER` show the limits"
_CANCEL = "cancel it (`scancel JOBID`) and ask for less"

# reason -> (words, hint, never)
_REASONS: dict[str, tuple[str, str, bool]] = {
    # the common ones: waiting is all there is to do
    "Resources": ("waiting for resources: the GPUs/CPUs asked for are in use by other jobs", "", False),
    "Priority": ("waiting in line: jobs with higher priority go first", "", False),
    "Dependency": ("waiting for another job it depends on to finish", "", False),
    "BeginTime": ("waiting for its requested start time (--begin)", "", False),
    "Reservation": ("waiting for its reservation to start", "", False),
    "Licenses": ("waiting for a license (-L) that other jobs hold", "", False),
    "Prolog": ("the node is running its prolog before the job starts", "", False),
    "Cleaning": ("Slurm is still cleaning up after the job's previous run (it was requeued)", "", False),
    "Constraints": ("no node with the features asked for (-C) is free right now", "", False),
    "SchedDefer": (
        "the cluster defers immediate allocations (SchedulerParameters=defer)",
        "wait, or ask without --immediate",
        False,
    ),
    "FedJobLock": ("waiting for the clusters of the federation to agree on where it runs", "", False),
    "BurstBufferResources": ("waiting for space in a burst buffer pool", "", False),
    "BurstBufferStageIn": ("its burst buffer is being staged in", "", False),
    "MpiPortsBusy": ("waiting for free MPI ports (MpiParams=ports) on its nodes", "", False),
    "MaxPoweredUpNodes": (
        "waiting: the cluster already has the most nodes powered up that it allows",
        "",
        False,
    ),
    "NvidiaImexChannels": ("waiting for a free NVIDIA IMEX channel", "", False),
    "JobArrayTaskLimit": (
        "its array already runs the most tasks at once that it may (the %N of --array)",
        "change it with `scontrol update JobId=JOBID ArrayTaskThrottle=N`",
        False,
    ),
    "AccountingPolicy": ("held back by a limit of the cluster's accounting policy", _LIMITS, False),
    "None": ("not looked at by the scheduler yet", "", False),
    # held: someone has to release it
    "JobHeldUser": ("held by you", "release it with `scontrol release JOBID`", True),
    "JobHeldAdmin": ("held by an administrator", "ask your administrator", True),
    "JobHoldMaxRequeue": (
        "held after being requeued too many times",
        "look at why it failed, then `scontrol release JOBID`, or cancel it",
        True,
    ),
    "launch failed requeued held": (
        "the launch failed; the job was requeued and held",
        "look at the node's problem, then `scontrol release JOBID`, or cancel it",
        True,
    ),
    "JobLaunchFailure": (
        "the job could not be launched (a file system problem, a missing program …)",
        "check the program and paths, then submit again",
        True,
    ),
    "DependencyNeverSatisfied": ("will never start: a job it depends on failed", "cancel it", True),
    # the request does not fit what the partition or cluster allows
    "PartitionConfig": (
        "asks for more CPUs, memory, nodes or tasks than its partition allows or has",
        _CANCEL + ", or pick a bigger partition (-p)",
        True,
    ),
    "PartitionNodeLimit": (
        "asks for more nodes than the partition allows (or the nodes it needs are down)",
        "ask for fewer nodes (-N)",
        True,
    ),
    "PartitionTimeLimit": ("asks for more time than the partition allows", "ask for less with -t", True),
    "PartitionDown": (
        "its partition is down",
        "wait until an administrator brings it up, or use another partition (-p)",
        False,
    ),
    "PartitionInactive": ("its partition is inactive: it starts no jobs", "use another partition (-p)", True),
    "BadConstraints": ("no node can ever satisfy the request", _CANCEL, True),
    "ReqNodeNotAvail": (
        "a node it needs is down, drained or reserved",
        "wait, or leave such nodes out with -x / pick others with -w",
        False,
    ),
    "Nodes required for job are DOWN, DRAINED or reserved for jobs in higher priority partitions": (
        "a node it needs is down, drained or reserved for jobs of a higher-priority partition",
        "wait, or leave such nodes out with -x / pick others with -w",
        False,
    ),
    "NodeDown": (
        "a node it needs is down",
        "wait until it is back, or cancel and ask for other nodes",
        False,
    ),
    "FrontEndDown": ("the front end node it needs is down", "ask your administrator", False),
    "PowerNotAvail": ("waiting: not enough power is available for it", "", False),
    "PowerReserved": ("waiting: the power it needs is reserved", "", False),
    "ReservationDeleted": (
        "its reservation no longer exists",
        "cancel it and submit without --reservation",
        True,
    ),
    "ReservationInvalid": (
        "the reservation it asks for is not valid for it",
        "check the name with `scontrol show reservation`",
        True,
    ),
    "DeadLine": (
        "it can no longer finish before its --deadline",
        "cancel it, or submit with a later --deadline or less -t",
        True,
    ),
    "BlockFreeAction": ("waiting for a block to be freed (BlueGene)", "", False),
    "BlockMaxError": ("the block it needs has too many errors (BlueGene)", "ask your administrator", True),
    "BurstBufferOperation": ("a burst buffer operation for it failed", "ask your administrator", True),
    "AccountNotAllowed": (
        "its account may not use this partition",
        "use another partition (-p) or account (-A)",
        True,
    ),
    "InvalidAccount": (
        "its account is not valid",
        "ask with a valid -A (`sacctmgr show assoc user=$USER`)",
        True,
    ),
    "InvalidQOS": ("its QOS is not valid", "ask with a valid --qos (`sacctmgr show assoc user=$USER`)", True),
    "QOSNotAllowed": (
        "its QOS may not be used with this account or partition",
        "use another --qos or -p",
        True,
    ),
    "QOSJobLimit": ("its QOS already runs the most jobs it may", "", False),
    "QOSResourceLimit": ("its QOS has reached a resource limit", _LIMITS, False),
    "QOSTimeLimit": ("its QOS has reached its time limit", _LIMITS, False),
    "QOSUsageThreshold": (
        "your usage is above what the QOS allows (UsageThreshold)",
        "ask your administrator",
        False,
    ),
    "AssociationJobLimit": ("your account already runs the most jobs it may", "", False),
    "AssociationResourceLimit": ("your account has reached a resource limit", _LIMITS, False),
    "AssociationTimeLimit": ("your account has reached its time limit", _LIMITS, False),
    "MaxMemPerLimit": (
        "asks for more memory per CPU or per node than the cluster allows (MaxMemPerCPU/Node)",
        "cancel it and ask for less --mem / --mem-per-cpu",
        True,
    ),
    # ended states' reasons, seen with squeue -t all
    "NonZeroExitCode": ("it ended with a non-zero exit code", "", False),
    "OutOfMemory": ("it ran out of memory", "ask for more --mem next time", False),
    "RaisedSignal": ("it ended on a signal", "", False),
    "TimeLimit": ("it reached its time limit", "ask for more with -t next time", False),
    "InactiveLimit": (
        "it was ended: its salloc/srun was silent for longer than the cluster allows",
        "",
        False,
    ),
    "SystemFailure": ("it failed because of Slurm, a file system or the network", "", False),
}

# ---- the limits of a QOS or an association, read from the name ------------------------------------------
_LIMIT = re.compile(
    r"^(?P<who>QOS|Assoc)?(?P<kind>Grp|Max|Min)"
    r"(?P<res>BB|Billing|Cpu|CPU|Energy|GRES|License|Memory|Mem|Node|Unknown|WallDuration|Wall|Jobs|SubmitJobs?)"
    r"(?P<time>Minutes|RunMinutes|RunMins)?(?P<per>PerJob|PerNode|PerUser|PerAccount)?(?:Limit|NotSatisfied)?$"
)
_RES = {
    "BB": "burst buffer",
    "Billing": "billing units",
    "Cpu": "CPUs",
    "CPU": "CPUs",
    "Energy": "energy",
    "GRES": "GPUs (GRES)",
    "License": "licenses",
    "Memory": "memory",
    "Mem": "memory",
    "Node": "nodes",
    "Unknown": "a tracked resource",
    "Wall": "wall time",
    "WallDuration": "time",
}


def _limit(name: str) -> tuple[str, str, bool] | None:
    m = _LIMIT.match(name)
    if m is None:
        return None
    who, kind, res, time, per = m.group("who", "kind", "res", "time", "per")
    owner = "your account" if who == "Assoc" else "your QOS"
    if res in ("Jobs", "SubmitJob", "SubmitJobs"):
        what = "running jobs" if res == "Jobs" else "jobs queued (running or pending)"
        if kind == "Grp":
            return (
                f"{owner} (all its users together) already has the most {what} it allows",
                "it starts when other jobs end",
                False,
            )
        if per == "PerAccount":
            return (
                f"your account already has the most {what} your QOS allows",
                "it starts when your account's other jobs end",
                False,
            )
        return (
            f"you already have the most {what} {owner} allows",
            "it starts when one of your jobs ends; cancel one to make room",
            False,
        )
    thing = _RES[res]
    if kind == "Min":
        return (
            f"asks for less {thing} than {owner} requires of each job",
            f"ask for more {thing}, or use another QOS (--qos)",
            True,
        )
    if res == "WallDuration":
        return f"asks for more time than {owner} allows a job", "cancel it and ask for less with -t", True
    if kind == "Max" and per in ("PerJob", "PerNode"):
        scope = "per job" if per == "PerJob" else "on one node"
        if time:
            return (
                f"asks for more {thing} × time {scope} than {owner} allows",
                f"cancel it and ask for less {thing} or a shorter -t ({_LIMITS})",
                True,
            )
        return f"asks for more {thing} {scope} than {owner} allows", f"{_CANCEL} ({_LIMITS})", True
    if per in ("PerUser", "PerAccount"):
        whose = "your jobs" if per == "PerUser" else "your account's jobs"
        unit = "user" if per == "PerUser" else "account"
        if time:
            return (
                f"{whose} already hold the most {thing} × running time your QOS allows per {unit}",
                "it starts as running jobs end; a shorter -t helps",
                False,
            )
        return (
            f"{whose} already use the most {thing} your QOS allows per {unit}",
            "it starts when your other jobs end; cancel one, or ask for less",
            False,
        )
    # Grp: a total over every job of the QOS or association
    if time == "Minutes":
        return (
            f"{owner} has used up its {thing} × time budget (past and present jobs)",
            "ask your administrator; waiting does not refill it soon",
            False,
        )
    if time:
        return (
            f"the running jobs of {owner} already hold the most {thing} × time it allows",
            "it starts as running jobs end; a shorter -t helps",
            False,
        )
    return (
        f"the running jobs of {owner} together use the most {thing} it allows",
        "it starts when other jobs end",
        False,
    )


def limit_parts(reason: str | None) -> dict[str, str] | None:
    """A QOS/association limit reason cut into its parts (``who`` QOS/Assoc/"", ``kind`` Grp/Max/Min, ``res``,
    ``time``, ``per``; "" where absent), for asking which limit it is; None for any other reason."""
    m = _LIMIT.match(_key(reason or ""))
    return None if m is None else {k: v or "" for k, v in m.groupdict().items()}


def _key(reason: str) -> str:
    key = reason.strip()
    if key.startswith("(") and key.endswith(")"):
        key = key[1:-1].strip()
    if key in _REASONS:
        return key
    key = key.split(",")[0].strip()
    if key.startswith("ReqNodeNotAvail"):
        return "ReqNodeNotAvail"
    return key


def explain_reason(reason: str | None) -> ReasonExplained | None:
    """Slurm's reason explained; None for no reason (``None`` or empty). An unknown reason keeps Slurm's
    word as its words, so nothing is ever hidden."""
    if not reason or reason.strip() in ("", "None", "(None)"):
        return None
    key = _key(reason)
    known = _REASONS.get(key) or _limit(key)
    if known is None:
        return ReasonExplained(reason.strip(), reason.strip())
    return ReasonExplained(key, *known)


def plain_reason(reason: str | None) -> str:
    """``words (Slurm's reason): hint``; an unknown reason as Slurm wrote it; "" for none."""
    explained = explain_reason(reason)
    if explained is None:
        return ""
    if not explained.known:
        return explained.code
    raw = (reason or explained.code).strip()
    if raw.startswith("(") and raw.endswith(")"):  # squeue's NODELIST(REASON) column wraps it
        raw = raw[1:-1]
    text = f"{explained.words} ({raw})"
    return f"{text}: {explained.hint}" if explained.hint else text
