"""The kernels of a seat's server: their TCP ports reserved, not merely found free.

A Jupyter server picks its kernel's five ports by binding port 0 and closing the socket; the kernel binds them a
moment later. Between the two, the port is free for anyone: another seat's server picking ports the same way, or
any outgoing connection on the node, whose local port comes from the same ephemeral range. Thirty seats starting
kernels at once on one node lost that race about once in a hundred kernel starts (the workshop benchmark), and
ipykernel then does not recover: a bind that fails after its first socket leaves that socket open, so the
kernel's exit blocks for ever in zmq's ``Context.term()``; the process stays alive, the server's restarter sees
nothing wrong, and the student's notebook waits on a kernel that never answers.

:class:`SeatKernelManager` reserves each port instead (:func:`reserve_port`): a listener with ``SO_REUSEADDR``
accepts one connection of its own and closes it first, which leaves the port in TIME_WAIT for a minute. Until then
neither a plain ``bind`` to port 0 nor an outgoing connection is given it, while the kernel's listener (zmq sets
``SO_REUSEADDR``) binds it at once. The seats' servers use it through
``--MappingKernelManager.kernel_manager_class`` (:data:`slurmlab.hub.settings.SEAT_ARGS`).
"""

from __future__ import annotations

import socket
from typing import Any

from jupyter_client.connect import port_names
from jupyter_client.localinterfaces import is_local_ip
from jupyter_server.services.kernels.kernelmanager import ServerKernelManager
from traitlets import default

__all__ = ["SeatKernelManager", "reserve_port"]


def reserve_port(ip: str = "127.0.0.1") -> int:
    """A port on ``ip`` that no other bind to port 0 and no outgoing connection is given for about a minute (its
    TIME_WAIT), and that a listener with ``SO_REUSEADDR`` may bind meanwhile."""
    with socket.socket() as listener:
        listener.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        listener.bind((ip, 0))
        listener.listen(1)
        port: int = listener.getsockname()[1]
        with socket.create_connection((ip, port), timeout=5):
            accepted, _ = listener.accept()
            accepted.close()  # this side closes first: the TIME_WAIT is on (ip, port)
    return port


class SeatKernelManager(ServerKernelManager):
    """jupyter_server's kernel manager, whose local TCP kernels get reserved ports (:func:`reserve_port`).

    A restart on new ports (the restarter's, after a kernel died before it was ever alive) reserves new ones.
    Kernels on another address (a provisioner's, on a GPU node) keep the usual choice: their ports are not this
    node's to reserve."""

    @default("cache_ports")
    def _no_port_cache(self) -> bool:
        # the cache would fill the ports before the connection file is written, and hand the same ones back
        # on a restart that asks for new ones
        return False

    def __init__(self, **kwargs: Any) -> None:
        super().__init__(**kwargs)
        self._reserved: list[str] = []

    def write_connection_file(self, **kwargs: Any) -> None:
        if self.transport == "tcp" and is_local_ip(self.ip):
            for name in port_names:  # jupyter_client's own list, the one it writes
                if getattr(self, name) <= 0:
                    setattr(self, name, reserve_port(self.ip))
                    self._reserved.append(name)
        super().write_connection_file(**kwargs)

    def cleanup_random_ports(self) -> None:
        """Forget the reserved ports too (jupyter_client forgets only those it chose), so that a restart on new
        ports reserves new ones."""
        reserved, self._reserved = self._reserved, []
        for name in reserved:
            setattr(self, name, 0)
        super().cleanup_random_ports()
        if reserved:
            self.cleanup_connection_file()
