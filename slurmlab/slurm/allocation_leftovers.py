"""The tag that names the process an allocation belongs to, and the jobs that dead processes left behind.

Every allocation slurmlab submits carries ``--comment=slurmlab:<host>:<pid>:<random>``: a restarted kernel
finds the jobs of its predecessors by that tag and by whether the process it names still lives.
"""

from __future__ import annotations

import os
import socket
import uuid

from slurmlab.core.slurm.models import Job
from slurmlab.slurm.runner import Runner, get_runner

__all__ = ["TAG_PREFIX", "find_leftovers", "make_tag"]

TAG_PREFIX = "slurmlab"


def make_tag() -> str:
    """A tag naming this process: ``slurmlab:<host>:<pid>:<random>``."""
    return f"{TAG_PREFIX}:{socket.gethostname()}:{os.getpid()}:{uuid.uuid4().hex[:8]}"


def find_leftovers(runner: Runner | None = None, *, include_alive: bool = False) -> list[Job]:
    """Jobs this user left from earlier kernels (tag ``slurmlab:``) whose process is gone.

    Returns their Jobs; attach with ``Allocation.attach(j.job_id)`` or cancel them.
    """
    from slurmlab.slurm import queries

    found = []
    host = socket.gethostname()
    for brief in queries.my_tagged_jobs(TAG_PREFIX, runner or get_runner()):
        parts = (brief.comment or "").split(":")
        alive = False
        if len(parts) >= 3 and parts[1] == host and parts[2].isdigit():
            alive = _pid_alive(int(parts[2]))
        if include_alive or not alive:
            found.append(brief)
    return found


def _pid_alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:
        return True
    return True
