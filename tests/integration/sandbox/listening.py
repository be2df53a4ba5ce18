"""What a process listens on, read from /proc: the sockets it holds (/proc/<pid>/fd) matched by inode against
the kernel's tables (/proc/net/tcp, tcp6, udp, udp6).

No tool is asked (``ss`` shows only what its caller may see of other users' processes, and its columns differ
between iproute2 releases): the tables are the kernel's own, the same in every Slurm root.
"""

from __future__ import annotations

import os
import socket
import struct
from pathlib import Path

__all__ = ["listening", "sockets_of"]

_TCP_LISTEN = "0A"


def _address(hex_addr: str) -> tuple[str, int]:
    """``0100007F:1A0B`` -> (``127.0.0.1``, 6667): the kernel prints each 32-bit word of the address as the
    machine holds it, so each word is packed back in the machine's own byte order."""
    addr, port = hex_addr.split(":")
    words = [int(addr[i : i + 8], 16) for i in range(0, len(addr), 8)]
    raw = b"".join(struct.pack("=I", w) for w in words)
    family = socket.AF_INET if len(raw) == 4 else socket.AF_INET6
    return socket.inet_ntop(family, raw), int(port, 16)


def _table(name: str) -> list[tuple[str, tuple[str, int], tuple[str, int], str]]:
    """(inode, local address, remote address, state) of each socket in /proc/net/<name>."""
    path = Path("/proc/net") / name
    if not path.exists():  # a kernel without IPv6 has no tcp6/udp6
        return []
    rows = []
    for line in path.read_text().splitlines()[1:]:
        fields = line.split()
        rows.append((fields[9], _address(fields[1]), _address(fields[2]), fields[3]))
    return rows


def sockets_of(pid: int) -> set[str]:
    """The inodes of the sockets process ``pid`` holds open."""
    inodes = set()
    for fd in os.listdir(f"/proc/{pid}/fd"):
        try:
            target = os.readlink(f"/proc/{pid}/fd/{fd}")
        except OSError:  # closed since the listing
            continue
        if target.startswith("socket:["):
            inodes.add(target[len("socket:[") : -1])
    return inodes


def listening(pid: int) -> set[tuple[str, str, int]]:
    """(protocol, address, port) of every TCP socket process ``pid`` listens on and every UDP socket it holds
    open to any sender (bound, not connected)."""
    mine = sockets_of(pid)
    found = set()
    for proto in ("tcp", "tcp6", "udp", "udp6"):
        for inode, local, remote, state in _table(proto):
            if inode not in mine:
                continue
            if (proto.startswith("tcp") and state == _TCP_LISTEN) or (
                proto.startswith("udp") and remote[1] == 0
            ):
                found.add((proto, *local))
    return found
