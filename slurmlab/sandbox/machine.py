"""What this machine offers a sandbox's daemons, and what a daemon's log says went wrong.

Two things differ between machines that a Slurm started by hand trips over:

- cgroups. From 23.x on, ``slurmd`` loads Slurm's cgroup plugin even when nothing asks for cgroups, and exits
  ("No filesystem mounted on /sys/fs/cgroup", "Hybrid mode is not supported") where the machine has none it
  can use; outside systemd a pure cgroup v2 needs dbus to make its scope. The sandbox tracks processes through
  /proc and binds with task/affinity, so it needs no cgroup: where Slurm could not use the machine's, it writes
  ``CgroupPlugin=disabled`` (a value Slurm knows from 23.11 on). 22.05 loads no cgroup plugin here.
- the host name. Slurm has no setting for the address a daemon binds: by default slurmctld, slurmd and slurmdbd
  bind every address (``DbdAddr``, ``NodeAddr`` and ``SlurmctldHost``'s address are what others connect to),
  and with ``NoCtldInAddrAny`` (slurmctld) and ``NoInAddrAny`` (every other daemon and client; slurmdbd reads it
  from slurmdbd.conf) each binds the first IPv4 address its host name resolves to, as ``gethostname()`` says
  it, whatever the configuration names (``slurm_setup_addr`` in Slurm 22.05 to 26.05). So the sandbox binds by
  name where the name resolves to a loopback address (127.0.0.1; 127.0.1.1 on Debian's usual /etc/hosts) and
  names that address in every file. Where it resolves to another address, binding by name would put the
  daemons there, and where it does not resolve they die ("Unable to resolve"): the sandbox then leaves both
  settings out, so its daemons listen on every address (they answer only munge-authenticated requests) while
  every address in its files stays 127.0.0.1, and says so in a note.
"""

from __future__ import annotations

import ipaddress
import os
import socket
import threading
from dataclasses import dataclass

from slurmlab.sandbox.ports import LOOPBACK

__all__ = [
    "MachineFacts",
    "bind_address",
    "cgroup_kind",
    "explain_failure",
    "host_address",
    "inspect",
    "sandbox_settings",
    "simulated_cpus_note",
]

CGROUP_ROOT = "/sys/fs/cgroup"
CGROUP_ENV = "SLURMLAB_SANDBOX_CGROUP"  # "disabled": never let Slurm use the machine's cgroups
_CGROUP_DISABLED_SINCE = (23, 11)


@dataclass(frozen=True)
class MachineFacts:
    """``cgroup``: ``v2`` (unified, systemd running), ``v2-bare`` (unified, no systemd to make a scope), ``v1``
    (legacy or hybrid), ``hybrid-v2`` (cgroup2 at the root but v1 hierarchies in use), ``none``, or ``refused``
    (the user said ``SLURMLAB_SANDBOX_CGROUP=disabled``)."""

    hostname: str
    host_address: (
        str | None
    )  # the address Slurm's daemons bind by name (:func:`host_address`); None: unresolved
    cgroup: str


def cgroup_kind(mounts: str, self_cgroup: str, systemd_running: bool) -> str:
    """The cgroup setup Slurm's autodetection would find, from /proc/self/mounts and /proc/self/cgroup (pure)."""
    kind = None
    v1_below = False
    for line in mounts.splitlines():
        fields = line.split()
        if len(fields) < 3:
            continue
        if fields[1] == CGROUP_ROOT:
            kind = fields[2]  # the last mount on a path is the one in effect
        elif fields[1].startswith(CGROUP_ROOT + "/") and fields[2] == "cgroup":
            v1_below = True
    if kind == "cgroup2":
        # Slurm's cgroup/v2 refuses a process that v1 hierarchies also hold
        if any(line and not line.startswith("0::") for line in self_cgroup.splitlines()):
            return "hybrid-v2"
        return "v2" if systemd_running else "v2-bare"
    if kind == "tmpfs" and v1_below:
        return "v1"
    return "none"


def _read(path: str) -> str:
    try:
        with open(path) as fh:
            return fh.read()
    except OSError:
        return ""


def host_address(name: str, timeout: float = 3.0) -> str | None:
    """The address a Slurm daemon binds under ``NoInAddrAny`` on a host called ``name``: the first answer to the
    lookup Slurm makes (``get_addr_info``: IPv4 only, as Slurm has IPv6 off unless told, with its flags), or
    None when ``name`` does not resolve within ``timeout`` seconds (a name that only times out counts as not)."""
    answer: list[str | None] = []
    flags = socket.AI_ADDRCONFIG | socket.AI_NUMERICSERV | socket.AI_PASSIVE | socket.AI_CANONNAME

    def look() -> None:
        try:
            found = socket.getaddrinfo(name, "0", socket.AF_INET, socket.SOCK_STREAM, 0, flags)
            answer.append(str(found[0][4][0]) if found else None)
        except (OSError, UnicodeError):
            answer.append(None)

    worker = threading.Thread(target=look, daemon=True)
    worker.start()
    worker.join(timeout)
    return answer[0] if answer else None


def bind_address(facts: MachineFacts) -> str | None:
    """The loopback address the sandbox's daemons bind by name on this machine, or None when binding by name
    would not give one (they then bind every address)."""
    if facts.host_address is None:
        return None
    return facts.host_address if ipaddress.ip_address(facts.host_address).is_loopback else None


