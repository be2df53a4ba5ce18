"""The recorded life of one Slurm 22.05 allocation, scripted on a FakeRunner (fast tests, no Slurm).

Everything comes from ``tests/data/slurm/22.05`` (``scripts/record-golden.py``, the ``l*`` files): job 19,
submitted as slurmlab submits one, pended for Resources while a blocker held every GPU, was granted 2 GPUs
on node1, ran a step and was cancelled. The recording ran as root, so its jobs belong to uid 0.
Below: where the golden files of every version are, for the parser tests.
"""

from __future__ import annotations

import json
from dataclasses import replace
from pathlib import Path

from slurmlab.core.request.inventory import ClusterInventory
from slurmlab.testing import FakeRunner, Reply, recorded
from slurmlab.testing.fake_runner import golden_dir

VERSION = "22.05"
JOB = "19"
NAME = "slurmlab-0123abcd"
OWNER_UID = 0
SALLOC = ["salloc", ...]  # held (release_at_exit) or --no-shell
UNKNOWN_JOB = "999999"
# prefix of the files that show job 19 in each state
STATES = {"pending": "l02", "running": "l06", "cancelled": "l12"}


def rec(name: str) -> Reply:
    return recorded(f"{VERSION}/{name}")


def cluster(fake: FakeRunner) -> FakeRunner:
    """The cluster-wide state (version, nodes, partitions, every job, owners, ping) and job 19's own
    owner, node states, step and scancel."""
    fake.replay_cluster(VERSION)
    node_brief(fake, VERSION)
    my_queue(fake, VERSION)
    fake.replay(
        *(
            f"{VERSION}/{n}"
            for n in (
                "l07_sinfo_node_states.txt",
                "l08_squeue_owner.txt",
                "l09_srun_overlap_hostname.txt",
                "l11_scancel.txt",
            )
        )
    )
    return fake


def node_brief(fake: FakeRunner, version: str) -> None:
    """The server's brief node poll (``sinfo -h -N -o '%N|%T|%C'``), derived from the recorded node detail of
    the same moment (``State=``, ``CPUAlloc=``, ``CPUTot=``): the recordings predate that command."""
    from slurmlab.server.nodetracker import NODE_BRIEF_ARGV

    lines = []
    for block in (golden_dir() / version / "s08_scontrol_show_node_d.txt").read_text().split("\n\n"):
        words = dict(w.split("=", 1) for w in block.split() if "=" in w)
        if "NodeName" in words:
            alloc, total = int(words.get("CPUAlloc", 0)), int(words.get("CPUTot", 0))
            state = words.get("State", "unknown").split("+")[0].lower()
            lines.append(f"{words['NodeName']}|{state}|{alloc}/{total - alloc}/0/{total}\n")
    fake.on(list(NODE_BRIEF_ARGV), stdout="".join(lines))


def my_queue(fake: FakeRunner, version: str) -> None:
    """The server's listing of the viewer's own jobs (``squeue -h -t all -u UID -o BRIEF``): every job of the
    recording was root's (uid 0, :data:`OWNER_UID`), so root's listing is the recorded whole brief listing; any
    other uid owns none of them, and squeue -h prints nothing."""
    from slurmlab.server.jobtracker import my_queue_argv
    from slurmlab.testing import ANY

    others = list(my_queue_argv(OWNER_UID))
    others[others.index(str(OWNER_UID))] = ANY
    fake.on(others, stdout="")
    fake.on(list(my_queue_argv(OWNER_UID)), stdout=recorded(f"{version}/s21_squeue_brief.txt").stdout)


