"""Free TCP ports on the loopback address of the sandbox's daemons.

A port is chosen now and bound later by a daemon that starts seconds after. A port the kernel hands out for
``bind(0)`` comes from its ephemeral range, which every outgoing connection and every other ``bind(0)`` of the
machine draws from too (salloc and srun listen on such ports): in between, another process may take it, and
slurmctld then fails with "Address already in use" (seen while lessons started sandboxes side by side). So free
ports are drawn at random from below that range, where only a program asking for a fixed port goes.
"""

from __future__ import annotations

import random
import socket
from pathlib import Path

from slurmlab.errors import SandboxError

__all__ = ["FIXED_PORTS_FROM", "LOOPBACK", "ephemeral_range", "free_ports", "is_listening", "port_is_free"]

LOOPBACK = "127.0.0.1"


def port_is_free(port: int, host: str = LOOPBACK) -> bool:
    """True when nothing listens on host:port (nor on the wildcard address) and it can be bound."""
    if is_listening(port, host):
        return False
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as s:
        try:
            s.bind((host, port))
        except OSError:
            return False
    return True


def is_listening(port: int, host: str = LOOPBACK) -> bool:
    """True when a TCP connect to host:port succeeds."""
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as s:
        s.settimeout(0.5)
        return s.connect_ex((host, port)) == 0


def free_ports(count: int, *, first: int | None = None, host: str = LOOPBACK) -> list[int]:
    """``count`` distinct ports free on ``host``: from ``first`` on (checked, each must be free) or chosen by the
    kernel."""
    if first is not None:
        wanted = list(range(first, first + count))
        if first < 1024 or wanted[-1] > 65535:
            raise SandboxError(
                f"ports {first}-{wanted[-1]} are out of range",
                hint="choose a base port between 1024 and 65535 (or leave it out to pick free ports)",
            )
        taken = [p for p in wanted if not port_is_free(p, host)]
        if taken:
            raise SandboxError(
                f"port(s) {', '.join(map(str, taken))} on {host} are already in use",
                hint="choose another --port, or leave it out so that free ports are picked",
            )
        return wanted
    low = ephemeral_range()[0]
    pool = range(FIXED_PORTS_FROM, max(FIXED_PORTS_FROM + count, low))
    ports: list[int] = []
    for port in random.sample(pool, min(len(pool), 64 * count)):
        if port_is_free(port, host):
            ports.append(port)
            if len(ports) == count:
                return ports
    raise SandboxError(
        f"no {count} free port(s) on {host} between {pool.start} and {pool.stop - 1}",
        hint="stop what listens there, or give a base port (--port) that is free",
    )


# the lowest port drawn at random: above the well-known and most registered services' ports
FIXED_PORTS_FROM = 20000
_EPHEMERAL = Path("/proc/sys/net/ipv4/ip_local_port_range")


def ephemeral_range() -> tuple[int, int]:
    """The kernel's range for ``bind(0)`` and outgoing connections (Linux's default where it cannot be read)."""
    try:
        low, high = (int(x) for x in _EPHEMERAL.read_text().split()[:2])
    except (OSError, ValueError):
        return 32768, 60999
    return low, high
