"""A FakeRunner answering the doctor's commands with what a real Slurm 22.05 sandbox printed (``data/``).

The recording (dgx-h100 profile, 2 nodes × 8 H100): job 14 "train" runs with 4 GPUs on node1, job 15 runs with
4 GPUs on node2 under the hostile name ``x UserId=root(0) JobState=RUNNING``, job 16 "big" waits for 8 GPUs on
one node (Resources), job 17 is held by its user, node2 is drained ("fan failure"). ``sbatch --test-only``
answers: 4 GPUs would start at 08:05:39, 8 GPUs for 10 minutes at 08:35:35 (the job itself expects 08:25:35).
That sandbox kept no accounting: ``sacctmgr`` answers as a 22.05 sandbox without accounting did (recorded by
``scripts/record_limits.py``), so no QOS or association limit is looked up.
``squeue --start`` of job 16 (``squeue_start_pending.txt``) is written to match: the same StartTime (squeue reads
the job's own field) and the one node of its partition that is not drained as the planned node.
"""

from __future__ import annotations

from pathlib import Path

from slurmlab.testing import ANY, FakeRunner

DATA = Path(__file__).resolve().parent / "data"

__all__ = ["DATA", "cluster", "read"]


def read(name: str) -> str:
    return (DATA / name).read_text()


def cluster(*, controller_up: bool = True) -> FakeRunner:
    fake = FakeRunner()
    fake.on(["sinfo", "--version"], stdout=read("sinfo_version.txt"))
    if not controller_up:
        fake.on(["scontrol", "ping"], stdout="Slurmctld(primary) at vm is DOWN\n", returncode=1)
        return fake
    fake.on(["scontrol", "ping"], stdout=read("ping_up.txt"))
    fake.on(["scontrol", "show", "node", "-d"], stdout=read("show_node_d.txt"))
    fake.on(["scontrol", "show", "partition"], stdout=read("show_partition.txt"))
    fake.on(["scontrol", "show", "config"], stdout=read("show_config.txt"))
    fake.on(["sinfo", "-R", "-N", "-h", "-o", ANY], stdout=read("sinfo_reasons.txt"))
    fake.on(["scontrol", "show", "job", "-d"], stdout=read("show_job_d_all.txt"))
    # every job of that recording, as `squeue -h -t all -o '%A|%U'` prints them (a listing of the text form is
    # held to squeue's ids: slurmlab.slurm.job_queries)
    fake.on(["squeue", "-h", "-t", "all", "-o", "%A|%U"], stdout=read("squeue_owners.txt"))
    for jid, name in (("16", "pending"), ("17", "held"), ("14", "running")):
        fake.on(["scontrol", "show", "job", "-d", jid], stdout=read(f"show_job_d_{name}.txt"))
    fake.on(["squeue", "--start", "-h", "-j", ANY, "-o", ANY], stdout="")
    fake.on(["squeue", "--start", "-h", "-j", "16", "-o", ANY], stdout=read("squeue_start_pending.txt"))
    fake.on(["scontrol", "show", "step", "14"], stdout=read("show_step_running.txt"))
    fake.replay("22.05/limits/o08_sacctmgr_nP_show.txt")  # accounting is off: no QOS/association limit
    fake.on(["sbatch", "--test-only", ...], stderr=read("test_only_refused.txt"), returncode=1)
    fake.on(["sbatch", "--test-only", ..., "--gpus=4", ...], stderr=read("test_only_4gpus.txt"))
    fake.on(
        ["sbatch", "--test-only", ..., "--gpus=8", "-t", ANY, "--wrap=true"],
        stderr=read("test_only_8gpus_t10.txt"),
    )
    return fake
