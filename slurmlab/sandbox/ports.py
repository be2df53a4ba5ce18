"""Free TCP ports on the loopback address of the sandbox's daemons."""

from __future__ import annotations

import socket

from slurmlab.errors import SandboxError

__all__ = ["LOOPBACK", "free_ports", "is_listening", "port_is_free"]

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
    # hold every socket open until all are chosen so the kernel never hands out the same one twice
    held: list[socket.socket] = []
    try:
        ports: list[int] = []
        while len(ports) < count:
            s = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
            held.append(s)
            s.bind((host, 0))
            port = int(s.getsockname()[1])
            if not is_listening(port, host):
                ports.append(port)
        return ports
    finally:
        for s in held:
            s.close()
