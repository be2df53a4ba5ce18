"""How the Jupyter server and the kernel on the node agree on the kernel's address, ports and key. Pure: no I/O.

The server cannot choose the ports: they must be free on the node, which the server does not see. So the server
writes the kernel's connection file with ports 0, the node's address (Slurm's ``NodeAddr``: what Slurm itself
reaches the node by) and the session's HMAC key, in a folder only its user may read, on a file system both see
(the Jupyter runtime folder; on a real cluster, the home directory); ipykernel on the node binds free ports on
that address and writes them back into the same file, which the server then reads. The key never appears on a
command line (``ps`` and ``scontrol show step`` show command lines to every user).

A launcher on the node (:mod:`slurmlab.provisioner.node`) writes, before it becomes the kernel, which step of
which job it runs in: the server signals that step to interrupt the kernel.
"""

from __future__ import annotations

import json
from collections.abc import Mapping
from dataclasses import dataclass

__all__ = ["PORT_NAMES", "NodeStep", "kernel_file", "read_kernel_file", "read_node_step"]

PORT_NAMES = ("shell_port", "iopub_port", "stdin_port", "control_port", "hb_port")


def kernel_file(*, key: str, signature_scheme: str, address: str, kernel_name: str) -> dict[str, object]:
    """The connection file the kernel on the node starts from: its ports are 0, for it to choose."""
    return {
        "transport": "tcp",
        "ip": address,
        "key": key,
        "signature_scheme": signature_scheme,
        "kernel_name": kernel_name,
        **dict.fromkeys(PORT_NAMES, 0),
    }


def read_kernel_file(text: str, sent: Mapping[str, object]) -> dict[str, object] | None:
    """The connection information the kernel wrote back, or None while it has not yet (no file, a file half
    written, ports still 0). What the server sent (address, key, scheme) is kept from ``sent``: only the ports
    are taken from the node."""
    try:
        written = json.loads(text)
    except json.JSONDecodeError:
        return None
    if not isinstance(written, dict):
        return None
    ports = {name: written.get(name) for name in PORT_NAMES}
    if not all(isinstance(p, int) and not isinstance(p, bool) and 0 < p < 65536 for p in ports.values()):
        return None
    info = {k: v for k, v in sent.items() if k not in PORT_NAMES}
    info.update(ports)
    return info


@dataclass(frozen=True)
class NodeStep:
    """Where the kernel runs, as its launcher found it in the step's environment."""

    job_id: str
    step_id: str
    node: str
    pid: int

    @property
    def step(self) -> str:
        """``J.S``: what scancel signals."""
        return f"{self.job_id}.{self.step_id}"


def read_node_step(text: str) -> NodeStep | None:
    """The launcher's note, or None while it is not (wholly) written or is not what a launcher writes."""
    try:
        note = json.loads(text)
    except json.JSONDecodeError:
        return None
    if not isinstance(note, dict):
        return None
    job, step, node, pid = (note.get(k) for k in ("job_id", "step_id", "node", "pid"))
    if not (isinstance(job, str) and job.isdigit() and isinstance(step, str) and step.isdigit()):
        return None
    if not isinstance(node, str) or not isinstance(pid, int) or isinstance(pid, bool):
        return None
    return NodeStep(job, step, node, pid)
