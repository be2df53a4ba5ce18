import json, os, sys
from slurmlab.slurm.allocation import Allocation
from slurmlab.experiments.verify import verify
for argv in (["-n2", "--gres=shard:2"], ["-n2", "--gpus-per-task=1", "--gpu-bind=closest"]):
    a = Allocation.submit([*argv, "-t", "5"], name="h-probe")
    try:
        a.wait(timeout=60)
        print("ARGV", argv)
        print("ALLOCS", [x.to_dict() for x in a.job.gpu_allocs])
        print("TRES", a.job.tres_per_node, a.job.tres_per_task, a.job.tres_per_job, a.job.tres_bind)
        r = verify(a)
        for rep in r.meta["reports"]:
            print("ENV", {k: v for k, v in (rep.get("slurm_env") or {}).items() if "GPU" in k or "SHARD" in k or "CUDA" in k})
        print(r.summary())
    finally:
        a.cancel()
