"""slurm.conf and gres.conf of a sandbox, rendered from a profile (pure: text in, text out).

What differs by Slurm version:

- 24.11 rejects a per-GPU ``Cores=`` range that does not follow socket boundaries (the node goes INVAL), so from
  23.x on each GPU's cores are widened to the whole sockets they touch (as in
  shared/fixtures/slurm/24.11/gres.conf); 22.05 gets the profile's exact cores.

Everything listens on loopback: ``CommunicationParameters=NoCtldInAddrAny,NoInAddrAny`` makes the daemons bind
the address the host name resolves to, not every interface, and every file names that address
(``SlurmctldHost=<host>(<address>)``, ``NodeAddr``, ``AccountingStorageHost``; 127.0.0.1 on most machines).
Where the host name does not resolve to a loopback address the daemons cannot bind one by name (Slurm binds
what the machine's host name resolves to, never a configured address), so both settings are left out, they
listen on every address and the files name 127.0.0.1 (see :mod:`.machine`). ``cgroup.conf`` is written only
where the machine's cgroups are unusable to Slurm.

Beside them goes the hardware file (:data:`~slurmlab.core.gpu.hardware_profile.HARDWARE_FILE`): the profile and
what each GRES index stands for, so that whoever holds the ``SLURM_CONF`` learns the hardware without this room.
``TaskProlog`` puts the sandbox's stand-in tools on every task's PATH (:mod:`.standin`).

A :class:`RateLimit` turns on slurmctld's per-user RPC rate limit (``SlurmctldParameters=rl_enable,...``), as
sites do against "RPC storms": Slurm 23.02 added it; 22.05's slurmctld has no such parameter, so a sandbox on
22.05 refuses the option (:data:`RATE_LIMIT_SINCE`).
"""

from __future__ import annotations

from dataclasses import asdict, dataclass

from slurmlab.core.gpu.hardware_profile import HARDWARE_FILE, render_hardware
from slurmlab.sandbox.accounting import JOB_ACCT_GATHER, accounting_tres, slurm_conf_lines
from slurmlab.sandbox.ports import LOOPBACK
from slurmlab.sandbox.profile import Gpu, Profile, format_ranges
from slurmlab.sandbox.standin import TASK_PROLOG

__all__ = [
    "HARDWARE_FILE",
    "RATE_LIMIT_SINCE",
    "DeviceFile",
    "RateLimit",
    "RenderContext",
    "device_files",
    "gres_index_map",
    "gres_summary",
    "hostlist",
    "render_cgroup_conf",
    "render_gres_conf",
    "render_hardware_file",
    "render_slurm_conf",
]


RATE_LIMIT_SINCE = (23, 2)  # the first Slurm whose slurmctld knows SlurmctldParameters=rl_enable


@dataclass(frozen=True)
class RateLimit:
    """slurmctld's per-user RPC rate limit: a token bucket of ``bucket_size`` requests, ``refill_rate`` more every
    ``refill_period`` seconds (Slurm's defaults: 30, 2, 1). A small bucket lets a test meet the limit at once."""

    bucket_size: int = 30
    refill_rate: int = 2
    refill_period: int = 1

    def __post_init__(self) -> None:
        for name in ("bucket_size", "refill_rate", "refill_period"):
            value = getattr(self, name)
            if isinstance(value, bool) or not isinstance(value, int) or value < 1:
                raise ValueError(f"RateLimit.{name} must be a whole number of at least 1, not {value!r}")

    def parameters(self) -> str:
        """The value of slurm.conf's ``SlurmctldParameters`` (every refusal logged: ``rl_log_freq=0``)."""
        return (
            f"rl_enable,rl_bucket_size={self.bucket_size},rl_refill_rate={self.refill_rate},"
            f"rl_refill_period={self.refill_period},rl_log_freq=0"
        )


@dataclass(frozen=True)
class RenderContext:
    """Where and how one sandbox runs (everything the profile itself does not say)."""

    directory: str  # the sandbox folder: state, spool, logs, pid files, fake devices
    hostname: str
    user: str  # SlurmUser and SlurmdUser (the user who runs the daemons)
    ctld_port: int
    node_ports: tuple[int, ...]  # one slurmd port per node, in node order
    munge_socket: str
    version: tuple[int, int]  # Slurm (major, minor), e.g. (22, 5)
    device_dir: str | None = None  # folder of fake GPU char devices; None = existing /dev/ttyN (no root)
    cluster_name: str = "sandbox"
    # seconds without an answer before slurmctld sets a node DOWN; it pings every third of it and flags a dead
    # slurmd NOT_RESPONDING ("*") after a failed ping (seen: 14-21 s at 15, about 70 s at 120)
    slurmd_timeout: int = 120
    cgroup_plugin: str | None = None  # cgroup.conf's CgroupPlugin; None: no cgroup.conf, Slurm's default
    accounting_port: int | None = None  # slurmdbd's port; None: no accounting (the plugins are "none")
    # the loopback address the host name resolves to, which the daemons bind by name (machine.bind_address);
    # None: there is none, so no daemon may look the host name up to bind it
    bind_address: str | None = LOOPBACK
    rate_limit: RateLimit | None = None  # slurmctld's per-user RPC rate limit; None: off (Slurm's default)

    @property
    def address(self) -> str:
        """The address every file names for every daemon."""
        return self.bind_address or LOOPBACK