def job_in(fake: FakeRunner, state: str) -> None:
    """squeue and scontrol show job 19 as it was in ``state`` (pending, running or cancelled)."""
    prefix = STATES[state]
    fake.replay(
        f"{VERSION}/{prefix}_squeue_brief_{state}.txt", f"{VERSION}/{prefix}_scontrol_show_job_d_{state}.txt"
    )


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
    fake.replay(
        *(
            f"{VERSION}/{n}"
            for n in (
                "l19_squeue_brief_controller_down.txt",
                "l20_scontrol_show_job_d_controller_down.txt",
                "l21_scontrol_ping_controller_down.txt",
                "l22_sinfo_version_controller_down.txt",
                "l23_scontrol_show_job_d_controller_down.txt",
                "l25_scontrol_show_node_d_controller_down.txt",
                "l27_scontrol_show_partition_controller_down.txt",
                "l28_squeue_owners_controller_down.txt",
            )
        )
    )


# ---- the golden files of every Slurm version, for parser tests -------------------------------------
# Each version's folder holds the same workload recorded by scripts/record-golden.py (its commands.txt):
# a 2-node dgx-h100 sandbox (node1-2, 112 CPUs and 8 x h100 + 32 shards each, one partition gpu) running
# jobs 1-13 (gpus2, gpn2, shard4, batchrun, heldjob, donejob, cancelme, the array 8 as jobs 8 and 11-13,
# bigwait, failjob) and a 1-node h200-mig sandbox with 2 threads per core (x_* files: migjob, mig3g, sock1).
GOLDEN_VERSIONS = ("22.05", "24.11", "26.05")


def golden_path(version: str, name: str) -> Path:
    """One recorded file of ``version``; a test that needs it fails (never skips) when it is absent."""
    path = golden_dir() / version / name
    assert path.is_file(), f"no golden file {path}: record it with scripts/record-golden.py"
    return path


def golden_outputs(*versions: str, pattern: str = "*") -> list[Path]:
    """Every recorded stdout of these versions (not the stderr files, not commands.txt)."""
    return sorted(
        p
        for v in versions or GOLDEN_VERSIONS
        for p in (golden_dir() / v).glob(pattern)
        if p.is_file() and p.suffix != ".stderr" and p.name != "commands.txt"
    )


def golden_with(name: str, *versions: str) -> list[str]:
    """The versions (of ``versions``, default all) whose recording holds ``name``: for parametrising."""
    return [v for v in versions or GOLDEN_VERSIONS if (golden_dir() / v / name).is_file()]


def golden_inventory(version: str) -> tuple[ClusterInventory, tuple[int, ...]]:
    """The recorded dgx-h100 cluster as slurmlab reads it, and the Slurm version ``sinfo --version`` said:
    nodes and partitions from ``scontrol show`` (text on 22.05, JSON from 24.11, whose partitions carry no
    default: that one comes from sinfo's ``*``, as slurmlab.slurm.queries.inventory takes it)."""
    from slurmlab.core.slurm.parse_json import parse_nodes_json, parse_partitions_json
    from slurmlab.core.slurm.parse_text import parse_scontrol_nodes, parse_scontrol_partitions
    from slurmlab.slurm.queries import build_inventory

    if version == "22.05":  # no scontrol --json there
        nodes = parse_scontrol_nodes(golden_path(version, "s08_scontrol_show_node_d.txt").read_text())
        parts = parse_scontrol_partitions(golden_path(version, "s16_scontrol_show_partition.txt").read_text())
    else:
        nodes = parse_nodes_json(
            json.loads(golden_path(version, "s07_scontrol_json_show_node.json").read_text())
        )
        parts = parse_partitions_json(
            json.loads(golden_path(version, "s09_scontrol_json_show_partition.json").read_text())
        )
    if not any(p.default for p in parts):
        starred = [
            n[:-1]
            for n in golden_path(version, "s20_sinfo_partitions.txt").read_text().split()
            if n.endswith("*")
        ]
        parts = [replace(p, default=p.name in starred) for p in parts]
    said = golden_path(version, "00_sinfo_version.txt").read_text().split()[-1]
    return build_inventory(nodes, parts), tuple(int(x) for x in said.split("."))
