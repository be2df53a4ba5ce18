"""The main job of ``make demo``: a real Slurm sandbox, a 2-node GPU allocation, one step, and a clean exit.

    python -m slurmlab.demo [--profile dgx-h100] [--dir DIR] [--keep]

Brings the sandbox up (dgx-h100: 2 nodes x 8 H100), allocates 4 GPUs over 2 nodes with closest binding and
enforced CPU binding through :class:`~slurmlab.slurm.allocation.Allocation` (salloc --no-shell in the
background), runs a step that prints each task's GPUs and CPU affinity, shows the allocation as Slurm records
it, releases it and brings the sandbox down.
"""

from __future__ import annotations

import argparse
import sys
from collections.abc import Sequence

from slurmlab.core.gpu.topology import format_cpu_list
from slurmlab.core.request.explain import explain
from slurmlab.core.request.request import parse_request
from slurmlab.errors import SlurmlabError
from slurmlab.sandbox import Sandbox
from slurmlab.slurm.allocation import Allocation, salloc_argv
from slurmlab.slurm.poller import JobPoller

SALLOC_ARGS = ["-N2", "-n4", "--gpus=4", "--gpu-bind=closest", "--gres-flags=enforce-binding", "-t", "10"]
STEP_ARGS = ["-n4", "--gpus-per-task=1"]
TASK_REPORT = (
    "import os\n"
    "cpus = sorted(os.sched_getaffinity(0))\n"
    "print(os.environ.get('SLURM_PROCID'), os.environ.get('SLURMD_NODENAME'),"
    " os.environ.get('CUDA_VISIBLE_DEVICES', '-'), os.environ.get('SLURM_STEP_GPUS', '-'),"
    " ','.join(map(str, cpus)), sep='|')\n"
)


def run(sb: Sandbox) -> None:
    runner = sb.runner()
    poller = JobPoller(runner)
    request = parse_request(SALLOC_ARGS)
    print(f"\n$ {' '.join(salloc_argv(SALLOC_ARGS))}")
    print(f"  = {explain(request)}")
    with Allocation.submit(SALLOC_ARGS, runner=runner, poller=poller) as alloc:
        alloc.wait(timeout=60)
        print(f"  granted: job {alloc.job_id}, {alloc.state}")
        job = alloc.job
        print(f"\nallocation of job {alloc.job_id} (scontrol show job -d):")
        if job is not None:
            for a in job.gpu_allocs:
                gres = ",".join(g.render() for g in a.items)
                print(f"  Nodes={a.node} CPU_IDs={a.cpu_ids or '-'} Mem={a.mem_mb or '-'} GRES={gres}")
            print(f"  binding: {job.tres_bind or '-'}, enforce-binding: {job.gres_binding_enforced}")
        print(f"\n$ srun --jobid={alloc.job_id} --overlap {' '.join(STEP_ARGS)} python3 -c <report GPUs and CPUs>")
        result = alloc.srun(["python3", "-c", TASK_REPORT], args=STEP_ARGS, on_output=lambda *_: None)
        if not result.ok:
            raise SlurmlabError("the step failed: " + " ".join(result.stderr[-3:]))
        rows = sorted((line.split("|") for line in result.stdout if line.count("|") == 4),
                      key=lambda r: int(r[0]))
        print(f"  {'task':>4}  {'node':<6} {'CUDA_VISIBLE_DEVICES':<21} {'SLURM_STEP_GPUS':<16} CPU affinity")
        for rank, node, cvd, gpus, cpus in rows:
            print(f"  {rank:>4}  {node:<6} {cvd:<21} {gpus:<16} {format_cpu_list(int(c) for c in cpus.split(',') if c)}")
    alloc.wait("ENDED", timeout=30)
    print(f"\nreleased job {alloc.job_id} (scancel): {alloc.state}")
    poller.stop()


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m slurmlab.demo", description=(__doc__ or "").splitlines()[0])
    parser.add_argument("--profile", default="dgx-h100")
    parser.add_argument("--dir", dest="directory", default=None)
    parser.add_argument("--keep", action="store_true", help="leave the sandbox running at the end")
    args = parser.parse_args(argv)
    try:
        sb = Sandbox.up(profile=args.profile, directory=args.directory)
    except SlurmlabError as exc:
        print(f"demo: {exc}", file=sys.stderr)
        return 2
    print(f"sandbox {sb.profile_name}: {len(sb.nodes)} nodes ({', '.join(sb.nodes)}), SLURM_CONF={sb.conf_path}"
          + (" (reused)" if sb.reused else ""))
    code = 0
    try:
        run(sb)
    except SlurmlabError as exc:
        print(f"demo failed: {exc}", file=sys.stderr)
        code = 1
    finally:
        if not args.keep and not sb.reused:
            sb.down()
            print(f"sandbox {sb.profile_name} is down; nothing left running")
    if code == 0:
        print(NEXT_STEPS)
    return code


# what a new user runs after the demo: the same sandbox in JupyterLab, or by hand
NEXT_STEPS = """
next:
  make lab                                           the sandbox and JupyterLab on the workshop notebooks, in
                                                     one command; it prints the URL; Ctrl-C stops both
  .venv/bin/slurmlab sandbox up                      start the sandbox again and leave it running
  eval "$(.venv/bin/slurmlab sandbox env)"; sinfo    use it from this shell with Slurm's own commands
  .venv/bin/jupyter lab notebooks/                   the workshop notebooks by hand; in one, `%load_ext slurmlab`
                                                     then `%slurm sandbox up` and `%salloc --gpus=2 -t 10`
  .venv/bin/slurmlab sandbox down                    stop it; nothing is left running
  .venv/bin/slurmlab notebooks DIR                   copy the workshop notebooks into a folder of your own"""


if __name__ == "__main__":
    sys.exit(main())
