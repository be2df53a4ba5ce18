"""Slurm accounting of a sandbox, rendered (pure: text in, text out): slurmdbd.conf, the accounting lines of
slurm.conf, and the ``sacctmgr`` commands that give the cluster its accounts, users and QOS.

The QOS are those real GPU sites set: ``normal`` caps each user at four GPUs (``MaxTRESPerUser=gres/gpu=4``),
``debug`` is short (30 minutes) and scheduled first. Every user of the sandbox may use both, in the accounts
``research`` (their default) and ``teaching``. Fair-share is on (``priority/multifactor``).

Order matters and is why the setup comes in two parts (:func:`setup_before_ctld`, :func:`setup_after_ctld`):
the cluster must exist in the database before slurmctld registers, and a limit on ``gres/gpu`` can be set
only once slurmctld has told slurmdbd about that TRES (before, sacctmgr refuses it as unknown).
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from dataclasses import dataclass

from slurmlab.sandbox.ports import LOOPBACK

__all__ = [
    "ACCOUNTS",
    "JOB_ACCT_GATHER",
    "DATABASE",
    "GPU_QOS_LIMIT",
    "QOS",
    "AccountingContext",
    "accounting_tres",
    "render_slurmdbd_conf",
    "setup_after_ctld",
    "setup_before_ctld",
    "slurm_conf_lines",
    "users_to_add",
]

DATABASE = "slurmlab_acct"  # StorageLoc: a database of its own in the sandbox's private MariaDB
ACCOUNTS = (("research", "GPU research"), ("teaching", "workshops and courses"))
GPU_QOS_LIMIT = 4
# (name, settings); normal exists in every Slurm database, debug is created
QOS = (
    ("normal", ("Priority=10", f"MaxTRESPerUser=gres/gpu={GPU_QOS_LIMIT}")),
    ("debug", ("Priority=1000", "MaxWall=00:30:00", f"MaxTRESPerUser=gres/gpu={GPU_QOS_LIMIT}")),
)
# GPU memory and utilisation TRES (gres/gpumem, gres/gpuutil): in the 24.11 and 26.05 builds, not in Debian's
# 22.05 (its libraries do not know the names); 23.02 is the first release that accounts them
_GPU_USAGE_TRES = (23, 2)


# In every sandbox, with or without storage: the gatherer samples each task's /proc (so ``sstat`` answers and
# MaxRSS reaches sacct), and OverMemoryKill makes it end a step whose RSS passes its --mem as OUT_OF_MEMORY (the
# sandbox's proctrack/linuxproc and task/affinity have no cgroup to enforce memory). Two seconds between samples
# catch a short overrun; a sample of a handful of tasks costs nothing.
JOB_ACCT_GATHER = (
    "JobAcctGatherType=jobacct_gather/linux",
    "JobAcctGatherFrequency=task=2",
    "JobAcctGatherParams=OverMemoryKill",
)


@dataclass(frozen=True)
class AccountingContext:
    """Where and how one sandbox's slurmdbd runs."""

    directory: str  # the sandbox folder (logs, pid files)
    user: str  # SlurmUser of slurmdbd and the MariaDB user it connects as (unix_socket authentication)
    port: int  # DbdPort
    munge_socket: str
    database: str = DATABASE
    # the loopback address slurmdbd binds by name, as the other daemons (render.RenderContext.bind_address);
    # None: it binds every address
    bind_address: str | None = LOOPBACK


def _plain(value: str, what: str) -> str:
    """A value for a ``Key=value`` line: one line, no spaces, no comment sign (it would change the file)."""
    if not value or any(c.isspace() or c in "#=" for c in value):
        raise ValueError(f"{what} {value!r} cannot be written into slurmdbd.conf")
    return value


