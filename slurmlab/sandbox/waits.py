"""Waiting for a sandbox's nodes: every one idle after ``up``, every one responding after ``restart``.

Both ask slurmctld for the node states until they hold or time runs out; a slurmctld that cannot answer
yet (still starting, or restarted) is asked again rather than taken as a failure.
"""

from __future__ import annotations

import contextlib
import time
from collections.abc import Callable, Mapping, Sequence
from pathlib import Path

from slurmlab.errors import SandboxError
from slurmlab.sandbox import processes
from slurmlab.sandbox.daemons import log_tail, start_failure

__all__ = ["wait_idle", "wait_responding"]

NodeStates = Callable[[], dict[str, str]]


def wait_idle(
    node_states: NodeStates, nodes: Sequence[str], pids: Mapping[str, int], log_dir: Path, timeout: float
) -> None:
    """Wait until every node is idle; a daemon that stops, or a node Slurm rejects, fails at once with its log."""
    deadline = time.monotonic() + timeout
    states: dict[str, str] = {}
    while time.monotonic() < deadline:
        for name, pid in pids.items():
            if not processes.alive(pid):
                raise start_failure(log_dir, f"{name} stopped while starting", name)
        with contextlib.suppress(Exception):
            states = node_states()
        if (
            states
            and set(states) >= set(nodes)
            and all(states[n].rstrip("*~#!%$@^-") == "idle" for n in nodes)
        ):
            return
        bad = [n for n, s in states.items() if s.startswith(("inval", "drain", "fail"))]
        if bad:
            raise start_failure(
                log_dir,
                f"node(s) {', '.join(bad)} went {states[bad[0]]} (rejected configuration)",
                f"slurmd:{bad[0]}",
            )
        time.sleep(0.2)
    raise start_failure(
        log_dir, f"nodes not idle after {timeout:g} s: {states or 'no answer from slurmctld'}", "slurmctld"
    )


def wait_responding(node_states: NodeStates, nodes: Sequence[str], directory: Path, timeout: float) -> None:
    """Wait until every node of the sandbox in ``directory`` responds again (no ``*``, not ``unknown``)."""
    deadline = time.monotonic() + timeout
    states: dict[str, str] = {}
    while time.monotonic() < deadline:
        with contextlib.suppress(Exception):
            states = node_states()
        if (
            states
            and set(states) >= set(nodes)
            and not any(states[n].endswith("*") or states[n].startswith("unk") for n in nodes)
        ):
            return
        time.sleep(0.3)
    raise SandboxError(
        f"after the restart the nodes do not respond within {timeout:g} s: {states or 'no answer from slurmctld'}"
        f"\n{log_tail(directory / 'log', 'slurmctld')}",
        hint=f"read the logs in {directory / 'log'}; start afresh (the jobs are lost): "
        f"slurmlab sandbox down --dir {directory} && slurmlab sandbox up",
    )
