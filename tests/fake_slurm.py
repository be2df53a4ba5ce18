"""The recorded life of one Slurm 22.05 allocation, scripted on a FakeRunner (fast tests, no Slurm).

Everything comes from ``tests/data/slurm/22.05`` (``scripts/record-golden.py``, the ``l*`` files): job 19,
submitted as slurmlab submits one, pended for Resources while a blocker held every GPU, was granted 2 GPUs
on node1, ran a step and was cancelled. The recording ran as root, so its jobs belong to uid 0.
"""

from __future__ import annotations

from slurmlab.testing import FakeRunner, Reply, recorded

VERSION = "22.05"
JOB = "19"
NAME = "slurmlab-0123abcd"
OWNER_UID = 0
SALLOC = ["salloc", "--no-shell", ...]
UNKNOWN_JOB = "999999"
# prefix of the files that show job 19 in each state
STATES = {"pending": "l02", "running": "l06", "cancelled": "l12"}


def rec(name: str) -> Reply:
    return recorded(f"{VERSION}/{name}")


def cluster(fake: FakeRunner) -> FakeRunner:
    """The cluster-wide state (version, nodes, partitions, every job, owners, ping) and job 19's own
    owner, node states, step and scancel."""
    fake.replay_cluster(VERSION)
    fake.replay(*(f"{VERSION}/{n}" for n in ("l07_sinfo_node_states.txt", "l08_squeue_owner.txt",
                                              "l09_srun_overlap_hostname.txt", "l11_scancel.txt")))
    return fake


def job_in(fake: FakeRunner, state: str) -> None:
    """squeue and scontrol show job 19 as it was in ``state`` (pending, running or cancelled)."""
    prefix = STATES[state]
    fake.replay(f"{VERSION}/{prefix}_squeue_brief_{state}.txt", f"{VERSION}/{prefix}_scontrol_show_job_d_{state}.txt")


def pending_salloc() -> Reply:
    """salloc as it ran: pending until ``fake.release()``, then granted; a SIGINT while it pends gets
    what a pending salloc printed for one (l14, another job of the same recording)."""
    _, aborted = rec("l14_salloc_pending_interrupted.txt").split_stderr("queued and waiting")
    return rec("l01_salloc_pending.txt").held(after=rec("l05_salloc_granted.txt"), interrupted=aborted)


def granted_salloc() -> Reply:
    """The same salloc's whole stderr, for a request granted before the test looks."""
    granted = rec("l05_salloc_granted.txt")
    return Reply(stderr=rec("l01_salloc_pending.txt").stderr + granted.stderr, returncode=granted.returncode)


def controller_down(fake: FakeRunner) -> None:
    """slurmctld stopped: what every recorded query printed then (sinfo --version still answers)."""
    fake.replay(*(f"{VERSION}/{n}" for n in (
        "l19_squeue_brief_controller_down.txt", "l20_scontrol_show_job_d_controller_down.txt",
        "l21_scontrol_ping_controller_down.txt", "l22_sinfo_version_controller_down.txt",
        "l23_scontrol_show_job_d_controller_down.txt", "l25_scontrol_show_node_d_controller_down.txt",
        "l27_scontrol_show_partition_controller_down.txt", "l28_squeue_owners_controller_down.txt")))