def render_slurmdbd_conf(ctx: AccountingContext) -> str:
    """slurmdbd.conf: loopback only, the sandbox's munge, MariaDB through its socket (no password: the
    MariaDB account of ``ctx.user`` authenticates by the Unix user of the connection).

    ``DbdAddr`` is only the address others are told to connect to: slurmdbd binds every address unless
    ``NoInAddrAny``, which it reads from this file (not from slurm.conf), makes it bind what the host name
    resolves to."""
    if not 1024 <= ctx.port <= 65535:
        raise ValueError(f"DbdPort {ctx.port} is out of range 1024-65535")
    d = ctx.directory
    lines = [
        "# slurmlab sandbox: accounting (slurmdbd), readable by SlurmUser only",
        "AuthType=auth/munge",
        f"AuthInfo=socket={_plain(ctx.munge_socket, 'munge socket')}",
        # slurmdbd refuses to start unless DbdHost names this machine or is "localhost"
        "DbdHost=localhost",
        f"DbdAddr={ctx.bind_address or LOOPBACK}",
        f"DbdPort={ctx.port}",
        *(["CommunicationParameters=NoInAddrAny"] if ctx.bind_address else []),
        f"SlurmUser={_plain(ctx.user, 'user')}",
        f"LogFile={_plain(d, 'folder')}/log/slurmdbd.log",
        f"PidFile={d}/run/slurmdbd.pid",
        "DebugLevel=info",
        "StorageType=accounting_storage/mysql",
        # "localhost" makes the MySQL client use a Unix socket; which one comes from MYSQL_UNIX_PORT
        "StorageHost=localhost",
        f"StorageUser={ctx.user}",
        f"StorageLoc={_plain(ctx.database, 'database')}",
    ]
    return "\n".join(lines) + "\n"


def accounting_tres(gres_types: Iterable[str], version: tuple[int, int]) -> str:
    """``AccountingStorageTRES``: every GRES of the profile, plus GPU memory/utilisation where Slurm has them."""
    tres = [f"gres/{g}" for g in gres_types if g in ("gpu", "shard")]
    if "gres/gpu" in tres and version >= _GPU_USAGE_TRES:
        tres += ["gres/gpumem", "gres/gpuutil"]
    return ",".join(tres)


def slurm_conf_lines(port: int, tres: str, munge_socket: str, host: str = LOOPBACK) -> list[str]:
    """The lines of slurm.conf that turn accounting on (they replace the ``none`` plugins); slurmdbd listens on
    ``host``."""
    return [
        "AccountingStorageType=accounting_storage/slurmdbd",
        f"AccountingStorageHost={host}",
        f"AccountingStoragePort={port}",
        # for slurmdbd this names the munge socket: without it, slurmctld and sacctmgr ask the system's munged
        f"AccountingStoragePass={_plain(munge_socket, 'munge socket')}",
        *([f"AccountingStorageTRES={tres}"] if tres else []),
        "AccountingStorageEnforce=associations,limits,qos,safe",
        "PriorityType=priority/multifactor",
        "PriorityWeightFairshare=10000",
        "PriorityWeightQOS=1000",
        "PriorityWeightAge=100",
    ]


def _users(owner: str, guests: Sequence[str]) -> list[str]:
    out = [owner, *(["root"] if owner != "root" else []), *guests]
    return list(dict.fromkeys(_plain(u, "user") for u in out))


def setup_before_ctld(cluster: str, owner: str, guests: Sequence[str] = ()) -> list[list[str]]:
    """``sacctmgr -i`` arguments run before slurmctld starts: cluster, accounts, users with a default account."""
    cmds = [["add", "cluster", _plain(cluster, "cluster")]]
    for name, text in ACCOUNTS:
        cmds.append(
            ["add", "account", name, f"Cluster={cluster}", f"Description={text}", "Organization=sandbox"]
        )
    cmds.append(["add", "qos", "debug"])
    cmds += users_to_add(cluster, _users(owner, guests))
    return cmds


def setup_after_ctld(gpu_caps: bool = True) -> list[list[str]]:
    """``sacctmgr -i`` arguments run once slurmctld registered its TRES: the QOS settings, with the per-user GPU
    caps only when ``gpu_caps`` (asked for with ``--accounting``; accounting that is on by default leaves jobs
    uncapped, so that a lesson or test filling whole nodes runs as it does without accounting)."""
    return [
        [
            "modify",
            "qos",
            "where",
            f"name={name}",
            "set",
            *(x for x in settings if gpu_caps or not x.startswith("MaxTRESPerUser=")),
        ]
        for name, settings in QOS
    ]


def users_to_add(cluster: str, users: Sequence[str]) -> list[list[str]]:
    """``sacctmgr -i`` arguments that make ``users`` (admitted later) users of the cluster like the owner."""
    if not users:
        return []
    names = ",".join(dict.fromkeys(_plain(u, "user") for u in users))
    return [
        [
            "add",
            "user",
            names,
            f"Cluster={cluster}",
            f"Account={ACCOUNTS[0][0]}",
            f"DefaultAccount={ACCOUNTS[0][0]}",
        ],
        ["add", "user", names, f"Cluster={cluster}", f"Account={ACCOUNTS[1][0]}"],
        [
            "modify",
            "user",
            "where",
            f"name={names}",
            "set",
            "QOS=" + ",".join(q for q, _ in QOS),
            f"DefaultQOS={QOS[0][0]}",
        ],
    ]