def inspect(hostname: str | None = None) -> MachineFacts:
    name = hostname or socket.gethostname()
    if os.environ.get(CGROUP_ENV) == "disabled":
        return MachineFacts(hostname=name, host_address=host_address(name), cgroup="refused")
    kind = cgroup_kind(
        _read("/proc/self/mounts"), _read("/proc/self/cgroup"), os.path.isdir("/run/systemd/system")
    )
    return MachineFacts(hostname=name, host_address=host_address(name), cgroup=kind)


@dataclass(frozen=True)
class SandboxSettings:
    """What the rendering takes from the machine, and a line for each choice made because of it."""

    cgroup_plugin: str | None  # cgroup.conf's CgroupPlugin; None: no cgroup.conf (Slurm's default)
    bind_address: str | None  # what :func:`bind_address` says
    notes: tuple[str, ...]


def sandbox_settings(facts: MachineFacts, version: tuple[int, int]) -> SandboxSettings:
    notes: list[str] = []
    plugin = None
    if version >= _CGROUP_DISABLED_SINCE and facts.cgroup not in ("v1", "v2"):
        plugin = "disabled"
        why = {
            "none": f"no cgroup filesystem is mounted on {CGROUP_ROOT}",
            "hybrid-v2": f"{CGROUP_ROOT} is cgroup v2 but this process is also in cgroup v1 hierarchies",
            "v2-bare": "cgroup v2 without systemd (Slurm could not make its scope)",
            "refused": f"{CGROUP_ENV}=disabled",
        }[facts.cgroup]
        notes.append(f"{why}: cgroup.conf says CgroupPlugin=disabled (processes are tracked through /proc)")
    bound = bind_address(facts)
    every = (
        f"the daemons listen on every address, not {LOOPBACK} alone (they answer only munge-authenticated "
        f"requests); to keep them on loopback, name the host on the {LOOPBACK} line of /etc/hosts"
    )
    if facts.host_address is None:
        notes.append(f"the host name {facts.hostname!r} does not resolve: {every}")
    elif bound is None:
        notes.append(
            f"the host name {facts.hostname!r} resolves to {facts.host_address}, not to a loopback "
            f"address: {every}"
        )
    elif bound != LOOPBACK:
        notes.append(
            f"the host name {facts.hostname!r} resolves to {bound}: the daemons listen on that loopback "
            "address"
        )
    return SandboxSettings(plugin, bound, tuple(notes))


def simulated_cpus_note(node_cpus: int, machine_cpus: int | None) -> str | None:
    """What ``sandbox up`` says when each node claims more CPUs than the machine has (None when it does not).

    slurmd's task/affinity pins tasks only to CPUs that exist (seen on 22.05: "only 2 bits in avail_map,
    threads_per_core requires 12!"), so a step that pins more per node than the machine has fails with
    "Unable to layout tasks on given cpus"; without pinning the same step runs."""
    if machine_cpus is None or node_cpus <= machine_cpus:
        return None
    return (
        f"each node claims {node_cpus} CPUs but this machine has {machine_cpus}: Slurm counts and allocates the "
        f"claimed CPUs, yet every task runs on the machine's {machine_cpus}, so a step that pins CPUs "
        f"(--cpu-bind=cores, threads or sockets) with more than {machine_cpus} tasks on a node or more than "
        f"{machine_cpus} --cpus-per-task fails with 'Unable to layout tasks on given cpus'; run such a step "
        "with --cpu-bind=none"
    )


# (words in a daemon's log, what they mean, the next step); the first match wins
_CAUSES: tuple[tuple[tuple[str, ...], str, str], ...] = (
    (
        (
            "No filesystem mounted on /sys/fs/cgroup",
            "Hybrid mode is not supported",
            "Unable to initialize cgroup",
            "cgroup namespace",
            "Could not create scope",
        ),
        "Slurm could not use this machine's cgroups",
        f"start it without them (the sandbox needs none): {CGROUP_ENV}=disabled slurmlab sandbox up ...",
    ),
    (
        ("Unable to resolve", "getaddrinfo"),
        "a host name in slurm.conf does not resolve",
        "add the machine's host name to /etc/hosts (127.0.0.1 <name>) and start again",
    ),
    (
        ("Address already in use", "Unable to bind listen port", "Unable to listen to file descriptors"),
        "a port of the sandbox is taken by another program",
        "start again with other ports (slurmlab sandbox up --port N), or stop what holds them",
    ),
    (
        ("Permission denied",),
        "a file or folder of the sandbox may not be used by the user running the daemons",
        "start the sandbox in a folder that user owns (--dir)",
    ),
    (
        ("Invalid munge", "Munge encode failed", "Protocol authentication error", "auth/munge"),
        "munge authentication failed",
        "read log/munged.log; start afresh (slurmlab sandbox down, then up)",
    ),
    (
        (
            "error while loading shared libraries",
            "plugin_load_from_file",
            "Couldn't find the specified plugin",
        ),
        "Slurm's installation is incomplete",
        "reinstall Slurm: sudo apt-get install --reinstall slurmctld slurmd slurm-client munge",
    ),
)


def explain_failure(log: str) -> tuple[str, str] | None:
    """(cause, next step) for the first known cause in a daemon's log, or None."""
    for words, cause, step in _CAUSES:
        if any(w in log for w in words):
            return cause, step
    return None
