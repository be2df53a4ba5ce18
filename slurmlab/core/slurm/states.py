"""Slurm's job states, named once for all of slurmlab.

API::

    BASE_STATES     the base state every job has (PENDING, RUNNING, ..., OUT_OF_MEMORY)
    STATE_FLAGS     the flags Slurm may print instead of the base state (COMPLETING, REQUEUED, ...)
    JOB_STATES      both: every name ``squeue``/``scontrol``/the JSON plugins can print for a job
    ENDED           the job is over: nothing runs, nothing will (unless someone requeues it)
    ACTIVE          JOB_STATES - ENDED: still in the queue (pending, held, running, finishing)
    HOLDING         the job holds nodes now: steps can run, its time limit counts down
    node_trouble    which of a job's nodes (sinfo states) its owner should hear about: down, draining, not responding

The names follow Slurm's own list (``job_state_string()`` in ``src/common/slurm_protocol_defs.c``;
the "Job State Codes" page and squeue(1) "JOB STATE CODES"). ``squeue`` prints a single word:
a recognised flag replaces the base state, so a flag is a state name here too.
"""

from __future__ import annotations

from collections.abc import Mapping
from datetime import datetime

__all__ = [
    "ACTIVE",
    "BASE_STATES",
    "ENDED",
    "HOLDING",
    "JOB_STATES",
    "STATE_FLAGS",
    "expected_start",
    "is_held",
    "node_trouble",
]

BASE_STATES = frozenset(
    {
        "PENDING",
        "RUNNING",
        "SUSPENDED",
        "COMPLETED",
        "CANCELLED",
        "FAILED",
        "TIMEOUT",
        "NODE_FAIL",
        "PREEMPTED",
        "BOOT_FAIL",
        "DEADLINE",
        "OUT_OF_MEMORY",
    }
)
STATE_FLAGS = frozenset(
    {
        "COMPLETING",
        "CONFIGURING",
        "EXPEDITING",
        "LAUNCH_FAILED",
        "POWER_UP_NODE",
        "RECONFIG_FAIL",
        "REQUEUED",
        "REQUEUE_FED",
        "REQUEUE_HOLD",
        "RESIZING",
        "RESV_DEL_HOLD",
        "REVOKED",
        "SIGNALING",
        "SPECIAL_EXIT",
        "STAGE_OUT",
        "STOPPED",
        "UPDATE_DB",
    }
)
JOB_STATES = BASE_STATES | STATE_FLAGS

# The finished base states, plus the two flags that end a job on this cluster: REVOKED (a
# federated sibling started elsewhere) and SPECIAL_EXIT (requeued held after a special exit code;
# it waits for a person, not for the scheduler).
ENDED = frozenset(
    {
        "COMPLETED",
        "CANCELLED",
        "FAILED",
        "TIMEOUT",
        "NODE_FAIL",
        "PREEMPTED",
        "BOOT_FAIL",
        "DEADLINE",
        "OUT_OF_MEMORY",
        "REVOKED",
        "SPECIAL_EXIT",
    }
)
ACTIVE = JOB_STATES - ENDED
# Nodes are allocated in these: CONFIGURING/POWER_UP_NODE while they boot, COMPLETING while the
# epilog runs, SUSPENDED/STOPPED with the processes frozen but the resources kept.
HOLDING = frozenset(
    {
        "RUNNING",
        "CONFIGURING",
        "POWER_UP_NODE",
        "COMPLETING",
        "SUSPENDED",
        "STOPPED",
        "RESIZING",
        "SIGNALING",
        "STAGE_OUT",
    }
)


def is_held(state: str, reason: str | None) -> bool:
    """A pending job held by a user or an admin (``scontrol hold``): it starts only once released."""
    return state == "PENDING" and (reason or "").startswith("JobHeld")


def expected_start(state: str, start_time: datetime | None) -> datetime | None:
    """When Slurm expects a pending job to start: its StartTime while PENDING (None once it holds nodes)."""
    return start_time if state == "PENDING" else None


# sinfo's states (lower case, ``*`` = not responding) that mean a job's node is in trouble
_TROUBLE = ("down", "drain", "fail", "not_responding", "no_respond", "unk", "future", "reboot", "power")


def node_trouble(states: Mapping[str, str]) -> tuple[tuple[str, str], ...]:
    """The (node, state) pairs of ``states`` that a job's owner should hear about."""
    out = []
    for node, state in sorted(states.items()):
        text = state.lower()
        if text.endswith("*") or any(word in text for word in _TROUBLE):
            out.append((node, state))
    return tuple(out)