@dataclass(frozen=True)
class DeviceFile:
    """One GRES device of a node: a whole GPU or a MIG instance."""

    number: int  # the device number Slurm reads from the file name
    gres_type: str | None
    cores: tuple[int, ...]
    gpu: Gpu
    mig_profile: str | None = None


def hostlist(names: tuple[str, ...] | list[str]) -> str:
    """node1,node2,node3 -> node[1-3] (names share one prefix, as the sandbox's do)."""
    if len(names) == 1:
        return names[0]
    prefix = names[0].rstrip("0123456789")
    numbers = [int(n[len(prefix) :]) for n in names]
    return f"{prefix}[{format_ranges(numbers)}]"


def device_files(profile: Profile) -> list[DeviceFile]:
    """The GRES devices of one node: whole GPUs numbered by index, then MIG instances after the last GPU."""
    out = [DeviceFile(g.index, g.model, g.cores, g) for g in profile.whole_gpus]
    for k, m in enumerate(profile.mig):
        gpu = profile.gpu(m.gpu)
        out.append(DeviceFile(len(profile.gpus) + k, m.profile, gpu.cores, gpu, m.profile))
    return sorted(out, key=lambda d: d.number)


def gres_index_map(profile: Profile) -> list[tuple[int, int | None]]:
    """Per Slurm GRES IDX of a node: (GPU index, MIG instance position in ``profile.mig`` or None).

    Slurm numbers a node's gpu GRES by type, types in the order gres.conf first names them and records of one
    type in file order (seen in the h200-mig sandbox: ``--gres=gpu:3g.71gb:1`` got IDX 13 after 4 whole GPUs
    and 9 ``1g.18gb``), so whole GPUs of a MIG profile do not keep their index as IDX.
    """
    devices = device_files(profile)
    order: list[str | None] = []
    for d in devices:
        if d.gres_type not in order:
            order.append(d.gres_type)
    mig_pos = {len(profile.gpus) + k: k for k in range(len(profile.mig))}
    return [
        (d.gpu.index, mig_pos.get(d.number) if d.mig_profile else None)
        for typ in order
        for d in devices
        if d.gres_type == typ
    ]


def render_hardware_file(profile: Profile) -> str:
    """The hardware file written beside slurm.conf: the profile's data, its nodes and :func:`gres_index_map`."""
    return render_hardware(asdict(profile), profile.node_names, gres_index_map(profile))


def device_path(ctx: RenderContext, dev: DeviceFile) -> str:
    if ctx.device_dir is None:
        return f"/dev/tty{dev.number}"
    stem = "mig" if dev.mig_profile else "gpu"
    return f"{ctx.device_dir}/{stem}{dev.number}"


def gres_summary(profile: Profile) -> str:
    """The node's ``Gres=`` value, e.g. ``gpu:h100:8,shard:h100:32``."""
    counts: dict[str | None, int] = {}
    for dev in device_files(profile):
        counts[dev.gres_type] = counts.get(dev.gres_type, 0) + 1
    parts = [f"gpu:{t}:{n}" if t else f"gpu:{n}" for t, n in counts.items()]
    if profile.shards_per_gpu:
        whole = profile.whole_gpus
        shard_type = _single_type(whole)
        total = profile.shards_per_gpu * len(whole)
        parts.append(f"shard:{shard_type}:{total}" if shard_type else f"shard:{total}")
    return ",".join(parts)


def _single_type(gpus: tuple[Gpu, ...]) -> str | None:
    types = {g.model for g in gpus}
    return types.pop() if len(types) == 1 else None


