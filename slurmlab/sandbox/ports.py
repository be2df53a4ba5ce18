"""Free TCP ports on 127.0.0.1 for the sandbox's daemons."""

from __future__ import annotations

import socket

from slurmlab.errors import SandboxError

__all__ = ["free_ports", "is_listening", "port_is_free"]


def port_is_free(port: int) -> bool:
    """True when nothing listens on 127.0.0.1:port (nor on the wildcard address) and it can be bound."""
    if is_listening(port):
        return False
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as s:
        try:
            s.bind(("127.0.0.1", port))
        except OSError:
            return False
    return True


def is_listening(port: int, host: str = "127.0.0.1") -> bool:
    """True when a TCP connect to host:port succeeds."""
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as s:
        s.settimeout(0.5)
        return s.connect_ex((host, port)) == 0


def free_ports(count: int, *, first: int | None = None) -> list[int]:
    """``count`` distinct free ports: from ``first`` on (checked, each must be free) or chosen by the kernel."""
    if first is not None:
        wanted = list(range(first, first + count))
        if first < 1024 or wanted[-1] > 65535:
            raise SandboxError(
                f"ports {first}-{wanted[-1]} are out of range",
                hint="choose a base port between 1024 and 65535 (or leave it out to pick free ports)",
            )
        taken = [p for p in wanted if not port_is_free(p)]
        if taken:
            raise SandboxError(
                f"port(s) {', '.join(map(str, taken))} on 127.0.0.1 are already in use",
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
            s.bind(("127.0.0.1", 0))
            port = int(s.getsockname()[1])
            if not is_listening(port):
                ports.append(port)
        return ports
    finally:
        for s in held:
            s.close()
