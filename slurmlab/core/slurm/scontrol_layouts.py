"""How Slurm lays out each kind of ``scontrol show`` record (``src/api/*_info.c``, 22.05 to 26.05): its first
key, its free-text keys and where each ends, the keys of its first and second line, and the keys the one-line
(``-o``) form splits on. :mod:`slurmlab.core.slurm.scontrol_records` reads records by these layouts."""

from __future__ import annotations

import re
from dataclasses import dataclass

__all__ = ["LAYOUTS", "Layout"]


@dataclass(frozen=True)
class Layout:
    """How Slurm prints one kind of record (``src/api/*_info.c``, 22.05 to 26.05).

    ``free`` maps each user- or admin-controlled free-text key to the key Slurm prints after it
    on the same line (None: it is the last on its line), so its value may hold spaces, ``=`` and
    anything else and still end where Slurm ended it. ``first_line`` keys only ever appear on
    the record's first line; one of ``second`` starts the second line (so a line forged by a name
    on the first line is caught even when it names a key the record does not otherwise hold; 26.05
    prints ``SLUID=`` before ``UserId=``). ``known`` are the keys the one-line (``-o``) form splits on.
    """

    first_key: str
    free: dict[str, str | None]
    first_line: frozenset[str] = frozenset()
    known: frozenset[str] = frozenset()
    detail: bool = False
    second: tuple[str, ...] = ()  # the keys one of which starts the second line, always

    def oneline_end(self) -> re.Pattern[str]:
        keys = "|".join(re.escape(k) for k in sorted(self.known | set(self.free), key=len, reverse=True))
        return re.compile(rf"\s+(?=(?:{keys})=)")


_JOB_KEYS = frozenset(
    """JobId ArrayJobId ArrayTaskId ArrayTaskThrottle HetJobId HetJobOffset HetJobIdSet JobName
    UserId GroupId MCS_label Priority Nice Account QOS WCKey JobState Reason Dependency Requeue
    Restarts BatchFlag Reboot ExitCode DerivedExitCode RunTime TimeLimit TimeMin SubmitTime
    EligibleTime AccrueTime StartTime EndTime Deadline PreemptEligibleTime PreemptTime SuspendTime
    SecsPreSuspend LastSchedEval Scheduler ResizeTime Partition AllocNode:Sid ReqNodeList
    ExcNodeList NodeList SchedNodeList BatchHost FedOrigin FedViableSiblings FedActiveSiblings
    NumNodes NumCPUs NumTasks CPUs/Task ReqB:S:C:T TRES ReqTRES AllocTRES Socks/Node
    NtasksPerN:B:S:C CoreSpec ThreadSpec JOB_GRES Nodes CPU_IDs Mem GRES MinCPUsNode MinMemoryCPU
    MinMemoryNode MinTmpDiskNode Features Prefer DelayBoot Reservation OverSubscribe Contiguous
    Licenses LicensesAlloc Network Command WorkDir AdminComment SystemComment Comment StdErr StdIn
    StdOut BatchScript Switches BurstBuffer BurstBufferState CpuFrequency Power CpusPerTres
    MemPerTres TresBind TresFreq TresPerJob TresPerNode TresPerSocket TresPerTask GresEnforceBind
    KillOnInvalidDependent SpreadJob MailUser MailType NtasksPerTRES SLUID
    Container ContainerID Extra SegmentSize ResvPorts SelinuxContext""".split()
)
_JOB = Layout(
    first_key="JobId",
    free={
        "JobName": None,
        "Comment": None,
        "AdminComment": None,
        "SystemComment": None,
        "WorkDir": None,
        "Command": None,
        "StdErr": None,
        "StdIn": None,
        "StdOut": None,
        "Extra": None,
        "Container": None,
        "ContainerID": None,
        "Network": None,
        "BurstBuffer": None,
        "SelinuxContext": None,
        "Features": "DelayBoot",
        "MailUser": "MailType",
    },
    first_line=frozenset(
        {
            "JobId",
            "ArrayJobId",
            "ArrayTaskId",
            "ArrayTaskThrottle",
            "HetJobId",
            "HetJobOffset",
            "HetJobIdSet",
            "JobName",
        }
    ),
    known=_JOB_KEYS,
    detail=True,
    second=("UserId", "SLUID"),
)
_NODE = Layout(
    first_key="NodeName",
    free={
        "OS": None,
        "Reason": None,
        "Comment": None,
        "Extra": None,
        "AvailableFeatures": None,
        "ActiveFeatures": None,
        "Partitions": None,
        "InstanceId": "InstanceType",
        "InstanceType": None,
        "Topology": None,
    },
    first_line=frozenset({"NodeName"}),
    known=frozenset(
        """NodeName Arch CoresPerSocket CPUAlloc CPUEfctv CPUTot CPULoad AvailableFeatures
        ActiveFeatures Gres GresDrain GresUsed NodeAddr NodeHostName Port Version OS RealMemory
        AllocMem FreeMem Sockets Boards State ThreadsPerCore TmpDisk Weight Owner MCS_label
        Partitions BootTime SlurmdStartTime LastBusyTime ResumeAfterTime CfgTRES AllocTRES
        CurrentWatts AveWatts CapWatts ExtSensorsJoules ExtSensorsWatts ExtSensorsTemp Reason
        Comment Extra InstanceId InstanceType Topology MemSpecLimit CoreSpecCount CPUSpecList
        TresWeights Lowest""".split()
    ),
)
_PARTITION = Layout(
    first_key="PartitionName",
    free={},
    first_line=frozenset({"PartitionName"}),
    known=frozenset(
        """PartitionName AllowGroups AllowAccounts AllowQos AllocNodes Default QoS DefaultTime
        DisableRootJobs ExclusiveUser ExclusiveTopo GraceTime Hidden MaxNodes MaxTime MinNodes LLN
        MaxCPUsPerNode MaxCPUsPerSocket Nodes PriorityJobFactor PriorityTier RootOnly ReqResv
        OverSubscribe OverTimeLimit PreemptMode State TotalCPUs TotalNodes SelectTypeParameters
        JobDefaults DefMemPerNode MaxMemPerNode DefMemPerCPU MaxMemPerCPU TRES TRESBillingWeights
        DenyAccounts DenyQos Alternate PowerDownOnIdle ResumeTimeout SuspendTime SuspendTimeout
        Topology""".split()
    ),
)
_STEP = Layout(
    first_key="StepId",
    free={"Name": "Network", "Network": None, "Container": None, "ContainerID": None},
    first_line=frozenset({"StepId", "UserId", "StartTime", "TimeLimit"}),
    known=frozenset(
        """StepId UserId StartTime TimeLimit State Partition NodeList Nodes CPUs Tasks Name Network
        TRES ResvPorts CPUFreqReq Dist SrunHost:Pid TresPerStep TresPerNode TresPerTask
        TresPerSocket CpusPerTres MemPerTres TresBind TresFreq Container ContainerID""".split()
    ),
)
LAYOUTS = {lay.first_key: lay for lay in (_JOB, _NODE, _PARTITION, _STEP)}