def _cores_for(profile: Profile, cores: tuple[int, ...], version: tuple[int, int]) -> tuple[int, ...]:
    if version < (23, 0):
        return cores
    per = profile.cpu.cores_per_socket
    sockets = sorted({c // per for c in cores})
    return tuple(c for s in sockets for c in range(s * per, (s + 1) * per))


def render_slurm_conf(profile: Profile, ctx: RenderContext) -> str:
    d = ctx.directory
    if len(ctx.node_ports) != profile.nodes:
        raise ValueError(f"{profile.nodes} nodes need {profile.nodes} ports, got {len(ctx.node_ports)}")
    if ctx.rate_limit is not None and ctx.version < RATE_LIMIT_SINCE:
        raise ValueError(
            f"Slurm {ctx.version[0]}.{ctx.version[1]:02d} has no RPC rate limit (SlurmctldParameters=rl_enable "
            "came with 23.02)"
        )
    lines = [
        f"# slurmlab sandbox, profile {profile.name}, for Slurm {ctx.version[0]}.{ctx.version[1]:02d}",
        f"ClusterName={ctx.cluster_name}",
        f"SlurmctldHost={ctx.hostname}({ctx.address})",
        f"SlurmctldPort={ctx.ctld_port}",
        f"SlurmdPort={ctx.node_ports[0]}",
        *(["CommunicationParameters=NoCtldInAddrAny,NoInAddrAny"] if ctx.bind_address else []),
        "AuthType=auth/munge",
        "CredType=cred/munge",
        f"AuthInfo=socket={ctx.munge_socket}",
        f"SlurmUser={ctx.user}",
        f"SlurmdUser={ctx.user}",
        f"StateSaveLocation={d}/state",
        f"SlurmdSpoolDir={d}/spool/%n",
        f"SlurmctldPidFile={d}/run/slurmctld.pid",
        f"SlurmdPidFile={d}/run/slurmd-%n.pid",
        f"SlurmctldLogFile={d}/log/slurmctld.log",
        f"SlurmdLogFile={d}/log/slurmd-%n.log",
        "ProctrackType=proctrack/linuxproc",
        "TaskPlugin=task/affinity",
        f"TaskProlog={d}/{TASK_PROLOG}",
        "SelectType=select/cons_tres",
        "SelectTypeParameters=CR_Core_Memory",
        "DefMemPerCPU=1000",
        f"GresTypes={','.join(profile.gres_types)}",
        "MpiDefault=none",
        "ReturnToService=2",
        "MinJobAge=300",
        "SlurmdParameters=config_overrides",
        "SchedulerType=sched/backfill",
        # backfill computes a pending job's expected start (squeue %S); its default 30 s cycle left
        # the panel without one for ~28 s, and a handful of jobs costs it nothing each second
        "SchedulerParameters=bf_interval=1",
        *JOB_ACCT_GATHER,
        *(
            ["AccountingStorageType=accounting_storage/none"]
            if ctx.accounting_port is None
            else slurm_conf_lines(
                ctx.accounting_port,
                accounting_tres(profile.gres_types, ctx.version),
                ctx.munge_socket,
                ctx.address,
            )
        ),
        "JobCompType=jobcomp/none",
        "MailProg=/bin/true",
        "KillWait=5",
        f"SlurmdTimeout={ctx.slurmd_timeout}",
        "InactiveLimit=0",
        *([f"SlurmctldParameters={ctx.rate_limit.parameters()}"] if ctx.rate_limit else []),
    ]
    cpu = profile.cpu
    gres = gres_summary(profile)
    features = f" Features={','.join(profile.features)}" if profile.features else ""
    for name, port in zip(profile.node_names, ctx.node_ports, strict=True):
        lines.append(
            f"NodeName={name} NodeHostname={ctx.hostname} NodeAddr={ctx.address} Port={port} CPUs={cpu.cpus} "
            f"Sockets={cpu.sockets} CoresPerSocket={cpu.cores_per_socket} ThreadsPerCore={cpu.threads_per_core} "
            f"RealMemory={profile.memory_mb} Gres={gres}{features} State=UNKNOWN"
        )
    nodes = hostlist(profile.node_names)
    for part in profile.partitions:
        default = " Default=YES" if part.default else ""
        lines.append(f"PartitionName={part.name} Nodes={nodes}{default} MaxTime={part.max_time} State=UP")
    return "\n".join(lines) + "\n"


def render_gres_conf(profile: Profile, ctx: RenderContext) -> str:
    nodes = hostlist(profile.node_names)
    lines = [f"# slurmlab sandbox, profile {profile.name}", "AutoDetect=off"]
    # Links= indexes every gpu GRES of the node, so it is written only when all of them are whole GPUs
    with_links = not profile.mig and any(v for row in profile.nvlink for v in row)
    for dev in device_files(profile):
        typ = f" Type={dev.gres_type}" if dev.gres_type else ""
        cores = format_ranges(_cores_for(profile, dev.cores, ctx.version))
        line = f"NodeName={nodes} Name=gpu{typ} File={device_path(ctx, dev)} Cores={cores}"
        if with_links:
            row = profile.nvlink[dev.gpu.index]
            line += " Links=" + ",".join("-1" if j == dev.gpu.index else str(v) for j, v in enumerate(row))
        lines.append(line)
    if profile.shards_per_gpu:
        whole = profile.whole_gpus
        shard_type = _single_type(whole)
        typ = f" Type={shard_type}" if shard_type else ""
        lines.append(f"NodeName={nodes} Name=shard{typ} Count={profile.shards_per_gpu * len(whole)}")
    return "\n".join(lines) + "\n"


def render_cgroup_conf(ctx: RenderContext) -> str | None:
    """cgroup.conf, or None where Slurm's default (no file) is what the machine needs."""
    if ctx.cgroup_plugin is None:
        return None
    return f"# slurmlab sandbox: the machine's cgroups are not usable by Slurm here\nCgroupPlugin={ctx.cgroup_plugin}\n"
