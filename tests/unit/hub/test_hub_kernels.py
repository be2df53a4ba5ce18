"""slurmlab.hub.kernels: the seats' kernels get reserved ports, which other processes on the node are not given
while the kernel binds them (thirty seats starting kernels at once lost one now and then, and the kernel hung)."""

from __future__ import annotations

import asyncio
import errno
import socket

import pytest

pytest.importorskip("jupyter_server")

from slurmlab.hub.kernels import SeatKernelManager, reserve_port
from slurmlab.hub.settings import SEAT_ARGS


def test_a_reserved_port_is_refused_to_a_plain_bind_and_taken_by_the_kernels_listener() -> None:
    port = reserve_port()
    # what a server picking a port, or a plain bind, does: refused while the reservation holds
    with socket.socket() as other, pytest.raises(OSError) as refused:
        other.bind(("127.0.0.1", port))
    assert refused.value.errno == errno.EADDRINUSE
    # what zmq does for the kernel: SO_REUSEADDR, bind, listen
    with socket.socket() as kernel:
        kernel.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        kernel.bind(("127.0.0.1", port))
        kernel.listen(1)
        with socket.create_connection(("127.0.0.1", port), timeout=5):
            kernel.accept()[0].close()


def test_a_free_port_found_the_usual_way_is_anyones() -> None:
    # the contrast: a port found free by binding 0 and closing (jupyter_client's way) is open to a plain bind at
    # once, which is the race the reservation closes
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        port = probe.getsockname()[1]
    with socket.socket() as other:
        other.bind(("127.0.0.1", port))


def test_the_seats_servers_use_the_seat_kernel_manager() -> None:
    assert "--MappingKernelManager.kernel_manager_class=slurmlab.hub.kernels.SeatKernelManager" in SEAT_ARGS


def test_a_seat_kernel_runs_on_reserved_ports_and_a_restart_on_new_ports_reserves_new_ones() -> None:
    """A real kernel: it starts and answers on its reserved ports; restarted as jupyter_client's restarter does
    after a kernel died before it was alive (``newports=True``), it gets other ports (jupyter_client's port cache
    handed back the same ones)."""

    async def run() -> tuple[list[int], list[int], bool]:
        km = SeatKernelManager(kernel_name="python3")
        await km.start_kernel()
        try:
            before = list(km.ports)
            await km.restart_kernel(now=True, newports=True)
            after = list(km.ports)
            client = km.client()
            client.start_channels()
            try:
                await client.wait_for_ready(timeout=60)
                answered = True
            finally:
                client.stop_channels()
            return before, after, answered
        finally:
            await km.shutdown_kernel(now=True)

    before, after, answered = asyncio.run(run())
    assert all(before) and all(after) and answered, (before, after)
    assert after != before
